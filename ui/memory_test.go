package ui

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/store/memory"
)

func TestAgentMemoryPanel(t *testing.T) {
	ctx := context.Background()
	w, reg := newTestWindow(t, newFake(t))
	store, err := memory.Open(ctx, filepath.Join(t.TempDir(), "memory.db"), memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	p := w.Agents.Memory
	p.store = store
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
	if n, _ := store.Count(ctx, "alice"); n != 1 {
		t.Fatalf("after forgetting: %d entries", n)
	}
	if n, _ := store.Count(ctx, "bob"); n != 1 {
		t.Fatalf("bob's entry touched: %d", n)
	}
}

func TestEventsView(t *testing.T) {
	ctx := context.Background()
	w, _ := newTestWindow(t, newFake(t))
	store, err := events.Open(ctx, filepath.Join(t.TempDir(), "events.db"), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	store.Emit(ctx, "alice", "before", nil)
	v := w.Events
	lockedDo(func() { v.start(store) })
	t.Cleanup(v.close)
	eventually(t, "the backlog", func() bool { return len(v.shown) == 1 })
	store.Emit(ctx, "bob", "build.done", json.RawMessage(`{"ok":true}`))
	eventually(t, "a new event", func() bool { return len(v.shown) == 2 && v.shown[1].Type == "build.done" })
	lockedDo(func() { v.Agent.SetText("alice") })
	lockedDo(func() {
		if len(v.shown) != 1 || v.shown[0].Agent != "alice" {
			t.Errorf("filtered to alice: %+v", v.shown)
		}
	})
}
