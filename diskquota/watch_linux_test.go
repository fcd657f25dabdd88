//go:build linux

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

// An agent that makes many directories gets at most MaxWatchesPerAgent
// watches of the host user's inotify budget, another agent's directories
// are still watched, and what the first writes in its unwatched
// directories (new files, new directories, deletions) is still counted.
func TestTrackerBoundsWatchesPerAgent(t *testing.T) {
	ws := t.TempDir()
	homes := filepath.Join(ws, "agents")
	const many = 3 * MaxWatchesPerAgent
	for i := range many {
		if err := os.MkdirAll(filepath.Join(homes, "alice", fmt.Sprintf("d%05d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(homes, "bob", "b", "f"), 4096)
	tr := NewTracker(homes, ws)
	defer tr.Close()
	tr.Refresh()
	w, ok := tr.w.(*inotifyWatcher)
	if !ok || !tr.Incremental() {
		t.Fatal("no inotify watcher: raise fs.inotify.max_user_instances / max_user_watches")
	}
	w.mu.Lock()
	alice, bob := w.count["home alice"], w.count["home bob"]
	_, bobWatched := w.byDir[filepath.Join(homes, "bob", "b")]
	w.mu.Unlock()
	if alice > MaxWatchesPerAgent {
		t.Errorf("alice's %d directories take %d watches, want ≤ %d", many+1, alice, MaxWatchesPerAgent)
	}
	// The watches this process holds, as the kernel counts them.
	if n := kernelWatches(t, w.fd); n > MaxWatchesPerAgent+10 {
		t.Errorf("the tracker holds %d inotify watches, want ≤ %d", n, MaxWatchesPerAgent+10)
	}
	if bob != 2 || !bobWatched {
		t.Errorf("bob's 2 directories have %d watches (b watched: %v); alice's use must not take them", bob, bobWatched)
	}
	// What a refresh costs stays bounded, however many directories: a
	// share of them is read each time.
	for range 3 {
		before := tr.stats
		tr.Refresh()
		if n := tr.stats - before; n == 0 || n > rescanBudget {
			t.Fatalf("a refresh read %d paths, want some and at most rescanBudget (%d)", n, rescanBudget)
		}
	}
	last := filepath.Join(homes, "alice", fmt.Sprintf("d%05d", many-1))
	base := tr.Home("alice")
	steps := []struct {
		name string
		do   func()
		want func(int64) bool
	}{
		{"file in an unwatched directory", func() { write(t, filepath.Join(last, "f"), 1<<20) },
			func(n int64) bool { return n >= base+1<<20 }},
		{"file in a new directory under an unwatched one", func() { write(t, filepath.Join(last, "new", "g"), 2<<20) },
			func(n int64) bool { return n >= base+3<<20 }},
		{"new directory removed", func() { os.RemoveAll(filepath.Join(last, "new")) },
			func(n int64) bool { return n >= base+1<<20 && n < base+2<<20 }},
		{"file removed", func() { os.Remove(filepath.Join(last, "f")) },
			func(n int64) bool { return n < base+1<<20 }},
	}
	for _, s := range steps {
		s.do()
		// Counted within a few rescans, long before the full walk.
		i := 0
		if !testwait.Within(10*time.Second, time.Millisecond, func() bool {
			i++
			tr.Refresh()
			return s.want(tr.Home("alice")) || i > 2*(many/rescanBudget+2)
		}) || !s.want(tr.Home("alice")) {
			t.Fatalf("%s: alice = %d after %d refreshes (base %d)", s.name, tr.Home("alice"), i, base)
		}
	}
	// Removing alice's directories frees her watches for her again.
	for i := range many {
		os.Remove(filepath.Join(homes, "alice", fmt.Sprintf("d%05d", i)))
	}
	if !testwait.Within(10*time.Second, 10*time.Millisecond, func() bool {
		tr.Refresh()
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.count["home alice"] <= 1
	}) {
		t.Errorf("alice's watches were not released when her directories went: %d", w.count["home alice"])
	}
}

// kernelWatches counts the watches of inotify descriptor fd as the kernel
// lists them.
func kernelWatches(t *testing.T, fd int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\ninotify wd:"))
}
