package hostcli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/config"
)

// TestAgentShowCountsHostStores: `agent show` counts what the agent keeps
// in each host-side store beside the store's bound.
func TestAgentShowCountsHostStores(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	paths := config.Paths{Root: home}
	if _, errOut, code := run(t, "agent", "add", "alice"); code != ExitOK {
		t.Fatal(errOut)
	}
	cfg := (&bridge.ConfigStore{Dir: paths.BridgeConfigDir()})
	for _, k := range []string{"a", "b", "c"} {
		if err := cfg.Set("alice", k, "12345"); err != nil {
			t.Fatal(err)
		}
	}
	if err := (&bridge.LogStore{Dir: paths.AgentLogDir()}).Append("alice", "info", "hello"); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "agent", "show", "alice")
	if code != ExitOK || !strings.Contains(out, "config:             3 of 256 keys, 18 B of 1.0 MB") || !strings.Contains(out, "events:             0 of 10000") ||
		!strings.Contains(out, "task records:       0 of 100") || !strings.Contains(out, "memories:           0 of 5000") {
		t.Fatalf("agent show: %d %q %q", code, out, errOut)
	}
	out, _, _ = run(t, "agent", "show", "alice", "--json")
	var v struct {
		Stores *hostStores `json:"hostStores"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Stores == nil || v.Stores.ConfigKeys != 3 || v.Stores.LogBytes == 0 || v.Stores.MaxConfigKeys != 256 {
		t.Fatalf("agent show --json: %v %q", err, out)
	}
}
