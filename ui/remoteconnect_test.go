package ui

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
	"github.com/osaurus/osaurus-sandbox/remotes"
	"github.com/osaurus/osaurus-sandbox/secrets"
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

// The Tasks tab of a remote context edits the far side's model server
// settings through its owner, each save based on the revision read (a
// change there in between is refused, never overwritten), and stores the
// API key in this machine's store for the context only when that side
// keeps its secrets here (secretStore client).
func TestRemoteModelServer(t *testing.T) {
	f := openFarWindow(t)
	// This machine's settings: a decoy, and a file store for the key.
	mine := config.Defaults()
	mine.InferenceURL, mine.InferenceModel, mine.SecretStore = "http://127.0.0.1:1/v1", "LOCAL MODEL", config.SecretStoreFile
	if err := config.SaveSandbox(f.local.SandboxJSON(), mine); err != nil {
		t.Fatal(err)
	}
	localBefore := readFile(t, f.local.SandboxJSON())
	f.set(t, "inferenceUrl", "http://10.0.0.2:11434/v1")
	f.set(t, "inferenceModel", "far-model")
	tt := f.w.Tasks
	tap(tt.Reload)
	eventually(t, "the far side's model server", func() bool {
		return tt.URL.Text == "http://10.0.0.2:11434/v1" && tt.Model.Text == "far-model" && !tt.Save.Disabled()
	})
	lockedDo(func() { tt.URL.SetText("http://10.0.0.3:8080/v1"); tt.Model.SetText("qwen") })
	tap(tt.Save)
	eventually(t, "saved", func() bool { return tt.Saved.Text == "Saved." })
	got, err := config.LoadSandbox(f.far.SandboxJSON())
	if err != nil || got.InferenceURL != "http://10.0.0.3:8080/v1" || got.InferenceModel != "qwen" {
		t.Fatalf("far sandbox.json after Save: %q %q (%v)", got.InferenceURL, got.InferenceModel, err)
	}

	// Another writer there, between the read and the next save.
	f.set(t, "inferenceModel", "theirs")
	farAfter := readFile(t, f.far.SandboxJSON())
	lockedDo(func() { tt.Model.SetText("mine") })
	tap(tt.Save)
	eventually(t, "the conflict", func() bool {
		return strings.Contains(tt.Saved.Text, "changed on the far side since you opened them") && !tt.Save.Disabled()
	})
	if s := readFile(t, f.far.SandboxJSON()); s != farAfter {
		t.Fatalf("a conflicting save changed the far sandbox.json:\n%s", s)
	}
	tap(tt.Reload)
	eventually(t, "the other writer's model", func() bool { return tt.Model.Text == "theirs" && tt.Saved.Text == "" })

	// The key: refused while the far side keeps its own secrets, stored
	// here for box once it keeps them here.
	farKey := &secrets.Store{B: secrets.InService{B: secrets.ForDataDir(f.local).B, Service: secrets.ClientService("box")}}
	typeIn(tt.Key, "sk-far")
	tap(tt.StoreKey)
	eventually(t, "the refusal", func() bool {
		return strings.Contains(tt.Saved.Text, "keeps its secrets on that machine") && strings.Contains(tt.Saved.Text, "secret set --app INFERENCE_API_KEY")
	})
	if _, err := farKey.GetApp(secrets.InferenceKey); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("stored while the far side keeps its own secrets: %v", err)
	}
	f.set(t, "secretStore", config.SecretStoreClient)
	tap(tt.StoreKey)
	eventually(t, "stored", func() bool { return strings.Contains(tt.Saved.Text, "API key stored in") && tt.Key.Text == "" })
	if v, err := farKey.GetApp(secrets.InferenceKey); err != nil || v != "sk-far" {
		t.Fatalf("this machine's entry for box: %q %v", v, err)
	}
	if _, err := secrets.ForDataDir(f.local).GetApp(secrets.InferenceKey); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("this machine's own key was set: %v", err)
	}
	if s := readFile(t, f.local.SandboxJSON()); s != localBefore {
		t.Fatalf("this machine's sandbox.json changed:\n%s", s)
	}
	f.check(t)
}

