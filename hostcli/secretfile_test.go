package hostcli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

// TestSecretCLIFileStore: with secretStore file the secret commands work
// with no keychain at all (TestMain leaves none), as on a server, and the
// values land in the data folder's file; without the setting the error
// points at it.
func TestSecretCLIFileStore(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	p := config.Paths{Root: home}
	for _, n := range []string{"alice", "bob"} {
		if _, errOut, code := run(t, "agent", "add", n); code != ExitOK {
			t.Fatalf("agent add %s: %d %s", n, code, errOut)
		}
	}
	if _, errOut, code := runStdin(t, "sk-test-123456\n", "secret", "set", "alice", "OPENAI_API_KEY"); code != ExitError || !strings.Contains(errOut, "config set secretStore file") {
		t.Fatalf("secret set with no keychain: %d %q, want the hint naming the file store", code, errOut)
	}
	if _, errOut, code := run(t, "config", "set", "secretStore", "file"); code != ExitOK {
		t.Fatalf("config set secretStore file: %d %q", code, errOut)
	}
	for _, c := range []struct{ agent, key, value string }{
		{"alice", "OPENAI_API_KEY", "sk-test-123456"},
		{"alice", "OTHER", "other-value"},
		{"bob", "OPENAI_API_KEY", "sk-bob-1234567"},
	} {
		if out, errOut, code := runStdin(t, c.value+"\n", "secret", "set", c.agent, c.key); code != ExitOK || !strings.Contains(out, "stored "+c.key+" for "+c.agent) {
			t.Fatalf("secret set %s %s: %d %q %q", c.agent, c.key, code, out, errOut)
		}
	}
	if out, errOut, code := runStdin(t, "sk-app-123456\n", "secret", "set", "--app", secrets.InferenceKey); code != ExitOK {
		t.Fatalf("secret set --app: %d %q %q", code, out, errOut)
	}
	if out, _, code := run(t, "secret", "list", "alice", "--json"); code != ExitOK || strings.TrimSpace(out) != `["OPENAI_API_KEY","OTHER"]` {
		t.Fatalf("secret list: %d %q", code, out)
	}
	if out, errOut, code := run(t, "secret", "remove", "alice", "OTHER"); code != ExitOK || !strings.Contains(out, "removed OTHER from alice") {
		t.Fatalf("secret remove: %d %q %q", code, out, errOut)
	}
	if out, errOut, code := run(t, "agent", "remove", "alice"); code != ExitOK || !strings.Contains(out, "deleted its secrets from the secrets file "+p.SecretsFile()+": OPENAI_API_KEY") {
		t.Fatalf("agent remove: %d %q %q", code, out, errOut)
	}
	b, err := os.ReadFile(p.SecretsFile())
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Secrets map[string]map[string]string `json:"secrets"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"bob/OPENAI_API_KEY": "sk-bob-1234567", "bob/": `["OPENAI_API_KEY"]`, ":app/" + secrets.InferenceKey: "sk-app-123456"}
	got := f.Secrets[secrets.ServiceName()]
	if len(got) != len(want) {
		t.Errorf("the file holds %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("the file's %s = %q, want %q", k, got[k], v)
		}
	}
	// An unsafe file is refused with the fix, by the command too.
	if err := os.Chmod(p.SecretsFile(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := run(t, "secret", "list", "bob"); code != ExitError || !strings.Contains(errOut, "chmod 600 "+filepath.Clean(p.SecretsFile())) {
		t.Fatalf("secret list of a 0644 file: %d %q", code, errOut)
	}
}
