package provision

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// copySparse must give the same bytes and keep the holes: the pristine
// root disk is 8 GiB with a few hundred MiB of data.
func TestCopySparseKeepsContentAndHoles(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	chunks := map[int64][]byte{
		0:           bytes.Repeat([]byte("head"), 1024),
		20 << 20:    bytes.Repeat([]byte{0xa5}, 1<<20),
		size - 4096: bytes.Repeat([]byte("tail"), 1024),
	}
	for off, b := range chunks {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	dst := filepath.Join(dir, "dst")
	if err := os.WriteFile(dst, []byte("old disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := copySparse(context.Background(), dst, src); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(src)
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("copy differs from the source")
	}
	if used := diskUsage(t, dst); used > 8<<20 {
		t.Errorf("copy uses %d bytes on disk; want the holes kept (< 8 MiB)", used)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".dst.*")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestCopySparseCancelledLeavesDestination(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.WriteFile(src, []byte("new"), 0o644)
	os.WriteFile(dst, []byte("old"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := copySparse(ctx, dst, src); err == nil {
		t.Fatal("cancelled copy succeeded")
	}
	if b, _ := os.ReadFile(dst); string(b) != "old" {
		t.Errorf("dst = %q after a cancelled copy; want it untouched", b)
	}
}

// Every input of the disk must change the key, or a Reset would hand out a
// disk built from something else.
func TestDiskCacheKeyCoversInputs(t *testing.T) {
	base := diskCacheKey("sha-a", []byte("agent-1"), 8<<30)
	for _, tc := range []struct {
		name string
		key  string
	}{
		{"rootfs", diskCacheKey("sha-b", []byte("agent-1"), 8<<30)},
		{"agent", diskCacheKey("sha-a", []byte("agent-2"), 8<<30)},
		{"size", diskCacheKey("sha-a", []byte("agent-1"), 4<<30)},
	} {
		if tc.key == base {
			t.Errorf("changing the %s keeps the key %s", tc.name, base)
		}
	}
	if again := diskCacheKey("sha-a", []byte("agent-1"), 8<<30); again != base {
		t.Errorf("same inputs give keys %s and %s", base, again)
	}
}
