package ui

import (
	"context"
	"fmt"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

// CheckpointBackend is a Backend that keeps sandbox checkpoints (the
// owner's, through its Controller).
type CheckpointBackend interface {
	// Checkpoints is the owner's checkpoints; nil when it keeps none.
	Checkpoints() api.Checkpointer
}

// Checkpoints is the owner's checkpoints, when its Controller keeps them.
func (c *Controlled) Checkpoints() api.Checkpointer {
	cp, _ := c.ctl.(api.Checkpointer)
	return cp
}

// RestoreWarning is shown before a checkpoint is restored.
const RestoreWarning = "Restore puts back the VM's root disk, every agent's home and project views, and the agents' settings as they were in checkpoint %s.\n\nThe current state is saved first as an automatic checkpoint; a running VM is restarted."

// checkpointsCard lists the sandbox checkpoints, with Create, Restore
// and Remove: the window's `osaurus-sandbox checkpoint`.
type checkpointsCard struct {
	cp  api.Checkpointer
	win fyne.Window
	do  func(func())

	Name   *widget.Entry // the new checkpoint's name; empty: the time
	Create *widget.Button
	Status *widget.Label
	Rows   *fyne.Container
	Box    *fyne.Container

	mu sync.Mutex
	// Restore and Remove are each listed checkpoint's buttons, by name.
	Restore, Remove map[string]*widget.Button
	list            []checkpoint.Meta
}

func newCheckpointsCard(cp api.Checkpointer, win fyne.Window, do func(func())) *checkpointsCard {
	c := &checkpointsCard{cp: cp, win: win, do: do, Restore: map[string]*widget.Button{}, Remove: map[string]*widget.Button{}}
	c.Name = widget.NewEntry()
	c.Name.SetPlaceHolder("name (optional: the time)")
	c.Create = widget.NewButton("Create Checkpoint", c.onCreate)
	c.Status = widget.NewLabel("")
	c.Status.Wrapping = fyne.TextWrapWord
	c.Rows = container.NewVBox()
	c.Box = container.NewVBox(container.NewBorder(nil, nil, nil, c.Create, c.Name), c.Status, c.Rows)
	c.refresh()
	return c
}

// run does op off the UI goroutine, saying what it does, then lists the
// checkpoints again.
func (c *checkpointsCard) run(doing string, op func(context.Context) (string, error)) {
	c.Status.SetText(doing + "…")
	c.Create.Disable()
	go func() {
		msg, err := op(context.Background())
		c.do(func() {
			c.Create.Enable()
			if err != nil {
				c.Status.SetText("")
				showError(c.win, doing+" failed", err)
			} else {
				c.Status.SetText(msg)
			}
		})
		c.refresh()
	}()
}

func (c *checkpointsCard) onCreate() {
	name := c.Name.Text
	c.run("Taking a checkpoint", func(ctx context.Context) (string, error) {
		m, err := c.cp.CreateCheckpoint(ctx, api.CheckpointRequest{Name: name})
		if err != nil {
			return "", err
		}
		c.do(func() { c.Name.SetText("") })
		return fmt.Sprintf("Checkpoint %s: %s, %s on disk, taken in %.2fs (VM %s).", m.Name, size(m.Bytes), size(m.DiskBytes), m.Seconds, m.VM), nil
	})
}

func (c *checkpointsCard) onRestore(name string) {
	d := dialog.NewConfirm("Restore checkpoint "+name+"?", fmt.Sprintf(RestoreWarning, name), func(ok bool) {
		if !ok {
			return
		}
		c.run("Restoring "+name, func(ctx context.Context) (string, error) {
			r, err := c.cp.RestoreCheckpoint(ctx, api.CheckpointRequest{Name: name})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("Restored %s; the state before it is checkpoint %s.", name, r.Saved.Name), nil
		})
	}, c.win)
	d.SetConfirmText("Restore")
	d.SetDismissText("Cancel")
	d.Show()
}

func (c *checkpointsCard) onRemove(name string) {
	d := dialog.NewConfirm("Remove checkpoint "+name+"?", "Its copy of the sandbox is deleted; the sandbox itself is not changed.", func(ok bool) {
		if !ok {
			return
		}
		c.run("Removing "+name, func(ctx context.Context) (string, error) {
			return "Removed " + name + ".", c.cp.RemoveCheckpoint(ctx, api.CheckpointRequest{Name: name})
		})
	}, c.win)
	d.SetConfirmText("Remove")
	d.SetDismissText("Cancel")
	d.Show()
}

// refresh lists the checkpoints again, from any goroutine.
func (c *checkpointsCard) refresh() {
	go func() {
		l, err := c.cp.ListCheckpoints(context.Background())
		c.do(func() { c.show(l.Checkpoints, err) })
	}()
}

// show renders the list; on the UI goroutine.
func (c *checkpointsCard) show(l []checkpoint.Meta, err error) {
	c.mu.Lock()
	c.list = l
	c.Restore, c.Remove = map[string]*widget.Button{}, map[string]*widget.Button{}
	c.mu.Unlock()
	var rows []fyne.CanvasObject
	switch {
	case err != nil:
		rows = append(rows, widget.NewLabel("Checkpoints can't be listed: "+err.Error()))
	case len(l) == 0:
		rows = append(rows, widget.NewLabel("No checkpoints yet. A checkpoint saves the root disk, every agent's home and views and their settings; Restore puts them back."))
	}
	for i := len(l) - 1; i >= 0; i-- { // newest first
		m := l[i]
		text := fmt.Sprintf("%s — %s, VM %s, %s on disk — %s", m.Name, m.Created.Local().Format(time.DateTime), m.VM, size(m.DiskBytes), why(m.Reason))
		restore := widget.NewButton("Restore…", func() { c.onRestore(m.Name) })
		remove := widget.NewButton("Remove…", func() { c.onRemove(m.Name) })
		remove.Importance = widget.DangerImportance
		c.mu.Lock()
		c.Restore[m.Name], c.Remove[m.Name] = restore, remove
		c.mu.Unlock()
		label := widget.NewLabel(text)
		label.Truncation = fyne.TextTruncateEllipsis
		rows = append(rows, container.NewBorder(nil, nil, nil, container.NewHBox(restore, remove), label))
	}
	c.Rows.Objects = rows
	c.Rows.Refresh()
}

// Names are the listed checkpoints' names, oldest first.
func (c *checkpointsCard) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.list {
		out = append(out, m.Name)
	}
	return out
}

// why is a checkpoint's reason for people.
func why(reason string) string {
	if reason == checkpoint.ReasonUser {
		return "taken by you"
	}
	return "automatic, " + reason
}

// size is a byte count for people.
func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
