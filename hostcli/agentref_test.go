package hostcli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/config"
)

// TestAgentRemoveAmbiguousAndPurge: "my-bot" beside "My Bot" is refused
// (both fold to the slug my-bot); in a file from before that rule, with
// "My Bot" (slug my-bot) and "my-bot" (slug my-bot-2), `agent remove
// my-bot` removes neither and lists both; `--purge` deletes a home only
// after a yes.
func TestAgentRemoveAmbiguousAndPurge(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	for _, n := range []string{"My Bot", "Other"} {
		if _, errOut, code := run(t, "agent", "add", n); code != ExitOK {
			t.Fatalf("add %q: %d %s", n, code, errOut)
		}
	}
	if _, errOut, code := run(t, "agent", "add", "my-bot"); code != ExitError || !strings.Contains(errOut, `too like agent "My Bot" (slug my-bot)`) {
		t.Fatalf("add my-bot beside My Bot: %d %q", code, errOut)
	}
	if _, errOut, code := run(t, "agent", "set", "other", "name", "my_bot"); code != ExitError || !strings.Contains(errOut, "too like") {
		t.Fatalf("rename into my-bot: %d %q", code, errOut)
	}
	reg := config.Paths{Root: home}.AgentsJSON()
	b, _ := os.ReadFile(reg)
	os.WriteFile(reg, []byte(strings.Replace(strings.Replace(string(b), `"Other"`, `"my-bot"`, 1), `"other"`, `"my-bot-2"`, 1)), 0o600)
	out, errOut, code := run(t, "agent", "remove", "my-bot")
	if code == ExitOK || !strings.Contains(errOut, "matches 2 agents") || !strings.Contains(errOut, "slug my-bot ") || !strings.Contains(errOut, "slug my-bot-2 ") {
		t.Fatalf("remove my-bot: %d %q %q, want an error listing both", code, out, errOut)
	}
	for _, ref := range []string{"My Bot", "my-bot-2"} {
		if out, errOut, code := run(t, "agent", "show", ref); code != ExitOK {
			t.Errorf("agent %q is gone after an ambiguous remove: %d %q %q", ref, code, out, errOut)
		}
	}

	// --purge asks; no answer on stdin refuses with the hint.
	homeDir := filepath.Join(config.Paths{Root: home}.Workspace(), "agents", "my-bot-2")
	if err := os.MkdirAll(homeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(homeDir, "work.txt"), []byte("precious"), 0o644)
	for _, stdin := range []string{"", "no\n"} {
		_, errOut, code := runStdin(t, stdin, "agent", "remove", "my-bot-2", "--purge")
		if code != ExitDeclined || !strings.Contains(errOut, "Nothing was changed") {
			t.Errorf("purge with stdin %q: %d %q, want declined", stdin, code, errOut)
		}
		if stdin == "" && !strings.Contains(errOut, "--yes") {
			t.Errorf("purge with no stdin gives no hint: %q", errOut)
		}
		if _, err := os.Stat(filepath.Join(homeDir, "work.txt")); err != nil {
			t.Fatalf("the home went without a yes: %v", err)
		}
		if _, _, code := run(t, "agent", "show", "my-bot-2"); code != ExitOK {
			t.Fatalf("the agent went without a yes")
		}
	}
	if out, errOut, code := runStdin(t, "yes\n", "agent", "remove", "my-bot-2", "--purge"); code != ExitOK || !strings.Contains(out, "deleted its home") {
		t.Fatalf("purge with yes: %d %q %q", code, out, errOut)
	}
	if _, err := os.Stat(homeDir); !os.IsNotExist(err) {
		t.Errorf("home after purge: %v", err)
	}
	// Now "my-bot" is one agent's slug only.
	if out, errOut, code := run(t, "agent", "remove", "my-bot", "--purge", "--yes"); code != ExitOK || !strings.Contains(out, "My Bot") {
		t.Fatalf("remove my-bot --purge --yes: %d %q %q", code, out, errOut)
	}
}

// agent remove deletes the agent's checkpoints: the question before a
// purge and the summary after say how many and how much disk; another
// agent's stay, and a new agent of the same name has none.
func TestAgentRemoveTakesItsCheckpoints(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	ws := config.Paths{Root: home}.Workspace()
	for _, n := range []string{"alice", "bob"} {
		if _, errOut, code := run(t, "agent", "add", n); code != ExitOK {
			t.Fatalf("add %s: %d %q", n, code, errOut)
		}
		os.MkdirAll(filepath.Join(ws, "agents", n), 0o700)
		os.WriteFile(filepath.Join(ws, "agents", n, "notes"), []byte(n+"'s notes"), 0o600)
	}
	for _, c := range [][]string{{"alice", "one"}, {"alice", "two"}, {"bob", "one"}} {
		if _, errOut, code := run(t, "agent", "checkpoint", c[0], c[1]); code != ExitOK {
			t.Fatalf("checkpoint %v: %d %q", c, code, errOut)
		}
	}
	_, errOut, code := runStdin(t, "no\n", "agent", "remove", "alice", "--purge")
	if code != ExitDeclined || !strings.Contains(errOut, "with every file in it, and its 2 checkpoints (") {
		t.Errorf("the question before a purge doesn't name the checkpoints: %d %q", code, errOut)
	}
	out, errOut, code := run(t, "agent", "remove", "alice")
	if code != ExitOK || !strings.Contains(out, "deleted its 2 checkpoints (") || !strings.Contains(out, " on disk)") {
		t.Fatalf("remove: %d %q %q", code, out, errOut)
	}
	if ents, err := os.ReadDir(filepath.Join(home, "agent-checkpoints")); err != nil || len(ents) != 1 {
		t.Errorf("checkpoint folders after removing alice: %v %v, want bob's only", ents, err)
	}
	if out, _, code := run(t, "agent", "checkpoints", "bob"); code != ExitOK || !strings.Contains(out, "one") || strings.Contains(out, "no checkpoints") {
		t.Errorf("bob's checkpoints: %d %q", code, out)
	}
	if _, errOut, code := run(t, "agent", "add", "alice", "--adopt-home"); code != ExitOK {
		t.Fatalf("add alice again: %d %q", code, errOut)
	}
	if out, _, code := run(t, "agent", "checkpoints", "alice"); code != ExitOK || !strings.Contains(out, "alice has no checkpoints") {
		t.Errorf("the new alice's checkpoints: %d %q", code, out)
	}
	if out, _, code := run(t, "agent", "remove", "alice"); code != ExitOK || strings.Contains(out, "checkpoint") {
		t.Errorf("removing an agent without checkpoints: %d %q, want no line about them", code, out)
	}
}
