//go:build unix

package secrets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
)

// fileStore is a Store on the file store of a fresh data folder, as
// ForDataDir builds it with secretStore "file".
func fileStore(t *testing.T) (*Store, config.Paths) {
	t.Helper()
	p := config.Paths{Root: t.TempDir()}
	s := config.Defaults()
	s.SecretStore = config.SecretStoreFile
	if err := config.SaveSandbox(p.SandboxJSON(), s); err != nil {
		t.Fatal(err)
	}
	return ForDataDir(p), p
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestFileStoreRoundTrip(t *testing.T) {
	s, p := fileStore(t)
	if _, err := os.Stat(p.SecretsDir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the secrets folder exists before any secret: %v", err)
	}
	if names, err := s.List("alice"); err != nil || len(names) != 0 {
		t.Fatalf("List with no file: %v %v", names, err)
	}
	if _, err := s.Get("alice", "TOKEN"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get with no file: %v, want ErrNotFound", err)
	}
	// Values are kept byte for byte: quotes, backslashes, newlines,
	// HTML characters JSON would escape, non-ASCII.
	vals := map[string]string{
		"TOKEN":  "sk-alice-123456",
		"QUOTED": `a "quoted" \back\slash`,
		"PEM":    "-----BEGIN KEY-----\nline\n-----END KEY-----\n",
		"HTML":   "<a&b>",
		"UTF":    "pässwörd-✓",
	}
	for k, v := range vals {
		if err := s.Set("alice", k, v); err != nil {
			t.Fatalf("Set %s: %v", k, err)
		}
	}
	if err := s.Set("bob", "TOKEN", "sk-bob-654321"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetApp(InferenceKey, "sk-app-000000"); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, p.SecretsFile()); got != 0o600 {
		t.Errorf("file mode %04o, want 0600", got)
	}
	if got := mode(t, p.SecretsDir()); got != 0o700 {
		t.Errorf("folder mode %04o, want 0700", got)
	}
	// A second store on the folder is another process: it reads from the
	// file, not from anything the first remembers.
	s2 := ForDataDir(p)
	for k, v := range vals {
		if got, err := s2.Get("alice", k); err != nil || got != v {
			t.Errorf("Get %s = %q, %v, want %q", k, got, err, v)
		}
	}
	if got, err := s2.GetApp(InferenceKey); err != nil || got != "sk-app-000000" {
		t.Errorf("GetApp = %q, %v", got, err)
	}
	if names, err := s2.List("alice"); err != nil || !slices.Equal(names, []string{"HTML", "PEM", "QUOTED", "TOKEN", "UTF"}) {
		t.Errorf("List = %v, %v", names, err)
	}
	if got := s2.Scrub("alice", "key=sk-alice-123456"); got != "key=[REDACTED:TOKEN]" {
		t.Errorf("Scrub = %q", got)
	}
	if err := s2.Remove("alice", "HTML"); err != nil {
		t.Fatal(err)
	}
	if err := s2.Remove("alice", "HTML"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Remove: %v, want ErrNotFound", err)
	}
	if gone, err := s2.RemoveAll("alice"); err != nil || len(gone) != 4 {
		t.Errorf("RemoveAll = %v, %v", gone, err)
	}
	if names, err := s.List("alice"); err != nil || len(names) != 0 {
		t.Errorf("List after RemoveAll = %v, %v", names, err)
	}
	if got, err := s.Get("bob", "TOKEN"); err != nil || got != "sk-bob-654321" {
		t.Errorf("bob's secret after alice's removal: %q, %v", got, err)
	}
	if w := s.Where(); !strings.Contains(w, p.SecretsFile()) {
		t.Errorf("Where = %q, want the file", w)
	}
	ents, _ := os.ReadDir(p.SecretsDir())
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temp file left behind: %s", e.Name())
		}
	}
}

