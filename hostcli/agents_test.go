package hostcli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, strings.NewReader(""), &out, &errOut, testOwner)
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
		{"backgroundKeepsAwake", "sometimes", ExitError, "backgroundKeepsAwake: \"sometimes\", want true or false"},
		{"backgroundKeepsAwake", "false", ExitOK, ""},
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
	if ae := list[0].AutonomousExec; !ae.Enabled || !ae.BackgroundProcesses || ae.MaxCommandsPerTurn != 25 || ae.Network != "*.example.org,example.com" || !ae.PluginCreatorSkillOff || !ae.BackgroundKeepsAwakeOff {
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
		"they keep VM awake:   off (backgroundKeepsAwake)\n",
		"network in force:     only *.example.org, example.com over HTTP and HTTPS, through the sandbox's proxy\n",
		`"args": [` + "\n" + `        "mcp",`,
		`"OSAURUS_SANDBOX_HOME": "` + home + `"`,
		"claude mcp add --scope user --env OSAURUS_SANDBOX_HOME=" + home + " osaurus-sandbox-data-analyst -- ",
		"claude mcp add --scope user --transport http osaurus-sandbox-data-analyst http://127.0.0.1:47821/mcp --header 'Authorization: Bearer " + tok + "'",
		"start a new Claude Code session",
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
		err := a.Set(c.key, c.value)
		if err == nil {
			err = a.Validate()
		}
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), c.key)) {
			t.Errorf("set %s %s: %v", c.key, c.value, err)
		}
	}
}

