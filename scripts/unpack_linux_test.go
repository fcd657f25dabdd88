// Package scripts holds the tests of the build scripts beside it, which
// run on Linux (make test-guest builds the guest on Debian).
package scripts

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// moduleFiles is how many files the stand-in kernel tarball holds: enough
// that an unpack takes long enough for runs to overlap.
const moduleFiles = 600

// writeGuest writes what build-test-guest.sh leaves in dir that the unpack
// reads: debian-kernel.tar.gz (every file holding key) and .key.
func writeGuest(t *testing.T, dir, key string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "debian-kernel.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	add := func(name, body string) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	add("boot/vmlinuz", key)
	for i := range moduleFiles - 1 {
		add(fmt.Sprintf("lib/modules/6.1.0-test/kernel/m%03d/x.ko", i), key)
	}
	for _, c := range []interface{ Close() error }{tw, zw, f} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".key"), []byte(key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// unpack runs unpack-test-kernel.sh.
func unpack(guest, out string) ([]byte, error) {
	return exec.Command("bash", "unpack-test-kernel.sh", guest, out).CombinedOutput()
}

func needTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"bash", "flock", "tar", "gzip", "cmp", "mktemp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: apt-get install bash util-linux tar gzip diffutils coreutils", tool)
		}
	}
}

// countFiles counts the regular files under dir.
func countFiles(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && d.Name() != ".key" {
			n++
		}
		return err
	})
	return n, err
}

// Runs of `make test-guest` sharing the cache unpack the test kernel at
// once, as the guest changes under them: every run succeeds, and whenever
// the unpacked folder has a key, it is complete (the Makefile's old
// in-place unpack let one run's rm -rf cut another's unpack short with the
// key in place, so nothing re-extracted).
func TestUnpackTestKernelConcurrent(t *testing.T) {
	needTools(t)
	cache := t.TempDir()
	guest, out := filepath.Join(cache, "test-guest"), filepath.Join(cache, "test-guest-kernel")
	for round := range 3 {
		key := fmt.Sprintf("key-%d", round)
		writeGuest(t, guest, key)
		var done atomic.Bool
		var bad atomic.Value
		observed := make(chan struct{})
		go func() { // sees the folder as a test reading it would
			defer close(observed)
			for !done.Load() {
				if _, err := os.Stat(filepath.Join(out, ".key")); err != nil {
					continue
				}
				n, err := countFiles(out)
				if err == nil && n != moduleFiles {
					bad.Store(fmt.Sprintf("round %d: a key beside %d of %d files", round, n, moduleFiles))
				}
			}
		}()
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if b, err := unpack(guest, out); err != nil {
					errs[i] = fmt.Errorf("%v: %s", err, b)
				}
			}()
		}
		wg.Wait()
		done.Store(true)
		<-observed
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if b := bad.Load(); b != nil {
			t.Fatal(b)
		}
		if n, err := countFiles(out); err != nil || n != moduleFiles {
			t.Fatalf("round %d: %d files (%v), want %d", round, n, err, moduleFiles)
		}
		for _, f := range []string{".key", "boot/vmlinuz", "lib/modules/6.1.0-test/kernel/m123/x.ko"} {
			b, err := os.ReadFile(filepath.Join(out, f))
			if err != nil || strings.TrimSpace(string(b)) != key {
				t.Fatalf("round %d: %s holds %q (%v), want %q", round, f, b, err, key)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(cache, ".test-guest-kernel.*")); len(left) != 0 {
			t.Fatalf("round %d: temporary folders left behind: %v", round, left)
		}
	}
}

// A damaged tarball fails the run and leaves the last complete unpack
// (and its key) as it was; the next good guest replaces it.
func TestUnpackTestKernelDamaged(t *testing.T) {
	needTools(t)
	cache := t.TempDir()
	guest, out := filepath.Join(cache, "test-guest"), filepath.Join(cache, "test-guest-kernel")
	writeGuest(t, guest, "good")
	if b, err := unpack(guest, out); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	writeGuest(t, guest, "damaged")
	tgz := filepath.Join(guest, "debian-kernel.tar.gz")
	b, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tgz, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := unpack(guest, out); err == nil {
		t.Fatalf("a truncated tarball unpacked: %s", b)
	}
	if k, _ := os.ReadFile(filepath.Join(out, ".key")); strings.TrimSpace(string(k)) != "good" {
		t.Fatalf("after a failed unpack the key is %q, want the last complete one", k)
	}
	if n, err := countFiles(out); err != nil || n != moduleFiles {
		t.Fatalf("after a failed unpack: %d files (%v)", n, err)
	}
	writeGuest(t, guest, "fixed")
	if b, err := unpack(guest, out); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if k, _ := os.ReadFile(filepath.Join(out, ".key")); strings.TrimSpace(string(k)) != "fixed" {
		t.Fatalf("key %q after the good unpack", k)
	}
}
