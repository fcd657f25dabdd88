package ui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/internal/termsafe"
)

// memoryPanel shows the selected agent's memory (what it stored with
// osaurus-host agent memory store): newest first, or the best matches of
// a search; the user can forget an entry.
type memoryPanel struct {
	// store is the owner's memory (this process's Host, or the owner's
	// over the control socket); nil shows memory as unavailable.
	store api.DataOps
	win   fyne.Window
	agent string

	List    *widget.List
	Search  *widget.Entry
	Remove  *widget.Button
	Refresh *widget.Button
	Summary *widget.Label

	entries  []control.MemoryEntry
	selected int
}

func newMemoryPanel(win fyne.Window) *memoryPanel {
	p := &memoryPanel{win: win, selected: -1}
	p.List = widget.NewList(
		func() int { return len(p.entries) },
		func() fyne.CanvasObject { return widget.NewLabel("memory entry") },
		func(i widget.ListItemID, o fyne.CanvasObject) {
			e := p.entries[i]
			o.(*widget.Label).SetText(fmt.Sprintf("%s  %.2f  %s", e.CreatedAt.Local().Format(time.DateTime), e.Salience, oneLine(e.Content, 120)))
		})
	p.List.OnSelected = func(i widget.ListItemID) { p.selected = i; p.Remove.Enable() }
	p.List.OnUnselected = func(widget.ListItemID) { p.selected = -1; p.Remove.Disable() }
	p.Search = widget.NewEntry()
	p.Search.SetPlaceHolder("Search this agent's memory")
	p.Search.OnSubmitted = func(string) { p.load() }
	p.Search.OnChanged = func(s string) {
		if s == "" {
			p.load()
		}
	}
	p.Remove = widget.NewButton("Forget…", p.onRemove)
	p.Remove.Disable()
	p.Refresh = widget.NewButton("Refresh", p.load)
	p.Summary = widget.NewLabel("")
	return p
}

func (p *memoryPanel) content() fyne.CanvasObject {
	// The list needs a height of its own inside the editor's VBox.
	list := container.NewGridWrap(fyne.NewSize(560, 160), p.List)
	return container.NewVBox(
		widget.NewLabelWithStyle("Memory", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		container.NewBorder(nil, nil, nil, container.NewHBox(p.Refresh, p.Remove), p.Search),
		p.Summary, list,
	)
}

// show switches to agent's memory ("" for none).
func (p *memoryPanel) show(agent string) {
	if agent != p.agent {
		p.Search.SetText("")
	}
	p.agent = agent
	p.load()
}

func (p *memoryPanel) load() {
	p.entries, p.selected = nil, -1
	p.List.UnselectAll()
	p.Remove.Disable()
	switch {
	case p.store == nil:
		p.Summary.SetText("Agent memory is not available in this app.")
	case p.agent == "":
		p.Summary.SetText("")
	default:
		q := strings.TrimSpace(p.Search.Text)
		l, err := p.store.Memories(context.Background(), control.MemoryQuery{Agent: p.agent, Search: q, Limit: 200})
		es, n := l.Entries, l.Count
		switch {
		case err != nil:
			p.Summary.SetText("Memory: " + err.Error())
		case q != "":
			p.Summary.SetText(fmt.Sprintf("%d best matches of %d entries", len(es), n))
		case n == 0:
			p.Summary.SetText("No memories yet; the agent stores them with `osaurus-host agent memory store TEXT`.")
		default:
			p.Summary.SetText(fmt.Sprintf("%d entries, newest first", n))
		}
		p.entries = es
	}
	p.List.Refresh()
}

func (p *memoryPanel) onRemove() {
	if p.selected < 0 || p.selected >= len(p.entries) {
		return
	}
	e := p.entries[p.selected]
	dialog.ShowConfirm("Forget memory", "Forget this entry of "+p.agent+"?\n\n"+oneLine(e.Content, 200), func(ok bool) {
		if !ok {
			return
		}
		if _, err := p.store.RemoveMemory(context.Background(), control.MemoryRemove{Agent: p.agent, ID: e.ID}); err != nil {
			showError(p.win, "Forgetting the entry failed", err)
		}
		p.load()
	}, p.win)
}

// oneLine shortens text to a list row.
func oneLine(s string, max int) string {
	s = termsafe.Line(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
