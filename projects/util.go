package projects

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io/fs"
	"os"
	"syscall"
)

type hasher struct{ hash.Hash }

func newHasher() hasher      { return hasher{sha256.New()} }
func (h hasher) sum() string { return hex.EncodeToString(h.Sum(nil)) }

// chownLike gives f the owner of like, when this process may (root); a
// user's own app writes files the user owns anyway.
func chownLike(f *os.File, like fs.FileInfo) {
	if os.Geteuid() != 0 {
		return
	}
	if st, ok := like.Sys().(*syscall.Stat_t); ok {
		f.Chown(int(st.Uid), int(st.Gid))
	}
}

// syncDir makes a rename in dir durable.
func syncDir(root *os.Root, dir string) {
	if d, err := root.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
