package kmod

import "testing"

// FuzzModule: a module file of any bytes (from an image host's kernel
// package) decompresses and yields its .modinfo, or fails.
func FuzzModule(f *testing.F) {
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0})
	f.Add([]byte{0x1f, 0x8b, 8, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := decompress(data)
		if err != nil {
			return
		}
		parseModinfo(obj)
	})
}
