package projects

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"os"
)

type hasher struct{ hash.Hash }

func newHasher() hasher      { return hasher{sha256.New()} }
func (h hasher) sum() string { return hex.EncodeToString(h.Sum(nil)) }

// syncDir makes a rename in dir durable.
func syncDir(root *os.Root, dir string) {
	if d, err := root.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
