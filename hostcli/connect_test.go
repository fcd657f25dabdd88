package hostcli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/config"
)

// agent connect writes only into the (temporary) HOME's client file:
// --dry-run writes nothing, --yes writes with a backup, bad input says
// what to pass.
func TestAgentConnect(t *testing.T) {
	data, home := t.TempDir(), t.TempDir()
	t.Setenv(config.HomeEnv, data)
	t.Setenv("HOME", home)
	if _, _, code := run(t, "agent", "add", "alice"); code != ExitOK {
		t.Fatal("add failed")
	}
	file := filepath.Join(home, ".claude.json")
	os.WriteFile(file, []byte(`{"mcpServers": {"other": {"command": "x"}}}`), 0o600)
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		out     string
		written bool
	}{
		{"dry run", []string{"--client", "claude-code", "--dry-run"}, ExitOK, "Adds osaurus-sandbox-alice to " + file, false},
		{"no answer", []string{"--client", "claude-code"}, ExitDeclined, "Kept as they are: other", false},
		{"unknown client", []string{"--client", "zed"}, ExitUsage, "", false},
		{"no client", nil, ExitUsage, "", false},
		{"generic", []string{"--client", "generic"}, ExitOK, `"` + config.HomeEnv + `": "` + data + `"`, false},
		{"yes", []string{"--client", "claude-code", "--yes"}, ExitOK, "wrote " + file + " (the old file is " + file + ".bak-", true},
		{"again", []string{"--client", "claude-code", "--yes"}, ExitOK, "already has osaurus-sandbox-alice", true},
	} {
		out, errOut, code := run(t, append([]string{"agent", "connect", "alice"}, tc.args...)...)
		b, _ := os.ReadFile(file)
		if code != tc.code || !strings.Contains(out, tc.out) || strings.Contains(string(b), "osaurus-sandbox-alice") != tc.written {
			t.Errorf("%s: code %d out %q err %q\nfile %s", tc.name, code, out, errOut, b)
		}
	}
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), `"other"`) || !strings.Contains(string(b), data) {
		t.Fatalf("merged file:\n%s", b)
	}
}
