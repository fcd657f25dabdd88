package ui

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
)

// NetLogger reads the guest's log of refused connections; Controlled
// implements it.
type NetLogger interface {
	NetLog(ctx context.Context, req agentproto.NetLogRequest) (agentproto.NetLogResponse, error)
}

// NetLog reads the log from the running VM, through whichever process
// owns it.
func (c *Controlled) NetLog(ctx context.Context, req agentproto.NetLogRequest) (agentproto.NetLogResponse, error) {
	return c.ctl.NetLog(ctx, req)
}

// maxNetworkRows bounds the window's copy of the log; the VM keeps more
// (osaurus-sandbox network log).
const maxNetworkRows = 2000

// networkTab shows every refused connection as it happens, newest first.
type networkTab struct {
	src NetLogger
	reg *agents.Registry
	do  func(func())

	List   *widget.List
	Status *widget.Label

	mu   sync.Mutex
	rows []string // newest first
}

func newNetworkTab(src NetLogger, reg *agents.Registry, do func(func())) *networkTab {
	t := &networkTab{src: src, reg: reg, do: do}
	t.Status = widget.NewLabel("Waiting for the VM…")
	t.Status.Wrapping = fyne.TextWrapWord
	t.List = widget.NewList(
		func() int { t.mu.Lock(); defer t.mu.Unlock(); return len(t.rows) },
		func() fyne.CanvasObject { return widget.NewLabel("refusal") },
		func(i widget.ListItemID, o fyne.CanvasObject) {
			t.mu.Lock()
			defer t.mu.Unlock()
			if i < len(t.rows) {
				o.(*widget.Label).SetText(t.rows[i])
			}
		})
	return t
}

func (t *networkTab) content() fyne.CanvasObject {
	head := widget.NewLabel("Connections the network policy refused (agent, destination, who refused it, why). " +
		"Each agent's policy is its Network setting in the Agents tab.")
	head.Wrapping = fyne.TextWrapWord
	return container.NewBorder(container.NewVBox(head, t.Status), nil, nil, nil, t.List)
}

// names maps agents' Linux users to their names.
func (t *networkTab) names() map[string]string {
	m := map[string]string{}
	if t.reg == nil {
		return m
	}
	t.reg.ReloadIfChanged()
	for _, a := range t.reg.List() {
		m[a.User()] = a.Name
	}
	return m
}

// follow long-polls the guest's log until ctx ends. While the VM is down
// it retries every few seconds; a rebooted guest's log starts over.
func (t *networkTab) follow(ctx context.Context) {
	var after uint64
	for ctx.Err() == nil {
		resp, err := t.src.NetLog(ctx, agentproto.NetLogRequest{After: after, WaitMillis: agentproto.MaxNetLogWait.Milliseconds()})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			msg := "The refusal log is read from the running VM: " + err.Error()
			if errors.Is(err, agentproto.ErrUnsupported) {
				msg = "This VM's guest keeps no refusal log; reset it to update the guest agent."
			}
			t.do(func() { t.Status.SetText(msg) })
			select {
			case <-ctx.Done():
				return
			case <-time.After(3 * time.Second):
			}
			continue
		}
		if resp.Next < after {
			after = 0 // the guest rebooted: its log starts over
		}
		t.add(resp, after == 0)
		after = resp.Next
	}
}

// add puts a response's entries on top; fresh replaces what was shown.
func (t *networkTab) add(resp agentproto.NetLogResponse, fresh bool) {
	names := t.names()
	lines := make([]string, 0, len(resp.Entries))
	for i := len(resp.Entries) - 1; i >= 0; i-- {
		e := resp.Entries[i]
		lines = append(lines, agentproto.FormatRefusal(e, names[e.User]))
	}
	status := "No refused connections yet."
	t.mu.Lock()
	if fresh {
		t.rows = nil
	}
	t.rows = append(lines, t.rows...)
	if len(t.rows) > maxNetworkRows {
		t.rows = t.rows[:maxNetworkRows]
	}
	if n := len(t.rows); n > 0 {
		status = fmt.Sprintf("%d refused connections shown, newest first.", n)
	}
	t.mu.Unlock()
	for _, w := range resp.Warnings {
		status += " Warning: " + w
	}
	if resp.Dropped > 0 {
		status += fmt.Sprintf(" %d older entries no longer kept in the VM.", resp.Dropped)
	}
	t.do(func() { t.Status.SetText(status); t.List.Refresh() })
}
