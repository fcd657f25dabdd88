package ui

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/projects"
)

// A window that doesn't own the data folder (`serve` does) changes the
// agents and the projects through the owner's control socket: it reads a
// registry opened read-only, which refuses every change, and each change
// shows at once in the owner's registry (the real Host, this test), which
// re-reads nothing.
func TestWindowChangesGoThroughTheOwner(t *testing.T) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ow") // unix socket paths are short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := config.Paths{Root: dir}
	_, owned := openOwner(t, p)
	cl, err := client.Dial(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	b, err := NewBackend(ctx, cl, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	reg, err := agents.OpenReadOnly(p.AgentsJSON())
	if err != nil {
		t.Fatal(err)
	}
	app := test.NewTempApp(t)
	var w *Window
	lockedDo(func() {
		w = newWindow(app, b, reg, lockedDo)
		w.Win.Resize(fyne.NewSize(900, 760))
		w.Agents.Connect.home = t.TempDir()
	})
	t.Cleanup(w.Close)
	at := w.Agents

	typeIn(at.NewName, "alice")
	tap(at.Add)
	a, err := owned.Get("alice")
	if err != nil {
		t.Fatalf("added in the window, the owner has: %v (status %q)", err, at.Status.Text)
	}
	if _, err := reg.Get("alice"); err != nil {
		t.Fatalf("the window's view: %v", err)
	}
	lockedDo(func() { at.Enabled.SetChecked(true); at.MemoryMB.SetText("512") })
	tap(at.SaveAgent)
	if a, _ := owned.Get(a.ID); !a.AutonomousExec.Enabled || a.Resources.MemoryMB != 512 {
		t.Fatalf("saved in the window, the owner has %+v %+v", a.AutonomousExec, a.Resources)
	}
	old, _ := owned.Token(a.ID)
	tap(at.Regenerate)
	if tok, _ := owned.Token(a.ID); tok == old || !strings.Contains(at.CodeHTTP.Text, tok) {
		t.Fatal("the owner's token did not change, or the window shows another")
	}

	pt := w.Work.Projects
	lockedDo(func() { pt.Path.SetText(t.TempDir()) })
	typeIn(pt.Name, "web")
	tap(pt.Add)
	if _, err := projects.Get(p.ProjectsJSON(), "web"); err != nil {
		t.Fatalf("project added in the window: %v (status %q)", err, pt.Status.Text)
	}
	lockedDo(func() { pt.List.Select(0) })
	tap(pt.Remove)
	if _, err := projects.Get(p.ProjectsJSON(), "web"); !errors.Is(err, projects.ErrNotFound) {
		t.Fatalf("project removed in the window: %v (status %q)", err, pt.Status.Text)
	}

	// Its checkpoint goes with it, and the window says so.
	home := agents.HostHome(p.Workspace(), a.Slug)
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, "notes"), []byte("alice's notes"), 0o600)
	if _, err := cl.CreateAgentCheckpoint(ctx, api.AgentCheckpointRequest{Agent: a.ID, Label: "before"}); err != nil {
		t.Fatal(err)
	}
	tap(at.RemoveBtn)
	tapInOverlay(t, w.Win, "Yes")
	eventually(t, "the owner's removal", func() bool { return len(owned.List()) == 0 && len(reg.List()) == 0 })
	eventually(t, "the removal's summary", func() bool { return strings.Contains(at.Status.Text, "deleted its 1 checkpoint (") })
	if _, err := os.Stat(checkpoint.AgentStore{Paths: p}.Dir(a)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("alice's checkpoints after her removal in the window: %v", err)
	}

	// The window's own registry refuses to write.
	if _, err := reg.Add("mallory"); err == nil {
		t.Fatal("a read-only registry added an agent")
	}
}
