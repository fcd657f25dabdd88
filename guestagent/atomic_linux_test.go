//go:build linux

package guestagent

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestReplaceFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		existing os.FileMode // 0: no file there before
		write    func(p string) error
		want     os.FileMode
		wantUID  uint32
	}{
		{"atomic keeps mode and owner", 0o600, func(p string) error { return WriteFileAtomic(p, []byte("new")) }, 0o600, 1234},
		{"atomic new file", 0, func(p string) error { return WriteFileAtomic(p, []byte("new")) }, 0o644, 0},
		{"boot file is root's with its mode", 0o600, func(p string) error { return RewriteBootFile(p, []byte("new"), 0o755) }, 0o755, 0},
		{"boot file new", 0, func(p string) error { return RewriteBootFile(p, []byte("new"), 0o644) }, 0o644, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := filepath.Join(dir, tc.name)
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(sub, "f")
			if tc.existing != 0 {
				if err := os.WriteFile(p, []byte("old"), tc.existing); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(p, 1234, 1234); err != nil {
					t.Fatal(err)
				}
			}
			if err := tc.write(p); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(p); string(got) != "new" {
				t.Errorf("content %q, want %q", got, "new")
			}
			if fi.Mode().Perm() != tc.want || !fi.Mode().IsRegular() {
				t.Errorf("mode %v, want a regular file with %v", fi.Mode(), tc.want)
			}
			if ents, _ := os.ReadDir(sub); len(ents) != 1 {
				t.Errorf("%d entries left in the folder, want only the file (no temporary file)", len(ents))
			}
			if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != tc.wantUID {
				t.Errorf("owner %d, want %d", uid, tc.wantUID)
			}
		})
	}
}
