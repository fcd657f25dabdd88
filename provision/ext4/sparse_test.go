package ext4

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestImageFileMatchesModel drives the caching, hole-skipping backend with
// random reads and writes and checks it always agrees with a plain buffer,
// before and after flushes, including flushes forced by the memory limit.
func TestImageFileMatchesModel(t *testing.T) {
	const size = 4 << 20
	tests := []struct {
		name  string
		limit int
	}{
		{name: "large cache", limit: cacheLimit},
		{name: "cache flushed often", limit: 8 * cacheBlock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "img"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(size); err != nil {
				t.Fatal(err)
			}
			img := newImageFile(f, size)
			img.limit = tt.limit
			model := make([]byte, size)
			r := rand.New(rand.NewPCG(7, 7))

			for i := range 3000 {
				n := 1 + r.IntN(3*cacheBlock)
				if r.IntN(10) == 0 {
					n = directWrite + r.IntN(4*directWrite)
				}
				off := r.Int64N(int64(size - n))
				switch op := r.IntN(4); op {
				case 0, 1: // write, zeros half of the time
					p := make([]byte, n)
					if op == 0 {
						for j := range p {
							p[j] = byte(r.Uint32())
						}
					}
					if _, err := img.WriteAt(p, off); err != nil {
						t.Fatalf("op %d: WriteAt: %v", i, err)
					}
					copy(model[off:], p)
				case 2:
					got := make([]byte, n)
					if _, err := img.ReadAt(got, off); err != nil {
						t.Fatalf("op %d: ReadAt: %v", i, err)
					}
					if !bytes.Equal(got, model[off:off+int64(n)]) {
						t.Fatalf("op %d: ReadAt(%d, %d) differs from model", i, n, off)
					}
				case 3:
					if r.IntN(20) == 0 {
						if err := img.Flush(); err != nil {
							t.Fatalf("op %d: Flush: %v", i, err)
						}
					}
				}
			}
			if err := img.Flush(); err != nil {
				t.Fatal(err)
			}
			onDisk, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(onDisk, model) {
				t.Fatal("file content after Flush differs from model")
			}
		})
	}
}
