package ui

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

// Connect shows the change to the client's file, writes it only when
// confirmed (into the temporary home here), keeps the file's other
// servers, and the tab then shows the client and the agent's last call.
func TestConnectWritesClientConfig(t *testing.T) {
	f := newFake(t)
	w, reg := newTestWindow(t, f)
	at := w.Agents
	cv := at.Connect
	home := t.TempDir()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	lockedDo(func() { cv.home, cv.now = home, func() time.Time { return now } })
	cursor := filepath.Join(home, ".cursor", "mcp.json")
	os.MkdirAll(filepath.Dir(cursor), 0o700)
	os.WriteFile(cursor, []byte(`{"mcpServers": {"github": {"url": "https://api.example/mcp"}}}`), 0o600)

	typeIn(at.NewName, "Data Analyst")
	tap(at.Add)
	a := reg.List()[0]
	if !strings.Contains(at.Desktop.Text, `"`+config.HomeEnv+`": "`+f.DataDir()+`"`) {
		t.Fatalf("the Claude Desktop snippet lacks the env block:\n%s", at.Desktop.Text)
	}
	if !strings.Contains(cv.State.Text, "Set up in: none yet") || !strings.Contains(cv.State.Text, "No client has called a tool yet") {
		t.Fatalf("state before: %q", cv.State.Text)
	}
	// The test binary runs from a temporary folder, as `go run` does: the
	// window says what the config will name.
	if !strings.Contains(cv.State.Text, "Note: this osaurus-sandbox runs from") {
		t.Errorf("no note on the temporary binary: %q", cv.State.Text)
	}

	lockedDo(func() { cv.Client.SetSelected("Cursor") })
	tap(cv.Connect)
	if !strings.Contains(cv.Preview.Text, "Adds osaurus-sandbox-data-analyst to "+cursor) || !strings.Contains(cv.Preview.Text, "Kept as they are: github") {
		t.Fatalf("preview:\n%s", cv.Preview.Text)
	}
	if b, _ := os.ReadFile(cursor); strings.Contains(string(b), "data-analyst") {
		t.Fatal("written before confirming")
	}
	tap(cv.Confirm)
	var v struct {
		MCPServers map[string]struct {
			Command string
			Args    []string
			Env     map[string]string
			URL     string
		} `json:"mcpServers"`
	}
	b, _ := os.ReadFile(cursor)
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	e := v.MCPServers["osaurus-sandbox-data-analyst"]
	if v.MCPServers["github"].URL != "https://api.example/mcp" || e.Env[config.HomeEnv] != f.DataDir() || strings.Join(e.Args, " ") != "mcp --agent data-analyst" {
		t.Fatalf("cursor's file:\n%s", b)
	}
	backups, _ := filepath.Glob(cursor + ".bak-*")
	if len(backups) != 1 || !strings.Contains(at.Status.Text, "Connected Data Analyst to Cursor") {
		t.Fatalf("backups %v, status %q", backups, at.Status.Text)
	}
	if !strings.Contains(cv.State.Text, "Set up in: Cursor.") {
		t.Fatalf("state after: %q", cv.State.Text)
	}

	// The owner's record of the last call shows when the tab is shown.
	act, _ := json.Marshal(map[string]api.AgentActivity{a.ID: {LastCall: now.Add(-5 * time.Minute), Tool: "sandbox_exec", Via: "http"}})
	path := config.Paths{Root: f.DataDir()}.AgentActivity()
	os.MkdirAll(filepath.Dir(path), 0o700)
	os.WriteFile(path, act, 0o600)
	lockedDo(func() { w.Tabs.SelectIndex(0); w.Tabs.SelectIndex(1) })
	if !strings.Contains(cv.State.Text, "Last tool call: sandbox_exec, 5 minutes ago (over http).") {
		t.Fatalf("state with activity: %q", cv.State.Text)
	}

	// The generic client gets both snippets, to copy.
	lockedDo(func() { cv.Client.SetSelected("Another client (stdio or HTTP)") })
	tap(cv.Connect)
	if !strings.Contains(cv.Preview.Text, "Over stdio") || !strings.Contains(cv.Preview.Text, "Authorization") || !strings.Contains(cv.Preview.Text, f.DataDir()) {
		t.Fatalf("generic snippets:\n%s", cv.Preview.Text)
	}
}

// mcpFake is a backend whose owner couldn't listen for MCP over HTTP.
type mcpFake struct {
	*fakeBackend
	url, problem string
}

func (m mcpFake) MCP() (string, string) { return m.url, m.problem }

// The Agents tab says why MCP over HTTP is off and takes another port:
// an invalid one is refused naming the setting, a valid one is saved for
// the owner's next start.
func TestConnectMCPPortTaken(t *testing.T) {
	f := newFake(t)
	b := mcpFake{fakeBackend: f, problem: "MCP over HTTP is off: listen tcp 127.0.0.1:47821: bind: address already in use; another program has the port."}
	w, _ := newTestWindow(t, b)
	at := w.Agents
	cv := at.Connect
	typeIn(at.NewName, "Alice")
	tap(at.Add)
	lockedDo(func() {
		if !strings.Contains(cv.HTTP.Text, "address already in use") || !strings.Contains(cv.HTTP.Text, "another port") {
			t.Fatalf("HTTP line: %q", cv.HTTP.Text)
		}
		if cv.Port.Text != "47821" {
			t.Fatalf("port shown: %q", cv.Port.Text)
		}
		cv.Port.SetText("80")
	})
	tap(cv.UsePort)
	lockedDo(func() {
		if !strings.Contains(cv.HTTP.Text, "mcpPort: 80") {
			t.Fatalf("a privileged port: %q", cv.HTTP.Text)
		}
		cv.Port.SetText("47999")
	})
	tap(cv.UsePort)
	cfg, err := f.Settings()
	if err != nil || cfg.MCPPort != 47999 {
		t.Fatalf("saved setting: %+v %v", cfg.MCPPort, err)
	}
	lockedDo(func() {
		if !strings.Contains(cv.HTTP.Text, "port 47999 from the next start") {
			t.Fatalf("after saving: %q", cv.HTTP.Text)
		}
	})
}
