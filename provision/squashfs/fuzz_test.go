package squashfs

import (
	"bytes"
	"io"
	"io/fs"
	"testing"
)

// FuzzOpen: a SquashFS image of any bytes (the modules of an image
// host's kernel) opens and is walked, every file read up to a bound, or
// fails; it never panics or loops.
func FuzzOpen(f *testing.F) {
	f.Add([]byte("hsqs"))
	f.Add(bytes.Repeat([]byte{0}, 96))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys, err := Open(bytes.NewReader(data))
		if err != nil {
			return
		}
		defer fsys.Close()
		n := 0
		fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if n++; n > 1000 {
				return fs.SkipAll
			}
			if d.Type().IsRegular() {
				if fh, err := fsys.Open(p); err == nil {
					io.Copy(io.Discard, io.LimitReader(fh, 1<<20))
					fh.Close()
				}
			}
			return nil
		})
	})
}

// FuzzUnxz: any block decodes within its limit or fails.
func FuzzUnxz(f *testing.F) {
	f.Add([]byte{0xfd, '7', 'z', 'X', 'Z', 0x00, 0x00, 0x01}, 1<<16)
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		if limit < 0 || limit > 1<<20 {
			return
		}
		if out, err := unxz(data, limit); err == nil && len(out) > limit {
			t.Fatalf("decoded %d bytes over the limit %d", len(out), limit)
		}
	})
}
