package filewatch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// wait is how long a change may take to be signalled; quiet is how long a
// watcher must stay silent to pass as not signalling.
const (
	wait  = 5 * time.Second
	quiet = 300 * time.Millisecond
)

func expect(t *testing.T, w *Watcher, what string) {
	t.Helper()
	select {
	case <-w.C():
	case <-time.After(wait):
		t.Fatalf("%s: no change signalled in %v", what, wait)
	}
}

func expectNone(t *testing.T, w *Watcher, what string) {
	t.Helper()
	select {
	case <-w.C():
		t.Fatalf("%s: signalled a change", what)
	case <-time.After(quiet):
	}
}

// drain takes a pending signal left by setup.
func drain(w *Watcher) {
	select {
	case <-w.C():
	default:
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := atomicfile.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, path, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
}

func TestFile(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, dir, file string) // before watching
		change func(t *testing.T, dir, file string)
		signal bool
	}{
		{"created by atomic rename", nil,
			func(t *testing.T, _, file string) { write(t, file, "a") }, true},
		{"replaced by atomic rename", func(t *testing.T, _, file string) { write(t, file, "a") },
			func(t *testing.T, _, file string) { write(t, file, "b") }, true},
		{"appended to", func(t *testing.T, _, file string) { appendTo(t, file, "a") },
			func(t *testing.T, _, file string) { appendTo(t, file, "b") }, true},
		{"removed", func(t *testing.T, _, file string) { write(t, file, "a") },
			func(t *testing.T, _, file string) { os.Remove(file) }, true},
		{"another file in its folder", nil,
			func(t *testing.T, dir, _ string) { write(t, filepath.Join(dir, "other.json"), "a") }, false},
		{"its folder created later, then the file", func(t *testing.T, dir, _ string) { os.RemoveAll(dir) },
			func(t *testing.T, dir, file string) {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				write(t, file, "a")
			}, true},
		{"its folder removed", func(t *testing.T, _, file string) { write(t, file, "a") },
			func(t *testing.T, dir, _ string) { os.RemoveAll(dir) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a", "b")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, "agents.json")
			if tt.setup != nil {
				tt.setup(t, dir, file)
			}
			w := Watch(t.Context(), time.Hour, File(file))
			defer w.Close()
			tt.change(t, dir, file)
			if tt.signal {
				expect(t, w, tt.name)
			} else {
				expectNone(t, w, tt.name)
			}
		})
	}
}

// TestFileAfterReplace checks the watch survives its file being replaced
// and its folder being created: each later write is still signalled.
func TestFileAfterReplace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing", "dir")
	file := filepath.Join(dir, "console.log")
	w := Watch(t.Context(), time.Hour, File(file))
	defer w.Close()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, data := range []string{"one", "two", "three"} {
		write(t, file, data)
		expect(t, w, "write "+data)
		appendTo(t, file, "more")
		expect(t, w, "append after write "+data)
	}
}

func TestDir(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, dir string)
		signal bool
	}{
		{"plugin added by atomic rename", func(t *testing.T, dir string) { write(t, filepath.Join(dir, "p.json"), "{}") }, true},
		{"plugin removed", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "old.json")) }, true},
		{"plugin rewritten in place", func(t *testing.T, dir string) { appendTo(t, filepath.Join(dir, "old.json"), " ") }, true},
		{"only a temporary file", func(t *testing.T, dir string) {
			f, err := os.CreateTemp(dir, ".p.json.tmp-*")
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("{}")
			f.Close()
		}, false},
		{"a file in a subfolder", func(t *testing.T, dir string) { write(t, filepath.Join(dir, "sub", "p.json"), "{}") }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "old.json"), "{}")
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
				t.Fatal(err)
			}
			w := Watch(t.Context(), time.Hour, Dir(dir))
			defer w.Close()
			tt.change(t, dir)
			if tt.signal {
				expect(t, w, tt.name)
			} else {
				expectNone(t, w, tt.name)
			}
		})
	}
}

// TestCoalesced checks a burst of writes leaves at most one pending
// signal, so a reader re-reads once, not once per write.
func TestCoalesced(t *testing.T) {
	file := filepath.Join(t.TempDir(), "console.log")
	w := Watch(t.Context(), time.Hour, File(file))
	defer w.Close()
	for range 100 {
		appendTo(t, file, "line\n")
	}
	expect(t, w, "burst")
	if got := len(w.C()); got > 1 {
		t.Fatalf("%d signals pending after a burst, want at most 1", got)
	}
}

// TestClose checks a closed watcher signals nothing more, also when its
// context ended first.
func TestClose(t *testing.T) {
	for _, viaCtx := range []bool{false, true} {
		dir := t.TempDir()
		ctx, cancel := context.WithCancel(t.Context())
		w := Watch(ctx, time.Hour, Dir(dir))
		if viaCtx {
			cancel()
		}
		w.Close()
		w.Close() // again: harmless
		drain(w)
		write(t, filepath.Join(dir, "a.json"), "{}")
		expectNone(t, w, "after close")
		cancel()
	}
}

// TestReset checks a watcher follows the targets it was last given: the
// plugins tab follows one installed.json per agent, and agents come and go.
func TestReset(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a", "installed.json"), filepath.Join(root, "b", "installed.json")
	w := Watch(t.Context(), time.Hour, Dir(root), File(a))
	defer w.Close()
	write(t, filepath.Join(root, "lib.json"), "{}")
	expect(t, w, "first target")
	if err := os.MkdirAll(filepath.Dir(a), 0o700); err != nil {
		t.Fatal(err)
	}
	expect(t, w, "agent folder created")
	write(t, a, "{}")
	expect(t, w, "file of a watched folder that was missing")

	w.Reset(Dir(root), File(b)) // a is no longer followed
	if err := os.MkdirAll(filepath.Dir(b), 0o700); err != nil {
		t.Fatal(err)
	}
	expect(t, w, "agent folder created")
	write(t, b, "{}")
	expect(t, w, "new target")
	write(t, a, "{}")
	expectNone(t, w, "dropped target")
}

// TestPollFallback checks the fallback signals every interval.
func TestPollFallback(t *testing.T) {
	w := newWatcher()
	done := make(chan struct{})
	defer close(done)
	go w.pollLoop(done, time.Millisecond)
	expect(t, w, "poll")
	expect(t, w, "poll again")
}