// A value JSON can't hold as given is refused, not stored changed.
func TestFileStoreRefusesNonUTF8(t *testing.T) {
	s, p := fileStore(t)
	err := s.Set("alice", "BIN", "sk-\xff\xfe-123456")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not UTF-8") {
		t.Fatalf("Set of a non-UTF-8 value: %v, want ErrInvalid", err)
	}
	if _, err := os.Stat(p.SecretsFile()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused value created the file: %v", err)
	}
}

// The setting picks the backend, for every store ForDataDir builds, and
// a setting that can't be read is an error, never the keychain.
func TestForDataDirFollowsSetting(t *testing.T) {
	p := config.Paths{Root: t.TempDir()}
	s := ForDataDir(p)
	if s.Marks != p.SecretRemovals() {
		t.Errorf("Marks = %q, want %q", s.Marks, p.SecretRemovals())
	}
	if w := s.Where(); w != "the OS keychain" {
		t.Errorf("no setting: Where = %q, want the OS keychain", w)
	}
	cfg := config.Defaults()
	cfg.SecretStore = config.SecretStoreFile
	if err := config.SaveSandbox(p.SandboxJSON(), cfg); err != nil {
		t.Fatal(err)
	}
	// The same store follows a changed setting, as a running owner must.
	if err := s.Set("alice", "TOKEN", "sk-123456"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.SecretsFile()); err != nil {
		t.Fatalf("secretStore file did not write the file: %v", err)
	}
	if err := os.WriteFile(p.SandboxJSON(), []byte(`{"secretStore": "file",`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get("alice", "TOKEN")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "secretStore") || !strings.Contains(err.Error(), p.SandboxJSON()) || strings.Contains(err.Error(), "D-Bus") {
		t.Errorf("damaged settings: %v, want an error naming secretStore and %s", err, p.SandboxJSON())
	}
	// The setting is read again whenever the file is another one, even of
	// the same size and time (a rename into place, as every save does).
	fileSetting, keychainSetting := `{"secretStore":"file"    }`, `{"secretStore":"keychain"}`
	when := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, tt := range []struct{ body, want string }{{fileSetting, p.SecretsFile()}, {keychainSetting, "the OS keychain"}} {
		tmp := p.SandboxJSON() + ".new"
		if err := os.WriteFile(tmp, []byte(tt.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(tmp, when, when); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p.SandboxJSON()); err != nil {
			t.Fatal(err)
		}
		if w := s.Where(); !strings.Contains(w, tt.want) {
			t.Errorf("after %s was renamed into place: Where = %q, want %q", tt.body, w, tt.want)
		}
	}
}

// Each way the file or its folder could be exposed or swapped is refused,
// for reads and writes, with an error naming the path and the fix; a
// refused write changes nothing.
func TestFileStoreRefusesUnsafe(t *testing.T) {
	tests := []struct {
		name string
		// attack changes the folder holding a stored secret; it returns
		// the path the error must name.
		attack  func(t *testing.T, p config.Paths) string
		wantMsg string
		// writeOnly: only writes take the lock, so only they see it.
		writeOnly bool
	}{
		{"file readable by group", func(t *testing.T, p config.Paths) string {
			os.Chmod(p.SecretsFile(), 0o640)
			return p.SecretsFile()
		}, "chmod 600 ", false},
		{"file writable by others", func(t *testing.T, p config.Paths) string {
			os.Chmod(p.SecretsFile(), 0o602)
			return p.SecretsFile()
		}, "chmod 600 ", false},
		{"folder open to others", func(t *testing.T, p config.Paths) string {
			os.Chmod(p.SecretsDir(), 0o755)
			return p.SecretsDir()
		}, "chmod 700 ", false},
		{"file a symbolic link", func(t *testing.T, p config.Paths) string {
			// The link points at a private copy: even a target that
			// would pass is not followed.
			target := filepath.Join(t.TempDir(), "elsewhere.json")
			b, _ := os.ReadFile(p.SecretsFile())
			os.WriteFile(target, b, 0o600)
			os.Remove(p.SecretsFile())
			if err := os.Symlink(target, p.SecretsFile()); err != nil {
				t.Fatal(err)
			}
			return p.SecretsFile()
		}, "symbolic link", false},
		{"folder a symbolic link", func(t *testing.T, p config.Paths) string {
			moved := filepath.Join(t.TempDir(), "moved")
			if err := os.Rename(p.SecretsDir(), moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, p.SecretsDir()); err != nil {
				t.Fatal(err)
			}
			return p.SecretsDir()
		}, "symbolic link", false},
		{"file a folder", func(t *testing.T, p config.Paths) string {
			os.Remove(p.SecretsFile())
			os.Mkdir(p.SecretsFile(), 0o700)
			return p.SecretsFile()
		}, "not a regular file", false},
		{"file a FIFO", func(t *testing.T, p config.Paths) string {
			// Opening a FIFO for reading would block; it must not.
			os.Remove(p.SecretsFile())
			if err := syscall.Mkfifo(p.SecretsFile(), 0o600); err != nil {
				t.Fatal(err)
			}
			return p.SecretsFile()
		}, "not a regular file", false},
		{"lock a symbolic link", func(t *testing.T, p config.Paths) string {
			os.Remove(p.SecretsLock())
			if err := os.Symlink(filepath.Join(t.TempDir(), "lock"), p.SecretsLock()); err != nil {
				t.Fatal(err)
			}
			return p.SecretsLock()
		}, "symbolic link", true},
		{"lock readable by others", func(t *testing.T, p config.Paths) string {
			os.Chmod(p.SecretsLock(), 0o644)
			return p.SecretsLock()
		}, "chmod 600 ", true},
		{"owned by someone else", func(t *testing.T, p config.Paths) string {
			me := currentUID()
			currentUID = func() int { return me + 1 }
			t.Cleanup(func() { currentUID = os.Geteuid })
			return p.SecretsDir()
		}, "chown ", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, p := fileStore(t)
			if err := s.Set("alice", "TOKEN", "sk-alice-123456"); err != nil {
				t.Fatal(err)
			}
			named := tc.attack(t, p)
			before := snapshot(t, p.SecretsDir())
			_, gerr := s.Get("alice", "TOKEN")
			_, lerr := s.List("alice")
			serr := s.Set("alice", "OTHER", "sk-other-123456")
			for op, err := range map[string]error{"Get": gerr, "List": lerr, "Set": serr} {
				if tc.writeOnly && op != "Set" {
					if err != nil {
						t.Errorf("%s: %v, want the read to work", op, err)
					}
					continue
				}
				if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), named) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("%s: %v, want a refusal naming %s and %q", op, err, named, tc.wantMsg)
				}
				if err != nil && strings.Contains(err.Error(), "keychain") {
					t.Errorf("%s: %v speaks of the keychain", op, err)
				}
			}
			if after := snapshot(t, p.SecretsDir()); after != before {
				t.Errorf("a refused write changed the folder:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

// A real file of another user, where the test may make one.
func TestFileStoreRefusesOtherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give a file to another user; TestFileStoreRefusesUnsafe covers the check")
	}
	s, p := fileStore(t)
	if err := s.Set("alice", "TOKEN", "sk-alice-123456"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p.SecretsFile(), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("alice", "TOKEN"); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "belongs to user id 65534") {
		t.Errorf("Get of another user's file: %v", err)
	}
}

// snapshot is the folder's entries with their modes, link targets and
// contents, following the links the attacks make.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		fmt.Fprintf(&b, "%s %v", path, fi.Mode())
		if fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
			content, _ := os.ReadFile(target)
			fmt.Fprintf(&b, " -> %s %q", target, content)
			if sub, err := os.Stat(target); err == nil && sub.IsDir() {
				b.WriteString("\n" + snapshot(t, target))
			}
		} else if fi.Mode().IsRegular() {
			content, _ := os.ReadFile(path)
			fmt.Fprintf(&b, " %q", content)
		}
		b.WriteString("\n")
		return nil
	})
	return b.String()
}

