//go:build linux || darwin

package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
)

var (
	alice = agents.Agent{ID: "a1", Name: "alice", Slug: "alice", UID: 10001, DiskGB: 3}
	bob   = agents.Agent{ID: "b2", Name: "bob", Slug: "bob", UID: 10002}
)

func ownerOf(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// An agent checkpoint puts back what the agent deleted and undoes what it
// added in its home and views, keeps its settings, and never touches
// another agent's files; the home folder itself stays (the guest mounts
// it).
func TestAgentCheckpointRestore(t *testing.T) {
	s := dataDir(t)
	p := s.Paths
	as := AgentStore{Paths: p}
	ctx := context.Background()
	home := filepath.Join(p.AgentHomes(), "alice")
	before, _ := os.Stat(home)
	m, err := as.CreateAgent(ctx, alice, "c1", "user")
	if err != nil {
		t.Fatal(err)
	}
	if m.Settings.DiskGB != 3 || len(m.Items) != 2 { // home, views (no baselines or state yet)
		t.Fatalf("meta: %+v", m)
	}
	// alice wrecks her home and view; bob changes his.
	os.Remove(filepath.Join(home, "notes.txt"))
	os.RemoveAll(filepath.Join(home, "proj"))
	write(t, filepath.Join(home, "junk"), "junk")
	write(t, filepath.Join(p.ProjectViews(), "alice/app/README"), "changed")
	write(t, filepath.Join(p.AgentHomes(), "bob/bob.txt"), "bob's new")
	if _, err := as.RestoreAgent(ctx, alice, "c1"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(home, "notes.txt")); got != "alice's notes" {
		t.Errorf("notes: %q", got)
	}
	if got := read(t, filepath.Join(home, "proj/main.go")); got != "package main" {
		t.Errorf("proj: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(home, "junk")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("what the agent added after the checkpoint is still there: %v", err)
	}
	if got := read(t, filepath.Join(p.ProjectViews(), "alice/app/README")); got != "view" {
		t.Errorf("view: %q", got)
	}
	if got := read(t, filepath.Join(p.AgentHomes(), "bob/bob.txt")); got != "bob's new" {
		t.Errorf("bob's file was touched by alice's restore: %q", got)
	}
	if after, _ := os.Stat(home); !os.SameFile(before, after) {
		t.Error("the home folder was replaced, not refilled: a guest's mount of it would go stale")
	}
	if l, _ := as.ListAgent(alice); len(l) != 1 || l[0].Label != "c1" {
		t.Errorf("list: %+v", l)
	}
	if l, _ := as.ListAgent(bob); len(l) != 0 {
		t.Errorf("bob sees alice's checkpoints: %+v", l)
	}
	if err := as.RemoveAgent(alice, "c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := as.GetAgent(alice, "c1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after remove: %v", err)
	}
}

// The agent's home is hostile: a link in it is saved as a link, and a
// restore after the agent swapped a folder of its home for a link to
// another agent's home writes nothing there.
func TestAgentRestoreFollowsNoLink(t *testing.T) {
	s := dataDir(t)
	p := s.Paths
	as := AgentStore{Paths: p}
	ctx := context.Background()
	home := filepath.Join(p.AgentHomes(), "alice")
	bobHome := filepath.Join(p.AgentHomes(), "bob")
	os.Symlink(filepath.Join(bobHome, "bob.txt"), filepath.Join(home, "steal"))
	if _, err := as.CreateAgent(ctx, alice, "c1", "user"); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(as.Dir(alice), "c1", "data", "home", "steal")
	if fi, err := os.Lstat(saved); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was followed into the checkpoint: %v %v", fi, err)
	}
	os.RemoveAll(filepath.Join(home, "proj"))
	os.Symlink(bobHome, filepath.Join(home, "proj"))
	if _, err := as.RestoreAgent(ctx, alice, "c1"); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(bobHome); len(ents) != 1 {
		t.Errorf("the restore wrote into bob's home through a link: %v", ents)
	}
	if got := read(t, filepath.Join(bobHome, "bob.txt")); got != "bob's" {
		t.Errorf("bob's file: %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(home, "proj")); err != nil || !fi.IsDir() {
		t.Errorf("proj after restore: %v %v", fi, err)
	}
}

// A fork has the original's files, given to its own uid; the original's
// stay the original's.
func TestAgentFork(t *testing.T) {
	s := dataDir(t)
	p := s.Paths
	as := AgentStore{Paths: p}
	home := filepath.Join(p.AgentHomes(), "alice")
	for _, f := range []string{"", "notes.txt", "proj", "proj/main.go", "link"} {
		os.Lchown(filepath.Join(home, f), alice.UID, alice.UID)
	}
	carol := agents.Agent{ID: "c3", Name: "carol", Slug: "carol", UID: 10003}
	r, err := as.Fork(context.Background(), alice, carol)
	if err != nil {
		t.Fatal(err)
	}
	// Only root gives files away; otherwise the guest must (the e2e fork
	// test covers that).
	root := os.Geteuid() == 0
	if root && r.GuestChown {
		t.Errorf("GuestChown %v as uid %d", r.GuestChown, os.Geteuid())
	}
	fork := filepath.Join(p.AgentHomes(), "carol")
	if got := read(t, filepath.Join(fork, "proj/main.go")); got != "package main" {
		t.Errorf("fork's file: %q", got)
	}
	for _, f := range []string{"", "notes.txt", "proj/main.go", "link"} {
		if u := ownerOf(t, filepath.Join(fork, f)); root && u != carol.UID {
			t.Errorf("fork's %q is uid %d, want %d", f, u, carol.UID)
		}
		if u := ownerOf(t, filepath.Join(home, f)); givesAway() && u != alice.UID {
			t.Errorf("original's %q is uid %d now", f, u)
		}
	}
	if got := read(t, filepath.Join(p.ProjectViews(), "carol/app/README")); got != "view" {
		t.Errorf("fork's view: %q", got)
	}
	if _, err := as.Fork(context.Background(), alice, carol); !errors.Is(err, ErrExists) {
		t.Errorf("a second fork into the same agent: %v", err)
	}
}

// RemoveAllAgent deletes one agent's checkpoints, half-written ones too,
// says how many and how much disk went, and leaves another agent's alone.
func TestRemoveAllAgent(t *testing.T) {
	s := dataDir(t)
	as := AgentStore{Paths: s.Paths}
	ctx := context.Background()
	var want int64
	for _, l := range []string{"c1", "c2"} {
		m, err := as.CreateAgent(ctx, alice, l, "user")
		if err != nil {
			t.Fatal(err)
		}
		want += m.DiskBytes
	}
	if _, err := as.CreateAgent(ctx, bob, "b1", "user"); err != nil {
		t.Fatal(err)
	}
	// A checkpoint interrupted while written.
	os.MkdirAll(filepath.Join(as.Dir(alice), ".new-c3-123", "data", "home"), 0o700)
	write(t, filepath.Join(as.Dir(alice), ".new-c3-123", "data", "home", "notes.txt"), "alice's notes")
	if want == 0 {
		t.Fatal("the checkpoints take no disk: the count below proves nothing")
	}
	for _, tc := range []struct {
		name  string
		agent agents.Agent
		n     int
		disk  int64
		err   bool
	}{
		{"alice's", alice, 2, want, false},
		{"again: none left", alice, 0, 0, false},
		{"an agent that never had any", agents.Agent{ID: "d4", Slug: "dave"}, 0, 0, false},
		{"an id that could leave the folder", agents.Agent{ID: "../b2", Slug: "bob"}, 0, 0, true},
	} {
		n, disk, err := as.RemoveAllAgent(tc.agent)
		if n != tc.n || disk != tc.disk || (err != nil) != tc.err {
			t.Errorf("%s: %d checkpoints, %d bytes, %v; want %d, %d, error %v", tc.name, n, disk, err, tc.n, tc.disk, tc.err)
		}
	}
	if _, err := os.Lstat(as.Dir(alice)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("alice's checkpoint folder after RemoveAllAgent: %v", err)
	}
	if l, err := as.ListAgent(bob); err != nil || len(l) != 1 || l[0].Label != "b1" {
		t.Errorf("bob's checkpoints after alice's went: %+v %v", l, err)
	}
}
