//go:build linux

package ui

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"fyne.io/fyne/v2/widget"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

// storeCheckpoints is api.Checkpointer over a real checkpoint store of a
// data folder with a stopped VM (the owner's part, holding the VM still,
// is the host's and e2e's to test).
type storeCheckpoints struct{ s checkpoint.Store }

func (c storeCheckpoints) CreateCheckpoint(ctx context.Context, req api.CheckpointRequest) (checkpoint.Meta, error) {
	name := req.Name
	if name == "" {
		name = checkpoint.AutoName("", time.Now())
	}
	return c.s.Create(ctx, name, checkpoint.ReasonUser, "stopped")
}

func (c storeCheckpoints) ListCheckpoints(context.Context) (api.CheckpointList, error) {
	l, err := c.s.List()
	return api.CheckpointList{Checkpoints: l}, err
}

func (c storeCheckpoints) RestoreCheckpoint(ctx context.Context, req api.CheckpointRequest) (api.RestoreResult, error) {
	var r api.RestoreResult
	var err error
	if r.Saved, err = c.s.Create(ctx, checkpoint.AutoName("auto-", time.Now()), "before restoring "+req.Name, "stopped"); err != nil {
		return r, err
	}
	return r, c.s.Restore(ctx, req.Name)
}

func (c storeCheckpoints) RemoveCheckpoint(_ context.Context, req api.CheckpointRequest) error {
	return c.s.Remove(req.Name)
}

type checkpointFake struct {
	*fakeBackend
	cp api.Checkpointer
}

func (f checkpointFake) Checkpoints() api.Checkpointer { return f.cp }

// The Container tab lists checkpoints with Create, Restore (asked first,
// the state before kept) and Remove (asked first).
func TestContainerCheckpoints(t *testing.T) {
	f := newFake(t)
	f.st = control.Status{State: control.Stopped}
	p := f.paths
	disk := filepath.Join(p.Root, "rootfs.ext4")
	os.WriteFile(disk, []byte("disk v1"), 0o644)
	home := filepath.Join(p.AgentHomes(), "alice")
	os.MkdirAll(home, 0o755)
	os.WriteFile(filepath.Join(home, "notes"), []byte("v1"), 0o644)
	w, _ := newTestWindow(t, checkpointFake{f, storeCheckpoints{checkpoint.Store{Paths: p, RootDisk: disk}}})
	c := w.Container.Checkpoints
	if c == nil {
		t.Fatal("no checkpoints card")
	}
	names := func() []string { return c.Names() }
	typeIn(c.Name, "first")
	tap(c.Create)
	eventually(t, "the new checkpoint listed", func() bool { return slices.Equal(names(), []string{"first"}) && c.Restore["first"] != nil })

	os.Remove(filepath.Join(home, "notes"))
	var restore *widget.Button
	lockedDo(func() { restore = c.Restore["first"] })
	tap(restore)
	tapInOverlay(t, w.Win, "Cancel")
	if _, err := os.Stat(filepath.Join(home, "notes")); err == nil {
		t.Fatal("a cancelled restore restored")
	}
	tap(restore)
	tapInOverlay(t, w.Win, "Restore")
	eventually(t, "the restore and its automatic checkpoint", func() bool { return len(names()) == 2 })
	if b, err := os.ReadFile(filepath.Join(home, "notes")); string(b) != "v1" {
		t.Fatalf("alice's notes after the restore: %q %v", b, err)
	}
	var remove *widget.Button
	lockedDo(func() { remove = c.Remove["first"] })
	tap(remove)
	tapInOverlay(t, w.Win, "Remove")
	eventually(t, "the removed checkpoint gone", func() bool { return len(names()) == 1 && names()[0] != "first" })
}