// A damaged file is an error naming it and the way out, and no write
// replaces it: whatever it still holds can be recovered.
func TestFileStoreDamaged(t *testing.T) {
	tests := []struct{ name, body, wantMsg string }{
		{"not JSON", `{"version": 1, "secrets": {"osaurus-sandbox-test": {"alice/TOKEN": "sk-`, "unexpected EOF"},
		{"an array", `["alice/TOKEN"]`, "cannot unmarshal"},
		{"another version", `{"version": 2, "secrets": {}}`, "version 2"},
		{"no secrets", `{"version": 1}`, `no "secrets"`},
		{"an unknown field", `{"version": 1, "secrets": {}, "cipher": "aes"}`, "cipher"},
		{"two objects", `{"version": 1, "secrets": {}} {"version": 1, "secrets": {}}`, "more follows"},
		{"a value not a string", `{"version": 1, "secrets": {"osaurus-sandbox-test": {"alice/TOKEN": 5}}}`, "cannot unmarshal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, p := fileStore(t)
			if err := s.Set("bob", "TOKEN", "sk-bob-123456"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p.SecretsFile(), []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, gerr := s.Get("alice", "TOKEN")
			serr := s.Set("alice", "TOKEN", "sk-new-123456")
			_, rerr := s.RemoveAll("alice")
			for op, err := range map[string]error{"Get": gerr, "Set": serr, "RemoveAll": rerr} {
				if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), p.SecretsFile()+" is damaged") ||
					!strings.Contains(err.Error(), tc.wantMsg) || !strings.Contains(err.Error(), "mv "+p.SecretsFile()) {
					t.Errorf("%s: %v, want the file named as damaged (%q) with the way out", op, err, tc.wantMsg)
				}
			}
			if b, _ := os.ReadFile(p.SecretsFile()); string(b) != tc.body {
				t.Errorf("the damaged file was changed to %q", b)
			}
		})
	}
}

