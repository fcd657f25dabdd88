//go:build unix

package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The host's open of an artifact refuses whatever the agent can turn its
// artifact into after sharing (it owns /output/<slug>): a link to a host
// file, a link within /output, other bytes, a FIFO, a directory; and the
// kept copy that host_path names stays the bytes shared.
func TestOpenArtifactRefusesWhatChanged(t *testing.T) {
	const shared = "the report\n"
	sum := sha256.Sum256([]byte(shared))
	hexSum := hex.EncodeToString(sum[:])
	secret := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(secret, []byte(shared), 0o600); err != nil { // even with the same bytes
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		attack func(t *testing.T, p string)
	}{
		{"unchanged", func(*testing.T, string) {}},
		{"link to a host file", func(t *testing.T, p string) { replaceWith(t, p, func(n string) error { return os.Symlink(secret, n) }) }},
		{"link within output", func(t *testing.T, p string) {
			other := filepath.Join(filepath.Dir(p), "copy")
			os.WriteFile(other, []byte(shared), 0o644)
			replaceWith(t, p, func(n string) error { return os.Symlink("copy", n) })
		}},
		{"other bytes", func(t *testing.T, p string) { os.WriteFile(p, []byte("the reporT\n"), 0o644) }},
		{"appended", func(t *testing.T, p string) {
			f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("more")
			f.Close()
		}},
		{"FIFO", func(t *testing.T, p string) {
			replaceWith(t, p, func(n string) error { return syscall.Mkfifo(n, 0o644) })
		}},
		{"directory", func(t *testing.T, p string) { replaceWith(t, p, func(n string) error { return os.Mkdir(n, 0o755) }) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, keep := t.TempDir(), t.TempDir()
			p := filepath.Join(out, "alice", "report.txt")
			os.Mkdir(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(shared), 0o644); err != nil {
				t.Fatal(err)
			}
			kept, err := keepArtifact(context.Background(), out, keep, "alice", "report.txt", hexSum)
			if err != nil {
				t.Fatal(err)
			}
			tc.attack(t, p)
			f, err := OpenArtifact(context.Background(), out, "alice", "report.txt", hexSum)
			if tc.name == "unchanged" {
				if err != nil {
					t.Fatalf("the unchanged artifact: %v", err)
				}
				b, _ := io.ReadAll(f)
				f.Close()
				if string(b) != shared {
					t.Fatalf("read %q", b)
				}
			} else if err == nil {
				f.Close()
				t.Fatal("opened")
			} else if !errors.Is(err, ErrArtifactChanged) && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("refused with %v, want ErrArtifactChanged", err)
			}
			if b, err := os.ReadFile(kept); err != nil || string(b) != shared {
				t.Errorf("the kept copy %s holds %q (%v)", kept, b, err)
			}
			if fi, err := os.Lstat(kept); err != nil || !fi.Mode().IsRegular() || filepath.Dir(filepath.Dir(kept)) != keep {
				t.Errorf("the kept copy %s: %v %v", kept, fi, err)
			}
		})
	}
}

// A share whose artifact changed between the guest's copy and the host's
// check keeps nothing.
func TestKeepArtifactRefusesChanged(t *testing.T) {
	out, keep := t.TempDir(), t.TempDir()
	os.Mkdir(filepath.Join(out, "alice"), 0o755)
	os.WriteFile(filepath.Join(out, "alice", "a"), []byte("swapped"), 0o644)
	sum := sha256.Sum256([]byte("shared"))
	if _, err := keepArtifact(context.Background(), out, keep, "alice", "a", hex.EncodeToString(sum[:])); !errors.Is(err, ErrArtifactChanged) {
		t.Fatalf("keep: %v, want ErrArtifactChanged", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(keep, "alice")); len(ents) != 0 {
		t.Errorf("kept %v", ents)
	}
	for _, bad := range []struct{ slug, name string }{{"..", "a"}, {"alice", "../x"}, {"alice", ""}, {"a/b", "c"}} {
		if _, err := OpenArtifact(context.Background(), out, bad.slug, bad.name, ""); err == nil {
			t.Errorf("OpenArtifact(%q, %q) opened", bad.slug, bad.name)
		}
	}
}

// replaceWith swaps p for what mk makes, atomically, as an agent would.
func replaceWith(t *testing.T, p string, mk func(string) error) {
	t.Helper()
	n := p + ".new"
	if err := mk(n); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(n, p); err != nil {
		// A directory can't replace a file by rename.
		os.Remove(p)
		if err := os.Rename(n, p); err != nil {
			t.Fatal(err)
		}
	}
}
