package ui

import (
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/termsafe"
)

// logTail is how much of an agent's log buffer the window shows: the
// newest part, cut at a line start.
const logTail = 32 << 10

// agentLogView shows the selected agent's log buffer: the lines its code
// wrote with `osaurus-host log` (also `osaurus-sandbox logs --agent`).
type agentLogView struct {
	Text    *widget.Entry
	Refresh *widget.Button
	slug    string
}

func (t *agentsTab) newLogView() {
	v := &agentLogView{Text: widget.NewMultiLineEntry()}
	v.Text.SetMinRowsVisible(8)
	v.Text.TextStyle = fyne.TextStyle{Monospace: true}
	v.Text.Wrapping = fyne.TextWrapOff
	// Read-only: the buffer is the agent's record, not the user's notes.
	v.Text.Disable()
	v.Refresh = widget.NewButton("Refresh", func() { t.loadLog() })
	t.logs = v
}

func (t *agentsTab) logContent() fyne.CanvasObject {
	return container.NewBorder(
		container.NewBorder(nil, nil, widget.NewLabel("Log (osaurus-host log in the VM)"), t.logs.Refresh),
		nil, nil, nil, t.logs.Text)
}

func (t *agentsTab) showLog(a *agents.Agent) {
	v := t.logs
	if a == nil {
		v.slug = ""
		v.Text.SetText("")
		v.Refresh.Disable()
		return
	}
	v.slug = a.Slug
	v.Refresh.Enable()
	t.loadLog()
}

// loadLog reads the buffer again, showing its newest lines.
func (t *agentsTab) loadLog() {
	v := t.logs
	if v.slug == "" {
		return
	}
	if t.readLog == nil {
		v.Text.SetText("(no log store is connected to this window)")
		return
	}
	s, err := t.readLog(v.slug)
	switch {
	case err != nil:
		s = "reading the log failed: " + err.Error()
	case s == "":
		s = "(nothing logged yet; code in the VM writes here with `osaurus-host log info MESSAGE`)"
	case len(s) > logTail:
		s = s[len(s)-logTail:]
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	v.Text.SetText(termsafe.String(s))
	v.Text.CursorRow = strings.Count(s, "\n")
}