// While the window of a remote context is open it offers this machine's
// secrets of that context to the far owner, once that side keeps its
// secrets here, as an `mcp --agent` relay does: a far agent's read gets
// this machine's value. Closing the window ends the offer.
func TestRemoteWindowOffersSecrets(t *testing.T) {
	old := remotes.FarStorePoll
	remotes.FarStorePoll = 10 * time.Millisecond
	t.Cleanup(func() { remotes.FarStorePoll = old }) // after the window closes
	f := openFarWindow(t)
	mine := config.Defaults()
	mine.SecretStore = config.SecretStoreFile
	if err := config.SaveSandbox(f.local.SandboxJSON(), mine); err != nil {
		t.Fatal(err)
	}
	here := &secrets.Store{B: secrets.InService{B: secrets.ForDataDir(f.local).B, Service: secrets.ClientService("box")}}
	if err := here.Set("alice", "TOKEN", "from-this-machine"); err != nil {
		t.Fatal(err)
	}
	farSecrets := f.farCtl.(*host.Host).Secrets()
	if _, err := farSecrets.Get("alice", "TOKEN"); err == nil {
		t.Fatal("the far side read the secret while it keeps its own")
	}
	f.set(t, "secretStore", config.SecretStoreClient)
	testwait.Eventually(t, "the window offers this machine's secrets", 30*time.Second, 5*time.Millisecond, func() bool {
		return farSecrets.Clients().Connected() == 1
	})
	if v, err := farSecrets.Get("alice", "TOKEN"); err != nil || v != "from-this-machine" {
		t.Fatalf("the far read: %q %v", v, err)
	}
	f.sess.Close()
	testwait.Eventually(t, "the offer to end with the window", 30*time.Second, 5*time.Millisecond, func() bool {
		return farSecrets.Clients().Connected() == 0
	})
	if _, err := farSecrets.Get("alice", "TOKEN"); !errors.Is(err, secrets.ErrNoClient) {
		t.Errorf("a far read with the window closed: %v, want no client connected", err)
	}
}

// TestRemoteWindowSecrets: the Agents tab of a remote context lists,
// sets and removes an agent's secrets in this machine's store under the
// context's service, and only while the far owner keeps its secrets here;
// otherwise it says where to set them. This machine's own agent's
// secrets never show.
func TestRemoteWindowSecrets(t *testing.T) {
	old := remotes.FarStorePoll
	remotes.FarStorePoll = 10 * time.Millisecond
	t.Cleanup(func() { remotes.FarStorePoll = old })
	f := openFarWindow(t)
	mine := config.Defaults()
	mine.SecretStore = config.SecretStoreFile
	if err := config.SaveSandbox(f.local.SandboxJSON(), mine); err != nil {
		t.Fatal(err)
	}
	store := secrets.ForDataDir(f.local)
	if err := store.Set("alice", "LOCAL_ONLY", "this-machine's-alice"); err != nil {
		t.Fatal(err)
	}
	kept := secrets.ForContext(store.B, "box")
	if err := kept.Set("alice", "EXISTING", "kept-for-box"); err != nil {
		t.Fatal(err)
	}
	at := f.w.Agents
	lockedDo(func() { at.secrets = f.sess.Secrets })
	eventually(t, "the far side's alice", func() bool { return len(at.items) == 1 })
	show := func() {
		lockedDo(func() {
			at.List.UnselectAll()
			at.List.Select(0)
		})
	}

	show()
	lockedDo(func() {
		if len(at.sec.names) != 0 || !at.sec.SetBtn.Disabled() ||
			!strings.Contains(at.sec.Note.Text, "box keeps its agents' secrets on that machine") ||
			!strings.Contains(at.sec.Note.Text, "config set secretStore client") {
			t.Errorf("a far side keeping its own secrets: names %q, Set disabled %v, note %q", at.sec.names, at.sec.SetBtn.Disabled(), at.sec.Note.Text)
		}
	})

	f.set(t, "secretStore", config.SecretStoreClient)
	show()
	lockedDo(func() {
		if got := strings.Join(at.sec.names, ","); got != "EXISTING" || at.sec.SetBtn.Disabled() {
			t.Fatalf("names shown %q (want the context's EXISTING only), Set disabled %v, note %q", got, at.sec.SetBtn.Disabled(), at.sec.Note.Text)
		}
	})
	tap(at.sec.SetBtn)
	typeIn(at.SecretKey, "NEW_KEY")
	typeIn(at.SecretValue, "new-value-123")
	tapInOverlay(t, f.w.Win, "Save")
	if v, err := kept.Get("alice", "NEW_KEY"); err != nil || v != "new-value-123" {
		t.Fatalf("Set: %q, %v", v, err)
	}
	if _, err := store.Get("alice", "NEW_KEY"); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("Set wrote this machine's own alice: %v", err)
	}
	// The far side reads it through the window's offer.
	farStore := f.farCtl.(*host.Host).Secrets()
	testwait.Eventually(t, "the window offers this machine's secrets", 30*time.Second, 5*time.Millisecond, func() bool {
		return farStore.Clients().Connected() == 1
	})
	if v, err := farStore.Get("alice", "NEW_KEY"); err != nil || v != "new-value-123" {
		t.Fatalf("the far read: %q %v", v, err)
	}
	lockedDo(func() { at.sec.List.Select(0) })
	tap(at.sec.RemoveSec)
	tapInOverlay(t, f.w.Win, "Yes")
	if _, err := kept.Get("alice", "EXISTING"); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("Remove: %v", err)
	}
	if v, err := store.Get("alice", "LOCAL_ONLY"); err != nil || v != "this-machine's-alice" {
		t.Errorf("this machine's own alice's secret: %q %v", v, err)
	}
	lockedDo(func() {
		if got := strings.Join(at.sec.names, ","); got != "NEW_KEY" {
			t.Errorf("names after Remove: %q", got)
		}
	})
	f.check(t)
}
