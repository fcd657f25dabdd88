package diskquota

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/internal/testwait"
)

func write(t *testing.T, p string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	// Random-ish content so no file system can compress or dedupe it.
	b := bytes.Repeat([]byte{0x5a, 0x13, 0x77, 0x01}, n/4)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The tracker follows writes, growth, deletions and moves, per home.
func TestTrackerFollowsChanges(t *testing.T) {
	ws := t.TempDir()
	homes := filepath.Join(ws, "agents")
	write(t, filepath.Join(homes, "alice", "a"), 1<<20)
	tr := NewTracker(homes, ws)
	defer tr.Close()
	tr.Refresh()
	base := tr.Home("alice")
	if base < 1<<20 {
		t.Fatalf("alice = %d, want ≥ 1 MiB", base)
	}
	steps := []struct {
		name string
		do   func()
		want func(int64) bool
	}{
		{"new file in a new directory", func() { write(t, filepath.Join(homes, "alice", "d", "e", "b"), 2<<20) },
			func(n int64) bool { return n >= base+2<<20 }},
		{"file grows", func() {
			f, _ := os.OpenFile(filepath.Join(homes, "alice", "a"), os.O_APPEND|os.O_WRONLY, 0)
			f.Write(bytes.Repeat([]byte{1, 2, 3, 4}, 1<<18))
			f.Close()
		}, func(n int64) bool { return n >= base+3<<20 }},
		{"directory deleted", func() { os.RemoveAll(filepath.Join(homes, "alice", "d")) },
			func(n int64) bool { return n < base+2<<20 && n >= base+1<<20 }},
		{"file moved out of the home", func() { os.Rename(filepath.Join(homes, "alice", "a"), filepath.Join(ws, "moved")) },
			func(n int64) bool { return n < 1<<20 }},
	}
	for _, s := range steps {
		s.do()
		// inotify delivers asynchronously: refresh until the change shows
		// or a generous deadline passes.
		if !testwait.Within(5*time.Second, 10*time.Millisecond, func() bool { tr.Refresh(); return s.want(tr.Home("alice")) }) {
			t.Fatalf("%s: alice = %d", s.name, tr.Home("alice"))
		}
	}
}

// A refresh after a small change re-reads what changed, not the tree: the
// cost the monitor pays every few seconds stays proportional to writes.
// (BenchmarkTrackerRefresh measures the time of both.)
func TestTrackerIncrementalCost(t *testing.T) {
	ws := t.TempDir()
	homes := filepath.Join(ws, "agents")
	const dirs, files = 50, 40
	for i := range dirs {
		for j := range files {
			write(t, filepath.Join(homes, "alice", fmt.Sprint(i), fmt.Sprint(j)), 4)
		}
	}
	tr := NewTracker(homes, ws)
	defer tr.Close()
	tr.Refresh()
	if !tr.Incremental() {
		t.Fatal("the tracker fell back to walking: inotify is unavailable or out of watches (raise fs.inotify.max_user_instances / max_user_watches)")
	}
	full := tr.stats
	if full < dirs*files {
		t.Fatalf("first walk read %d paths, want ≥ %d", full, dirs*files)
	}
	before := tr.Home("alice")
	write(t, filepath.Join(homes, "alice", "0", "new"), 1<<20)
	start := tr.stats
	if !testwait.Within(5*time.Second, 5*time.Millisecond, func() bool { tr.Refresh(); return tr.Home("alice") >= before+1<<20 }) {
		t.Fatal("the write never showed")
	}
	// The new file and its directory, perhaps seen by a few events each.
	if n := tr.stats - start; n > 10 {
		t.Errorf("refreshes after one write read %d paths; a full walk reads %d", n, full)
	}
}

// BenchmarkTrackerRefresh measures a full walk of 20,000 files side by side
// with a refresh after one write to the same tree.
func BenchmarkTrackerRefresh(b *testing.B) {
	ws := b.TempDir()
	homes := filepath.Join(ws, "agents")
	for i := range 200 {
		for j := range 100 {
			p := filepath.Join(homes, "alice", fmt.Sprint(i), fmt.Sprint(j))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("full-walk", func(b *testing.B) {
		tr := NewTracker(homes, ws)
		defer tr.Close()
		tr.w.close() // walk on every refresh
		tr.w = nil
		for b.Loop() {
			tr.Refresh()
		}
	})
	b.Run("after-one-write", func(b *testing.B) {
		tr := NewTracker(homes, ws)
		defer tr.Close()
		tr.Refresh()
		p := filepath.Join(homes, "alice", "0", "new")
		n := 0
		for b.Loop() {
			n++
			if err := os.WriteFile(p, bytes.Repeat([]byte{1}, n%4096), 0o644); err != nil {
				b.Fatal(err)
			}
			tr.Refresh()
		}
	})
}
