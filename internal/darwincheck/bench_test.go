package darwincheck

import (
	"context"
	"testing"
)

// BenchmarkRunDriver is the warm-cache cost of checking the vz driver
// package: stub generation, go list, go vet and the cgo-free build.
func BenchmarkRunDriver(b *testing.B) {
	root := moduleRoot(b)
	for b.Loop() {
		if _, err := Run(context.Background(), Config{Dir: root, Patterns: []string{"./vm/vz/..."}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteStub is the cost of generating the vz stand-in.
func BenchmarkWriteStub(b *testing.B) {
	src, _, err := moduleSource(context.Background(), moduleRoot(b), "github.com/Code-Hex/vz/v3")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := WriteStub(src, b.TempDir()); err != nil {
			b.Fatal(err)
		}
	}
}
