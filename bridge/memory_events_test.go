package bridge_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/store/memory"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
)

func newMemoryServer(t *testing.T, rate map[string]int) (*bridge.Server, *events.Store) {
	dir := t.TempDir()
	ctx := context.Background()
	mem, err := memory.Open(ctx, filepath.Join(dir, "memory.db"), memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.Open(ctx, filepath.Join(dir, "events.db"), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := bridge.New(bridge.Options{
		Secrets: mapSecrets{"alice": {"API_KEY": "sk-alice-123456"}},
		Memory:  mem,
		Events:  ev,
		Rate:    limit.NewRateLimiter(limit.RateOptions{Limits: rate}),
	})
	t.Cleanup(func() { s.Close(); mem.Close(); ev.Close() })
	return s, ev
}

func TestMemoryAndEventRoutes(t *testing.T) {
	s, ev := newMemoryServer(t, nil)
	alice := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"})
	bob := relay(t, s, agentproto.BridgeRequest{UID: 1002, User: "agent-bob", Agent: "bob"})
	for _, tc := range []struct {
		name, path, body string
		want             int
		errSub           string
	}{
		{"store", "/api/agent/memory/store", `{"content":"the wifi password hint is parrot"}`, 200, ""},
		{"store salience", "/api/agent/memory/store", `{"content":"parrots are loud","salience":0.9}`, 200, ""},
		{"store empty", "/api/agent/memory/store", `{"content":""}`, 400, "content"},
		{"store missing", "/api/agent/memory/store", `{}`, 400, "content"},
		{"store too long", "/api/agent/memory/store", `{"content":"` + strings.Repeat("x", memory.MaxContent+1) + `"}`, 413, "memory.MaxContent"},
		{"store bad salience", "/api/agent/memory/store", `{"content":"x","salience":7}`, 400, "salience"},
		{"store not json", "/api/agent/memory/store", `content=x`, 400, "request body"},
		{"query empty", "/api/agent/memory/query", `{"query":""}`, 400, "query"},
		{"query wrong type", "/api/agent/memory/query", `{"query":1}`, 400, "request body"},
		{"query hostile", "/api/agent/memory/query", `{"query":"\" OR agent:bob NEAR("}`, 200, ""},
		{"emit", "/api/events/emit", `{"type":"build.done","payload":{"ok":true}}`, 200, ""},
		{"emit no payload", "/api/events/emit", `{"type":"ping"}`, 200, ""},
		{"emit secret", "/api/events/emit", `{"type":"leak","payload":"key sk-alice-123456"}`, 200, ""},
		{"emit no type", "/api/events/emit", `{"payload":1}`, 400, "type"},
		{"emit bad type", "/api/events/emit", `{"type":"a b"}`, 400, "type"},
		{"emit big payload", "/api/events/emit", `{"type":"t","payload":"` + strings.Repeat("x", events.MaxPayload) + `"}`, 413, "events.MaxPayload"},
		{"memory GET", "/api/agent/memory/query", "", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := "POST"
			if tc.body == "" {
				method = "GET"
			}
			code, m := do(t, alice, method, tc.path, tc.body)
			if code != tc.want {
				t.Fatalf("HTTP %d %v, want %d", code, m, tc.want)
			}
			if e, _ := m["error"].(string); !strings.Contains(e, tc.errSub) {
				t.Errorf("error %q, want it to mention %q", e, tc.errSub)
			}
		})
	}

	code, m := do(t, alice, "POST", "/api/agent/memory/query", `{"query":"parrot"}`)
	rs, _ := m["results"].([]any)
	if code != 200 || len(rs) != 2 {
		t.Fatalf("alice's query: %d %v", code, m)
	}
	first := rs[0].(map[string]any)
	if first["content"] != "parrots are loud" || first["salience"] != 0.9 || first["created_at"] == nil || len(first) != 3 {
		t.Errorf("first result: %v", first)
	}
	// bob asks for alice's memory every way he can.
	for _, body := range []string{`{"query":"parrot"}`, `{"query":"parrot","agent":"alice"}`, `{"query":"wifi password"}`} {
		code, m := do(t, bob, "POST", "/api/agent/memory/query", body)
		if rs, _ := m["results"].([]any); code != 200 || len(rs) != 0 {
			t.Errorf("bob %s: %d %v", body, code, m)
		}
	}
	code, m = do(t, bob, "POST", "/api/agent/memory/query", `{"query":"nothing matches"}`)
	if rs, ok := m["results"].([]any); code != 200 || !ok || len(rs) != 0 {
		t.Errorf("no results must be an empty list: %v", m)
	}

	es, err := ev.List(context.Background(), events.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Agent+" "+e.Type+" "+string(e.Payload))
	}
	want := []string{`alice build.done {"ok":true}`, `alice ping null`, `alice leak "key [REDACTED:API_KEY]"`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestMemoryRateLimit(t *testing.T) {
	s, _ := newMemoryServer(t, map[string]int{bridge.ServiceMemory: 3, bridge.ServiceEvents: 1})
	alice := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"})
	bob := relay(t, s, agentproto.BridgeRequest{UID: 1002, User: "agent-bob", Agent: "bob"})
	for i := range 3 {
		if code, m := do(t, alice, "POST", "/api/agent/memory/store", `{"content":"x"}`); code != 200 {
			t.Fatalf("store %d: %d %v", i, code, m)
		}
	}
	if code, _ := do(t, alice, "POST", "/api/agent/memory/query", `{"query":"x"}`); code != 429 {
		t.Errorf("4th memory call: %d, want 429", code)
	}
	if code, _ := do(t, bob, "POST", "/api/agent/memory/query", `{"query":"x"}`); code != 200 {
		t.Errorf("bob's quota is his own: %d", code)
	}
	do(t, alice, "POST", "/api/events/emit", `{"type":"a"}`)
	if code, _ := do(t, alice, "POST", "/api/events/emit", `{"type":"a"}`); code != 429 {
		t.Errorf("2nd event with a quota of 1: %d, want 429", code)
	}
}

func TestMemoryUnavailable(t *testing.T) {
	s := newServer(t, nil)
	alice := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"})
	for _, p := range []string{"/api/agent/memory/store", "/api/agent/memory/query", "/api/events/emit"} {
		if code, _ := do(t, alice, "POST", p, `{}`); code != 503 {
			t.Errorf("%s without a store: %d, want 503", p, code)
		}
	}
}
