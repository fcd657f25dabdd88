package ui

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
)

// dataOwner is a real owner of a fresh data folder (host.OpenData: no
// VM) and the Controller the window gets from it: the Host itself when the
// window is the owner, or a client of its control socket when `serve` is.
func dataOwner(t *testing.T, asClient bool) (*host.Host, api.Controller) {
	t.Helper()
	dir, err := os.MkdirTemp("", "ui") // short: the control socket is in it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := config.Paths{Root: dir}
	ctl, err := host.OpenData(context.Background(), p, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctl.Close)
	h := ctl.(*host.Host)
	if h.Memory() == nil || h.EventStore() == nil {
		t.Fatal("the owner opened no memory or event log (its log says why)")
	}
	if !asClient {
		return h, h
	}
	cl, err := client.Dial(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return h, cl
}

var ownerModes = []struct {
	name     string
	asClient bool
}{{"window owns", false}, {"client of serve", true}}

func TestAgentMemoryPanel(t *testing.T) {
	for _, m := range ownerModes {
		t.Run(m.name, func(t *testing.T) {
			ctx := context.Background()
			h, ctl := dataOwner(t, m.asClient)
			store := h.Memory()
			w, reg := newTestWindow(t, newFake(t))
			p := w.Agents.Memory
			p.store = ctl
			alice, _ := reg.Add("alice")
			reg.Add("bob")
			store.Add(ctx, "alice", "alice prefers tabs", nil)
			store.Add(ctx, "alice", "deploys go through CI", nil)
			store.Add(ctx, "bob", "bob prefers spaces", nil)

			w.Agents.refresh()
			w.Agents.selectAgent(alice.ID)
			if len(p.entries) != 2 || p.entries[0].Content != "deploys go through CI" || !strings.Contains(p.Summary.Text, "2 entries") {
				t.Fatalf("alice's memory: %+v %q", p.entries, p.Summary.Text)
			}
			typeIn(p.Search, "prefers")
			p.Search.OnSubmitted(p.Search.Text)
			if len(p.entries) != 1 || p.entries[0].Content != "alice prefers tabs" {
				t.Fatalf("search prefers as alice: %+v", p.entries)
			}
			p.List.Select(0)
			tap(p.Remove)
			tapInOverlay(t, w.Win, "Yes")
			// The owner's store changed: the window wrote nothing itself.
			if n, _ := store.Count(ctx, "alice"); n != 1 {
				t.Fatalf("after forgetting: %d entries", n)
			}
			if n, _ := store.Count(ctx, "bob"); n != 1 {
				t.Fatalf("bob's entry touched: %d", n)
			}
		})
	}
}

func TestEventsView(t *testing.T) {
	for _, m := range ownerModes {
		t.Run(m.name, func(t *testing.T) {
			ctx := context.Background()
			h, ctl := dataOwner(t, m.asClient)
			w, _ := newTestWindow(t, newFake(t))
			h.EmitEvent(ctx, control.EventEmit{Agent: "alice", Type: "before"})
			v := w.Events
			lockedDo(func() { v.start(ctl) })
			t.Cleanup(v.close)
			eventually(t, "the backlog", func() bool { return len(v.shown) == 1 })
			h.EmitEvent(ctx, control.EventEmit{Agent: "bob", Type: "build.done", Payload: json.RawMessage(`{"ok":true}`)})
			eventually(t, "a new event", func() bool { return len(v.shown) == 2 && v.shown[1].Type == "build.done" })
			lockedDo(func() { v.Agent.SetText("alice") })
			lockedDo(func() {
				if len(v.shown) != 1 || v.shown[0].Agent != "alice" {
					t.Errorf("filtered to alice: %+v", v.shown)
				}
			})
		})
	}
}