// TestHelpText: every usage line is a command (prose is not printed after
// the program's name), the keys a command takes are listed, the flag
// spellings agree, and `--` works before a name.
func TestHelpText(t *testing.T) {
	t.Setenv(config.HomeEnv, t.TempDir())
	words := map[string]bool{"help": true}
	for cmd := range (&cli{}).commands() {
		words[cmd] = true
	}
	for _, h := range helps {
		var b strings.Builder
		h.write(&b)
		for l := range strings.SplitSeq(b.String(), "\n") {
			if rest, ok := strings.CutPrefix(l, "  osaurus-sandbox "); ok && !words[strings.Fields(rest)[0]] && !strings.HasPrefix(rest, "--") {
				t.Errorf("help %s: %q is not a command", h.name, l)
			}
		}
	}
	for _, tt := range []struct {
		args []string
		want []string
		not  string
	}{
		{[]string{"help", "config"}, []string{"Keys: cpus, memoryGB,", "mcpPort."}, ""},
		{[]string{"help", "agent", "set"}, []string{"Keys: name,", "projects"}, "osaurus-sandbox keys"},
		{[]string{"help", "plugin"}, []string{"\nimport, update and install show"}, "osaurus-sandbox import, update"},
		{[]string{"help"}, []string{"exec [--user U] [--timeout D]"}, "--timeout S"},
	} {
		out, _, code := run(t, tt.args...)
		if code != ExitOK || !containsAll(out, tt.want...) || tt.not != "" && strings.Contains(out, tt.not) {
			t.Errorf("%v: %d\n%s", tt.args, code, out)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--bogus"}, "unknown flag --bogus"},
		{[]string{"status", "-bogus"}, "unknown flag --bogus"},
		{[]string{"agent", "connect", "alice", "--client"}, "flag --client needs a value"},
	} {
		if _, errOut, code := run(t, tt.args...); code != ExitUsage || !strings.Contains(errOut, tt.want) || strings.Contains(errOut, "flag provided") {
			t.Errorf("%v: %d %q", tt.args, code, errOut)
		}
	}
	if out, errOut, code := run(t, "agent", "add", "--", "-rf"); code != ExitOK || !strings.Contains(out, "added -rf") {
		t.Errorf("agent add -- -rf: %d %q %q", code, out, errOut)
	}
}

// TestBackgroundOwnerIsVisible: the MCP server says, before the first
// tool call starts one, that a background owner will outlive it and how
// to end it; status says who owns the VM and when a changed mcpPort needs
// the owner restarted.
func TestBackgroundOwnerIsVisible(t *testing.T) {
	t.Setenv(config.HomeEnv, t.TempDir())
	run(t, "agent", "add", "alice")
	_, errOut, _ := run(t, "mcp", "--agent", "alice")
	if !containsAll(errOut, "the first tool call starts a background owner", "until `osaurus-sandbox stop` or until it is unused for backgroundIdleMinutes") {
		t.Errorf("mcp without an owner: %q", errOut)
	}
	bg := api.Status{Owner: "background", MCPURL: "http://127.0.0.1:47821/mcp", IdleExit: &api.IdleExit{Minutes: 10}}
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	bgIdle := bg
	bgIdle.IdleExit = &api.IdleExit{Minutes: 10, IdleSince: &since}
	for _, tt := range []struct {
		st   api.Status
		addr string
		want []string
	}{
		{bg, "127.0.0.1:47821", []string{"owner: a background osaurus-sandbox process", "unused for 10 minutes (backgroundIdleMinutes", "in use now", "mcp: serving agents at http://127.0.0.1:47821/mcp"}},
		{bgIdle, "127.0.0.1:47821", []string{"unused since 03:04:05, it stops the VM and exits at 03:14:05"}},
		{api.Status{Owner: "background"}, "127.0.0.1:47821", []string{"never exits by itself"}},
		{bg, "127.0.0.1:5000", []string{"owner: a background", "not at 127.0.0.1:5000 as mcpPort now says: restart the owner"}},
		{api.Status{Owner: "app", MCPURL: "http://127.0.0.1:47821/mcp"}, "127.0.0.1:47821", []string{"mcp: serving agents at"}},
	} {
		got := strings.Join(ownerLines(tt.st, tt.addr), "\n")
		if !containsAll(got, tt.want...) || tt.st.Owner != "background" && strings.Contains(got, "owner:") {
			t.Errorf("%+v %s:\n%s", tt.st, tt.addr, got)
		}
	}
}

// Columns line up in terminal cells with wide (CJK, emoji) names.
func TestWriteTableAlignsWideNames(t *testing.T) {
	var b strings.Builder
	writeTable(&b, [][]string{{"NAME", "SLUG"}, {"会計チーム", "kaikei"}, {"bob 🚀", "bob"}, {"x", "x"}})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	col := -1
	for _, l := range lines {
		at := cells(l[:strings.LastIndex(l, " ")+1]) // where the last column starts
		if col >= 0 && at != col {
			t.Errorf("second column at cell %d, want %d:\n%s", at, col, b.String())
		}
		col = at
	}
	if cells("会計") != 4 || cells("🚀") != 2 || cells("ab") != 2 {
		t.Errorf("cells: %d %d %d", cells("会計"), cells("🚀"), cells("ab"))
	}
}

// Every key `agent set` takes is in its help and in docs/agents.md's
// settings table, and a misspelt key's error lists them all.
func TestAgentSettingKeysAreDocumented(t *testing.T) {
	t.Setenv(config.HomeEnv, t.TempDir())
	help, _, _ := run(t, "help", "agent", "set")
	doc, err := os.ReadFile("../docs/agents.md")
	if err != nil {
		t.Fatal(err)
	}
	run(t, "agent", "add", "alice")
	_, errOut, code := run(t, "agent", "set", "alice", "colour", "blue")
	if code != ExitError {
		t.Fatalf("an unknown key: %d %q", code, errOut)
	}
	for _, k := range agents.SettingKeys {
		if !regexp.MustCompile(`[ ,]` + k + `[,.]`).MatchString(help) {
			t.Errorf("help agent set doesn't list %s:\n%s", k, help)
		}
		if !strings.Contains(string(doc), "| `"+k+"` |") {
			t.Errorf("docs/agents.md's settings table has no row for %s", k)
		}
		if !strings.Contains(errOut, " "+k) {
			t.Errorf("the unknown key's error doesn't list %s: %q", k, errOut)
		}
	}
}
