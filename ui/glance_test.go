package ui

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
)

type usageFake struct {
	*fakeBackend
	resp agentproto.UsageResponse
}

func (u usageFake) Usage(context.Context, agentproto.UsageRequest) (agentproto.UsageResponse, error) {
	return u.resp, nil
}

// The Container tab's top says at a glance what the running VM uses and
// what each agent runs, by the agent's name.
func TestStatusAtAGlance(t *testing.T) {
	f := newFake(t)
	f.st = control.Status{State: control.Stopped}
	b := usageFake{f, agentproto.UsageResponse{Users: []agentproto.UserUsage{
		{User: "agent-data-analyst", Processes: 3, MemoryBytes: 120 << 20},
		{User: "agent-bob", Processes: 0},
		{User: "agent-diag", Processes: 1},
	}}}
	w, reg := newTestWindow(t, b)
	if _, err := reg.Add("Data Analyst"); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Add("bob"); err != nil {
		t.Fatal(err)
	}
	g := w.Container.Glance
	lockedDo(func() { w.Container.show(f.Status()) })
	if g.VM.Text != "VM: 2 CPUs, 2 GB · not running" || g.Agents.Text != "Agents: Data Analyst, bob" {
		t.Fatalf("stopped: %q / %q", g.VM.Text, g.Agents.Text)
	}
	f.set(control.Status{State: control.Running, Since: time.Now(), Pid: os.Getpid()})
	eventually(t, "the glance", func() bool {
		return strings.Contains(g.VM.Text, "memory in use") && strings.Contains(g.Agents.Text, "processes")
	})
	var vm, ag string
	lockedDo(func() { vm, ag = g.VM.Text, g.Agents.Text })
	if !strings.HasPrefix(vm, "VM: 2 CPUs, 2 GB") || !strings.Contains(vm, "memory in use") {
		t.Fatalf("VM line %q", vm)
	}
	if ag != "Agents: Data Analyst: 3 processes, 120 MB · bob: idle" {
		t.Fatalf("agents line %q", ag)
	}

	// CPU is the share of one core between two samples.
	g2 := newGlance()
	cpu := time.Second
	g2.readVM = func(int) (time.Duration, int64, bool) { return cpu, 800 << 20, true }
	t0 := time.Now()
	st := control.Status{State: control.Running, Pid: 42}
	g2.sample(t0, st, 4, 8, nil)
	cpu += 500 * time.Millisecond
	if vm, _ := g2.sample(t0.Add(5*time.Second), st, 4, 8, nil); vm != "VM: 4 CPUs, 8 GB · using 10% CPU · 800.0 MiB memory in use" {
		t.Fatalf("sampled %q", vm)
	}
}

// A long agent name (in any script) wraps in the list instead of being
// cut: its row is taller than a short name's.
func TestAgentNamesWrapNotTruncate(t *testing.T) {
	f := newFake(t)
	w, reg := newTestWindow(t, f)
	long := "Quarterly report reconciliation helper, accounts 会計チームの助手"
	for _, n := range []string{"bob", long} {
		if _, err := reg.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	lockedDo(func() { w.Tabs.SelectIndex(1); w.Agents.refresh() })
	var short, tall float32
	eventually(t, "rows laid out", func() bool {
		short = renderedLabel(w.Agents.List, "bob  (agent-bob)").Height
		tall = renderedLabel(w.Agents.List, itemText(w.Agents.items[1])).Height
		return short > 0 && tall > 0
	})
	if short == 0 || tall <= short {
		t.Fatalf("row heights: short %v, long %v", short, tall)
	}
}

// renderedLabel finds the label showing text among o's rendered objects
// and returns its size (zero when none shows it).
func renderedLabel(o fyne.CanvasObject, text string) fyne.Size {
	if l, ok := o.(*widget.Label); ok && l.Text == text && l.Visible() {
		return l.Size()
	}
	var kids []fyne.CanvasObject
	if c, ok := o.(*fyne.Container); ok {
		kids = c.Objects
	} else if wd, ok := o.(fyne.Widget); ok {
		if r := test.WidgetRenderer(wd); r != nil {
			kids = r.Objects()
		}
	}
	for _, k := range kids {
		if s := renderedLabel(k, text); s.Height > 0 {
			return s
		}
	}
	return fyne.Size{}
}
