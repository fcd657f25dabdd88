package host

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

type nopInvoker struct{ calls int }

func (n *nopInvoker) RunTool(context.Context, agents.Agent, string, json.RawMessage) envelope.Envelope {
	n.calls++
	return envelope.Envelope{}
}
func (n *nopInvoker) EndTurn(context.Context, string) {}

// The Agents tab's "last tool call" is each agent's newest call, whichever
// transport made it, and survives a new owner.
func TestActivityLogRecordsLastCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents", "activity.json")
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	now := t0
	l := &ActivityLog{Path: path, Now: func() time.Time { return now }}
	inv := &nopInvoker{}
	http := recordingInvoker{inv, l, "http"}
	http.RunTool(context.Background(), agents.Agent{ID: "a1"}, "sandbox_exec", nil)
	now = t0.Add(time.Minute)
	l.Record("a1", "sandbox_read_file", "stdio")
	l.Record("b2", "sandbox_exec", "stdio")
	l.Wait()
	got, err := api.ReadActivity(path)
	if err != nil {
		t.Fatal(err)
	}
	if inv.calls != 1 || got["a1"] != (api.AgentActivity{LastCall: now, Tool: "sandbox_read_file", Via: "stdio"}) || got["b2"].Tool != "sandbox_exec" {
		t.Fatalf("activity %+v (calls %d)", got, inv.calls)
	}
	l2 := &ActivityLog{Path: path, Now: func() time.Time { return now.Add(time.Hour) }}
	l2.Record("c3", "sandbox_exec", "http")
	l2.Wait()
	if got, _ := api.ReadActivity(path); len(got) != 3 || !got["a1"].LastCall.Equal(now) {
		t.Fatalf("a new owner lost earlier activity: %+v", got)
	}
	if got, err := api.ReadActivity(filepath.Join(t.TempDir(), "none.json")); err != nil || len(got) != 0 {
		t.Fatalf("no file: %v %v", got, err)
	}
}
