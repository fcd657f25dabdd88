package hostcli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
)

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, strings.NewReader(""), &out, &errOut, Owner{})
	return out.String(), errOut.String(), code
}

func TestAgentCommands(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)

	out, _, code := run(t, "agent", "add", "Data Analyst")
	if code != ExitOK || !strings.Contains(out, "Linux user agent-data-analyst, home /workspace/agents/data-analyst") {
		t.Fatalf("add: %d %q", code, out)
	}
	if _, errOut, code := run(t, "agent", "add", "data analyst"); code != ExitError || !strings.Contains(errOut, "already used") {
		t.Fatalf("duplicate add: %d %q", code, errOut)
	}

	for _, tt := range []struct {
		key, value string
		code       int
		errText    string
	}{
		{"enabled", "true", ExitOK, ""},
		{"autonomousExec.backgroundProcesses", "on", ExitOK, ""},
		{"maxCommandsPerTurn", "25", ExitOK, ""},
		{"maxCommandsPerTurn", "0", ExitError, "maxCommandsPerTurn: 0, want 1–100"},
		{"maxCommandsPerTurn", "many", ExitError, "want a whole number"},
		{"network", "maybe", ExitError, `network: "maybe" is not a fully qualified name`},
		{"network", "10.0.2.2", ExitError, "is an IP address"},
		{"network", "https://example.com", ExitError, "want none, outbound, or a comma-separated list"},
		{"network", "off", ExitOK, ""},
		{"network", "Example.com, *.example.org", ExitOK, ""},
		{"pluginCreatorSkill", "off", ExitOK, ""},
		{"pluginCreatorSkill", "maybe", ExitError, "pluginCreatorSkill: \"maybe\", want true or false"},
		{"dispatchTo", "nobody", ExitError, `dispatchTo: "nobody": agent not found`},
		{"dispatchTo", "data analyst", ExitError, "dispatchTo: Data Analyst, want other agents"},
		{"color", "blue", ExitError, "want one of name, enabled"},
	} {
		_, errOut, code := run(t, "agent", "set", "data-analyst", tt.key, tt.value)
		if code != tt.code || !strings.Contains(errOut, tt.errText) {
			t.Errorf("set %s %s: %d %q", tt.key, tt.value, code, errOut)
		}
	}

	out, _, _ = run(t, "agent", "list", "--json")
	var list []agents.Agent
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 {
		t.Fatalf("list --json: %q %v", out, err)
	}
	if ae := list[0].AutonomousExec; !ae.Enabled || !ae.BackgroundProcesses || ae.MaxCommandsPerTurn != 25 || ae.Network != "*.example.org,example.com" || !ae.PluginCreatorSkillOff {
		t.Fatalf("settings %+v", ae)
	}
	if out, _, _ = run(t, "agent", "list"); !strings.Contains(out, "Data Analyst  data-analyst  agent-data-analyst  on") {
		t.Fatalf("list:\n%s", out)
	}

	reg, _ := agents.Open(filepath.Join(home, "config", "agents.json"))
	tok, _ := reg.Token("data-analyst")
	out, _, code = run(t, "agent", "show", "Data Analyst")
	for _, want := range []string{
		`"osaurus-sandbox-data-analyst": {`,
		"network:              *.example.org,example.com (network)\n",
		"network in force:     only *.example.org, example.com over HTTP and HTTPS, through the sandbox's proxy\n",
		`"args": [` + "\n" + `        "mcp",`,
		`"OSAURUS_SANDBOX_HOME": "` + home + `"`,
		"claude mcp add --env OSAURUS_SANDBOX_HOME=" + home + " osaurus-sandbox-data-analyst -- ",
		"claude mcp add --transport http osaurus-sandbox-data-analyst http://127.0.0.1:47821/mcp --header 'Authorization: Bearer " + tok + "'",
	} {
		if code != ExitOK || !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}

	// Removing with the VM down: the registry entry goes, and --purge
	// deletes the home on the host side of the workspace share.
	homeDir := filepath.Join(home, "workspace", "agents", "data-analyst")
	if err := os.MkdirAll(homeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, _, code = run(t, "agent", "remove", "data-analyst", "--purge", "--yes")
	if code != ExitOK || !strings.Contains(out, "the VM is not running") {
		t.Fatalf("remove: %d %q", code, out)
	}
	if _, err := os.Stat(homeDir); !os.IsNotExist(err) {
		t.Fatalf("home still there after --purge: %v", err)
	}
	if _, errOut, code := run(t, "agent", "show", "data-analyst"); code != ExitError || !strings.Contains(errOut, "agent not found") {
		t.Fatalf("show after remove: %d %q", code, errOut)
	}
	if _, _, code := run(t, "agent", "frobnicate"); code != ExitUsage {
		t.Fatalf("unknown subcommand: %d", code)
	}
	if _, _, code := run(t, "mcp"); code != ExitUsage {
		t.Fatalf("mcp without --agent: %d", code)
	}
}

func TestSetAgentResources(t *testing.T) {
	for _, c := range []struct {
		key, value string
		ok         bool
	}{
		{"memoryMB", "512", true},
		{"maxProcesses", "64", true},
		{"cpuWeight", "0", true}, // back to the default
		{"memoryMB", "lots", false},
		{"memoryMB", "8", false},
		{"cpuWeight", "10001", false},
	} {
		a := agents.Agent{Name: "A", Slug: "a", AutonomousExec: agents.DefaultAutonomousExec()}
		err := setAgent(&a, c.key, c.value)
		if err == nil {
			err = a.Validate()
		}
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), c.key)) {
			t.Errorf("set %s %s: %v", c.key, c.value, err)
		}
	}
}
