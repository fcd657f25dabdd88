package bridge_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/store/memory"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
)

// An agent writing its own secret value into its config or its memory
// (plainly, JSON-escaped, URL-encoded) leaves no trace of it in the files
// the host keeps in the data folder: the values are scrubbed as its log
// lines are, and a key made of the value is refused.
func TestConfigAndMemoryScrubSecrets(t *testing.T) {
	const secret = "sk-alice-123456"
	dir := t.TempDir()
	mem, err := memory.Open(context.Background(), filepath.Join(dir, "memory.db"), memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := bridge.New(bridge.Options{
		Secrets: mapSecrets{"alice": {"API_KEY": secret}},
		Config:  &bridge.ConfigStore{Dir: filepath.Join(dir, "config")},
		Memory:  mem,
		Rate:    limit.NewRateLimiter(limit.RateOptions{}),
	})
	t.Cleanup(func() { s.Close(); mem.Close() })
	alice := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"})
	for _, tc := range []struct {
		name, method, path, body string
		want                     int
	}{
		{"config value", "POST", "/api/config/token", `{"value":"sk-alice-123456"}`, 200},
		{"config value inside text", "POST", "/api/config/note", `{"value":"the key is sk-alice-123456, keep it"}`, 200},
		{"config value URL-encoded", "POST", "/api/config/url", `{"value":"https://x/?k=sk-alice-123456"}`, 200},
		{"config key", "POST", "/api/config/sk-alice-123456", `{"value":"x"}`, 400},
		{"memory", "POST", "/api/agent/memory/store", `{"content":"remember sk-alice-123456 for the deploy"}`, 200},
		{"memory JSON-escaped", "POST", "/api/agent/memory/store", `{"content":"sk-alice-\u0031\u0032\u0033456 again"}`, 200},
	} {
		if code, m := do(t, alice, tc.method, tc.path, tc.body); code != tc.want {
			t.Errorf("%s: HTTP %d %v, want %d", tc.name, code, m, tc.want)
		}
	}
	if code, m := do(t, alice, "GET", "/api/config/note", ""); code != 200 || m["value"] != "the key is [REDACTED:API_KEY], keep it" {
		t.Errorf("config note reads back %d %v", code, m)
	}
	code, m := do(t, alice, "POST", "/api/agent/memory/query", `{"query":"deploy"}`)
	if rs, _ := m["results"].([]any); code != 200 || len(rs) != 1 || !strings.Contains(rs[0].(map[string]any)["content"].(string), "[REDACTED:API_KEY]") {
		t.Errorf("memory reads back %d %v", code, m)
	}
	mem.Close() // the database's files complete on disk (WAL checkpointed)
	// Every byte the host stored: config files, the database and its
	// journal files.
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "alice-123456") || strings.Contains(string(b), "alice-123") {
			t.Errorf("%s holds the secret in clear", p)
		}
		return nil
	})
}
