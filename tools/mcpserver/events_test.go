package mcpserver

//lint:file-ignore SA1019 MCP logging is deprecated from protocol 2026-07-28 but is how events reach clients today; these tests check that delivery.

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/store/events"
)

// TestEventNotifications: an agent's events reach its own MCP sessions
// as log notifications, never another agent's.
func TestEventNotifications(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.reg.Add("Alice"); err != nil {
		t.Fatal(err)
	}
	store, err := events.Open(ctx, filepath.Join(t.TempDir(), "events.db"), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	f.cfg.Events = store

	connect := func(ref string) <-chan *mcp.LoggingMessageParams {
		s, err := NewAgentServer(f.cfg, ref)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		st, ct := mcp.NewInMemoryTransports()
		ss, err := s.MCP().Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		got := make(chan *mcp.LoggingMessageParams, 16)
		c := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
			LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) { got <- r.Params },
		})
		cs, err := c.Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		if cs.InitializeResult().Capabilities.Logging == nil {
			t.Error("server does not announce logging")
		}
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	bob, alice := connect("bob"), connect("alice")

	if _, err := store.Emit(ctx, "alice", "alice.only", json.RawMessage(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Emit(ctx, "bob", "build.done", json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	var p *mcp.LoggingMessageParams
	select {
	case p = <-bob:
	case <-time.After(10 * time.Second):
		t.Fatal("bob's session got no notification")
	}
	b, _ := json.Marshal(p.Data)
	var data map[string]any
	json.Unmarshal(b, &data)
	if p.Logger != EventLogger || p.Level != "info" || data["type"] != "build.done" || data["payload"].(map[string]any)["ok"] != true {
		t.Errorf("bob's notification: %+v %s", p, b)
	}
	// alice's own event arrived for her; bob's never does. Both were
	// emitted before bob's arrived, and delivery is in order, so by now
	// alice's channel holds exactly hers.
	select {
	case p := <-alice:
		b, _ := json.Marshal(p.Data)
		if json.Unmarshal(b, &data); data["type"] != "alice.only" {
			t.Errorf("alice's notification: %s", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("alice's session got no notification")
	}
	if _, err := store.Emit(ctx, "alice", "marker", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-alice:
		b, _ := json.Marshal(p.Data)
		if json.Unmarshal(b, &data); data["type"] != "marker" {
			t.Errorf("alice got %s, want her marker (bob's event leaked?)", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("alice's marker did not arrive")
	}
	select {
	case p := <-bob:
		t.Errorf("bob got another notification: %+v", p)
	default:
	}
}
