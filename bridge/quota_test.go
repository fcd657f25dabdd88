package bridge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/store/memory"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
)

func body(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestHostStoresAreBoundedPerAgent: a value over its size limit is 413
// and a full store 507, each naming the limit; the config file stays
// under its bound however an agent writes to it.
func TestHostStoresAreBoundedPerAgent(t *testing.T) {
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "config")
	s := bridge.New(bridge.Options{
		Config: &bridge.ConfigStore{Dir: cfgDir},
		Log:    &bridge.LogStore{Dir: filepath.Join(dir, "logs")},
		Rate:   limit.NewRateLimiter(limit.RateOptions{Limits: map[string]int{"bridge": 100000}}),
	})
	t.Cleanup(func() { s.Close() })
	alice := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"})

	big := strings.Repeat("v", bridge.MaxConfigValue+1)
	if code, m := do(t, alice, "POST", "/api/config/k", body(map[string]string{"value": big}), "Content-Type", "application/json"); code != http.StatusRequestEntityTooLarge || !strings.Contains(fmt.Sprint(m["error"]), "MaxConfigValue") {
		t.Errorf("a value of %d bytes: %d %v, want 413 naming MaxConfigValue", len(big), code, m)
	}
	if code, m := do(t, alice, "POST", "/api/log", body(map[string]string{"message": strings.Repeat("l", bridge.MaxLogLine+1)})); code != http.StatusRequestEntityTooLarge || !strings.Contains(fmt.Sprint(m["error"]), "MaxLogLine") {
		t.Errorf("a long log line: %d %v, want 413 naming MaxLogLine", code, m)
	}
	// Fill the bytes: 15 values of 64 KiB fit in 1 MiB, the 16th does not.
	val := strings.Repeat("v", bridge.MaxConfigValue)
	var code int
	var m map[string]any
	n := 0
	for ; n < 40; n++ {
		if code, m = do(t, alice, "POST", fmt.Sprintf("/api/config/big%d", n), body(map[string]string{"value": val})); code != http.StatusOK {
			break
		}
	}
	if code != http.StatusInsufficientStorage || !strings.Contains(fmt.Sprint(m["error"]), "MaxConfigBytes") || n != bridge.MaxConfigBytes/bridge.MaxConfigValue-1 {
		t.Errorf("after %d values: %d %v, want 507 naming MaxConfigBytes", n, code, m)
	}
	// Overwriting a key with a short value frees room; keys are bounded too.
	if code, m := do(t, alice, "POST", "/api/config/big0", body(map[string]string{"value": "x"})); code != http.StatusOK {
		t.Fatalf("overwrite: %d %v", code, m)
	}
	for i := 0; i < 40; i++ {
		do(t, alice, "POST", fmt.Sprintf("/api/config/big%d", i), body(map[string]string{"value": "x"}))
	}
	for n = 0; n < bridge.MaxConfigKeys+5; n++ {
		if code, m = do(t, alice, "POST", fmt.Sprintf("/api/config/k%d", n), body(map[string]string{"value": "x"})); code != http.StatusOK {
			break
		}
	}
	if code != http.StatusInsufficientStorage || !strings.Contains(fmt.Sprint(m["error"]), "MaxConfigKeys") {
		t.Errorf("after %d more keys: %d %v, want 507 naming MaxConfigKeys", n, code, m)
	}
	st, err := os.Stat(filepath.Join(cfgDir, "alice.json"))
	if err != nil || st.Size() > 2*bridge.MaxConfigBytes {
		t.Errorf("the config file: %v %v, want it bounded", st, err)
	}
}

func TestMemoryAndEventsTooLarge(t *testing.T) {
	s, _ := newMemoryServer(t, map[string]int{"bridge": 1000, "memory": 1000, "events": 1000})
	alice := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"})
	if code, m := do(t, alice, "POST", "/api/agent/memory/store", body(map[string]string{"content": strings.Repeat("m", memory.MaxContent+1)})); code != http.StatusRequestEntityTooLarge || !strings.Contains(fmt.Sprint(m["error"]), "memory.MaxContent") {
		t.Errorf("a long memory: %d %v", code, m)
	}
	if code, m := do(t, alice, "POST", "/api/events/emit", body(map[string]any{"type": "x", "payload": strings.Repeat("e", events.MaxPayload)})); code != http.StatusRequestEntityTooLarge || !strings.Contains(fmt.Sprint(m["error"]), "events.MaxPayload") {
		t.Errorf("a big event: %d %v", code, m)
	}
}
