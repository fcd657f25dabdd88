//go:build linux || darwin

package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A copy keeps its source's mode and times, even a mode that denies
// writes (macOS reopens a clone to finish it).
func TestCloneFileKeepsModeAndTimes(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	write(t, src, "content")
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(src, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(src, 0o444); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "dst")
	if err := cloneFile(src, dst, &stats{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o444 || !fi.ModTime().Equal(mtime) {
		t.Errorf("copy: mode %v, mtime %v; want 0444, %v", fi.Mode().Perm(), fi.ModTime(), mtime)
	}
	if got := read(t, dst); got != "content" {
		t.Errorf("copy holds %q", got)
	}
}

// A copy never lands on an existing name, nor writes through a link
// there (O_EXCL on Linux; clonefile's EEXIST on macOS).
func TestCloneFileRefusesAnExistingName(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	write(t, src, "new")
	victim := filepath.Join(dir, "victim")
	write(t, victim, "victim")
	dst := filepath.Join(dir, "dst")
	if err := os.Symlink(victim, dst); err != nil {
		t.Fatal(err)
	}
	if err := cloneFile(src, dst, &stats{}); err == nil {
		t.Error("cloneFile onto a symlink succeeded")
	}
	if got := read(t, victim); got != "victim" {
		t.Errorf("written through the link: %q", got)
	}
}