// An empty file never held a secret (every write replaces the file
// whole), so it is an empty store, as a missing one is.
func TestFileStoreEmptyFile(t *testing.T) {
	s, p := fileStore(t)
	if err := os.MkdirAll(p.SecretsDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.SecretsFile(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if names, err := s.List("alice"); err != nil || len(names) != 0 {
		t.Fatalf("List of an empty file: %v %v", names, err)
	}
	if err := s.Set("alice", "TOKEN", "sk-alice-123456"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get("alice", "TOKEN"); err != nil || v != "sk-alice-123456" {
		t.Fatalf("Get = %q, %v", v, err)
	}
}

// Writers on separate stores (as separate processes are: each opens the
// lock itself) lose none of each other's secrets: each write is a
// read-modify-write of the whole file, so without the lock two at once
// would drop one.
func TestFileStoreConcurrentWriters(t *testing.T) {
	_, p := fileStore(t)
	const writers, each = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := ForDataDir(p)
			for i := range each {
				if err := s.Set(fmt.Sprintf("agent%d", w), fmt.Sprintf("KEY_%d", i), fmt.Sprintf("value-%d-%d", w, i)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s := ForDataDir(p)
	for w := range writers {
		names, err := s.List(fmt.Sprintf("agent%d", w))
		if err != nil || len(names) != each {
			t.Errorf("agent%d: %d names (%v), want %d", w, len(names), err, each)
		}
		for i := range each {
			if v, err := s.Get(fmt.Sprintf("agent%d", w), fmt.Sprintf("KEY_%d", i)); err != nil || v != fmt.Sprintf("value-%d-%d", w, i) {
				t.Errorf("agent%d KEY_%d = %q, %v", w, i, v, err)
			}
		}
	}
}

// The error of a machine without a keychain points servers at the file
// store.
func TestHintNamesFileStore(t *testing.T) {
	if h := hint(); !strings.Contains(h, "config set secretStore file") {
		t.Errorf("hint() = %q, want it to name the file store", h)
	}
}
