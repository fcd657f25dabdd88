package agents

import (
	"path/filepath"
	"testing"
)

// A change another process saved is seen by ReloadIfChanged at once,
// with no periodic reload in between.
func TestReloadIfChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.json")
	owner, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.ReloadIfChanged(); err != nil { // no file yet
		t.Fatal(err)
	}
	cli, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Add("alice"); err != nil {
		t.Fatal(err)
	}
	for _, enabled := range []bool{true, false, true} {
		if _, err := cli.Update("alice", func(a *Agent) error { a.AutonomousExec.Enabled = enabled; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := owner.ReloadIfChanged(); err != nil {
			t.Fatal(err)
		}
		a, err := owner.Get("alice")
		if err != nil || a.AutonomousExec.Enabled != enabled {
			t.Fatalf("the owner sees alice %+v %v, want enabled %v", a.AutonomousExec, err, enabled)
		}
	}
}

// A Reload running beside this registry's own writes never puts older
// records back: after each Update returns, Get sees it, however the
// reloads interleave.
func TestReloadNeverUndoesAWrite(t *testing.T) {
	r, err := Open(filepath.Join(t.TempDir(), "agents.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add("alice"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				r.Reload()
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for n := 1; n <= MaxCommandsPerTurn; n++ {
		if _, err := r.Update("alice", func(a *Agent) error { a.AutonomousExec.MaxCommandsPerTurn = n; return nil }); err != nil {
			t.Fatal(err)
		}
		if a, err := r.Get("alice"); err != nil || a.AutonomousExec.MaxCommandsPerTurn != n {
			t.Fatalf("after setting %d, Get says %d (%v): a reload put older records back", n, a.AutonomousExec.MaxCommandsPerTurn, err)
		}
	}
}
