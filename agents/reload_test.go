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
