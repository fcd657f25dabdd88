package ui

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
)

// Connect in the window of a remote context writes the entry `--context
// box agent connect alice --client cursor` writes (TestAgentConnectThroughContext
// in hostcli): it runs the far agent's tools through the context, names
// this machine's data folder and carries no token; Disconnect takes it
// out. This machine's agent of the same name, and its token, are never
// used.
func TestRemoteConnect(t *testing.T) {
	home := t.TempDir() // the MCP clients' files: never the user's
	t.Setenv("HOME", home)
	f := openFarWindow(t)
	// A decoy: this machine's own alice, with a token of its own.
	local, err := agents.Open(f.local.AgentsJSON())
	if err != nil {
		t.Fatal(err)
	}
	la, err := local.Add("alice")
	if err != nil {
		t.Fatal(err)
	}
	localTok, _ := local.Token(la.ID)
	at := f.w.Agents
	cv := at.Connect
	eventually(t, "the far side's alice", func() bool { return len(at.items) == 1 })
	lockedDo(func() {
		if cv.home != home {
			t.Fatalf("the clients' files are looked for in %s, want %s", cv.home, home)
		}
		at.List.Select(0)
		for _, s := range []string{at.Desktop.Text, at.CodeHTTP.Text} {
			if strings.Contains(s, localTok) || strings.Contains(s, "Bearer") || !strings.Contains(s, "--context") {
				t.Errorf("a snippet of box's agent is not the context's stdio form:\n%s", s)
			}
		}
		if !strings.HasPrefix(at.CodeHTTP.Text, "claude mcp add --scope user --env ") || cv.Disconnect.Disabled() || !strings.Contains(cv.State.Text, "Set up in: none yet.") {
			t.Errorf("Claude Code snippet %q, disconnect disabled %v, state %q", at.CodeHTTP.Text, cv.Disconnect.Disabled(), cv.State.Text)
		}
		cv.Client.SetSelected("Cursor")
	})
	cursor := filepath.Join(home, ".cursor", "mcp.json")
	tap(cv.Connect)
	if !strings.Contains(cv.Preview.Text, "Creates "+cursor+" with osaurus-sandbox-alice") {
		t.Fatalf("preview:\n%s", cv.Preview.Text)
	}
	tap(cv.Confirm)
	var v struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	b, _ := os.ReadFile(cursor)
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	e := v.MCPServers["osaurus-sandbox-alice"]
	var args []string
	for _, a := range e["args"].([]any) {
		args = append(args, a.(string))
	}
	env, _ := e["env"].(map[string]any)
	// As hostcli's agentConnect writes it through a context: the
	// installed binary, the context form, and this machine's data
	// folder (whose contexts.json has box).
	if !slices.Equal(args, []string{"--context", "box", "mcp", "--agent", "alice"}) || e["command"] != at.exe ||
		len(env) != 1 || env[config.HomeEnv] != f.local.Root || len(e) != 3 || strings.Contains(string(b), localTok) {
		t.Fatalf("cursor's file:\n%s", b)
	}
	lockedDo(func() {
		if !strings.Contains(at.Status.Text, "Connected alice of box to Cursor: wrote "+cursor) || !strings.Contains(cv.State.Text, "Set up in: Cursor.") {
			t.Errorf("status %q, state %q", at.Status.Text, cv.State.Text)
		}
	})

	// The generic client's snippet: stdio through the context only.
	lockedDo(func() { cv.Client.SetSelected("Another client (stdio or HTTP)") })
	tap(cv.Connect)
	if !strings.Contains(cv.Preview.Text, "reaches context box over ssh") || strings.Contains(cv.Preview.Text, "Bearer") {
		t.Fatalf("generic snippets:\n%s", cv.Preview.Text)
	}
	lockedDo(func() { cv.Dialog.Hide(); cv.Client.SetSelected("Cursor") })

	tap(cv.Disconnect)
	if !strings.Contains(cv.Preview.Text, "Removes osaurus-sandbox-alice") || !strings.Contains(readFile(t, cursor), "osaurus-sandbox-alice") {
		t.Fatalf("disconnect preview:\n%s", cv.Preview.Text)
	}
	tap(cv.Confirm)
	if s := readFile(t, cursor); strings.Contains(s, "osaurus-sandbox-alice") {
		t.Fatalf("disconnected, cursor's file still has alice:\n%s", s)
	}
	lockedDo(func() {
		if !strings.Contains(at.Status.Text, "Disconnected alice from Cursor") || !strings.Contains(cv.State.Text, "Set up in: none yet.") {
			t.Errorf("status %q, state %q", at.Status.Text, cv.State.Text)
		}
	})
	tap(cv.Disconnect) // nothing left to take out
	lockedDo(func() {
		if !strings.Contains(at.Status.Text, "nothing to change") {
			t.Errorf("status %q", at.Status.Text)
		}
	})
	f.check(t)
}
