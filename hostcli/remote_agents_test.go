package hostcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/server"
	"github.com/osaurus/osaurus-sandbox/remotes"
	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/store/memory"
)

// shortDir is a temporary folder with a path short enough for the
// control socket in it.
func shortDir(t *testing.T, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// farSide makes a context NAME whose ssh runs this test binary as the
// far side's osaurus-sandbox (TestMain's standin-far) on data folder dir:
// the far side is this machine, with its own data folder.
func farSide(t *testing.T, name, dir string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	// ssh's last argument is the far side's command line, for its shell;
	// ssh -W is a forward to this machine's port (standInSSH).
	script := "#!/bin/sh\nfor a; do if [ \"$a\" = -W ]; then exec " + remotes.ShellQuote(self) + " standin-ssh \"$@\"; fi; last=$a; done\nexec sh -c \"$last\"\n"
	if err := os.WriteFile(filepath.Join(bin, "ssh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	rc := remotes.Context{Name: name, URL: "ssh://me@" + name, DataDir: dir, Command: remotes.ShellQuote(self) + " standin-far"}
	if err := (&cli{paths: config.Paths{Root: os.Getenv(config.HomeEnv)}}).contextStore().Add(rc); err != nil {
		t.Fatal(err)
	}
}

// farAndLocal makes two data folders on this machine: the far side's,
// set up by farCmds run there and then owned by a running owner (ctl),
// and this machine's, current when it returns (HOME a temporary folder,
// no context chosen by the environment).
func farAndLocal(t *testing.T, farCmds ...[]string) (local, far string, ctl api.Controller) {
	t.Helper()
	local, far = shortDir(t, "loc"), shortDir(t, "far")
	t.Setenv("HOME", t.TempDir())
	t.Setenv(remotes.Env, "")
	t.Setenv(config.HomeEnv, far)
	for _, args := range farCmds {
		if _, errOut, code := run(t, args...); code != ExitOK {
			t.Fatal(args, errOut)
		}
	}
	ctl, err := host.OpenData(context.Background(), config.Paths{Root: far}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctl.Close)
	t.Setenv(config.HomeEnv, local)
	return local, far, ctl
}

// fakeFar makes context name reach a stand-in far owner serving ctl,
// with this machine's data folder current; it returns that folder.
func fakeFar(t *testing.T, name string, ctl api.Controller) (local string) {
	t.Helper()
	local, far := shortDir(t, "loc"), shortDir(t, name)
	t.Setenv(config.HomeEnv, local)
	t.Setenv(remotes.Env, "")
	ln, err := server.Listen(config.Paths{Root: far})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); (&server.Server{Ctl: ctl}).Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
	farSide(t, name, far)
	return local
}

// farAgents reads the far side's agents.json, as its next reader would.
func farAgentNames(t *testing.T, dir string) []string {
	t.Helper()
	reg, err := agents.OpenReadOnly(config.Paths{Root: dir}.AgentsJSON())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range reg.List() {
		names = append(names, a.Name)
	}
	return names
}

// Through a remote context the agent commands read and change the far
// side's agents (its agents.json, through its owner), never this
// machine's: this process never opens its own data files (its OpenData
// fails the test), and its agents.json is the same bytes after. The far
// side is a second data folder on this machine with an owner running,
// reached by the real dial-stdio through a stand-in ssh.
func TestAgentCommandsThroughContext(t *testing.T) {
	local, far, _ := farAndLocal(t, []string{"agent", "add", "alice"})
	if _, errOut, code := run(t, "agent", "add", "carol"); code != ExitOK {
		t.Fatal(errOut)
	}
	localJSON := config.Paths{Root: local}.AgentsJSON()
	before, err := os.ReadFile(localJSON)
	if err != nil {
		t.Fatal(err)
	}
	farSide(t, "box", far)
	notHere := Owner{OpenData: func(context.Context, config.Paths, func(string, ...any)) (api.Controller, error) {
		t.Error("a command through the context opened this machine's data files")
		return nil, errors.New("not through a context")
	}}
	listed := func(want ...string) func() error {
		return func() error {
			if got := farAgentNames(t, far); !slices.Equal(got, want) {
				return fmt.Errorf("the far side has %v, want %v", got, want)
			}
			return nil
		}
	}
	for _, tt := range []struct {
		args  []string
		stdin string
		code  int
		out   string       // in stdout, or stderr when code != 0
		after func() error // the far side afterwards
	}{
		{[]string{"agent", "add", "bob"}, "", ExitOK, "added bob: Linux user agent-bob", listed("alice", "bob")},
		{[]string{"agent", "list"}, "", ExitOK, "alice", nil},
		{[]string{"agent", "set", "bob", "enabled", "true"}, "", ExitOK, "saved bob", func() error {
			reg, _ := agents.OpenReadOnly(config.Paths{Root: far}.AgentsJSON())
			if b, err := reg.Get("bob"); err != nil || !b.AutonomousExec.Enabled {
				return fmt.Errorf("bob on the far side: %+v %v", b, err)
			}
			return nil
		}},
		{[]string{"agent", "set", "bob", "dispatchTo", "alice"}, "", ExitOK, "it may dispatch tasks to: alice", nil},
		{[]string{"agent", "set", "bob", "projects", "none"}, "", ExitOK, "saved bob: no projects", nil},
		{[]string{"agent", "show", "bob"}, "", ExitOK, "dispatch to:          alice", nil},
		{[]string{"agent", "show", "bob"}, "", ExitOK, "`osaurus-sandbox --context box agent connect bob --client", nil},
		{[]string{"agent", "show", "carol"}, "", ExitError, "context box (ssh://me@box)", nil},
		{[]string{"agent", "checkpoint", "bob", "first"}, "", ExitOK, "checkpoint first of bob", nil},
		{[]string{"agent", "checkpoints", "bob"}, "", ExitOK, "first", nil},
		{[]string{"agent", "fork", "bob", "bob2"}, "", ExitOK, "forked bob to bob2", listed("alice", "bob", "bob2")},
		{[]string{"agent", "remove", "bob", "--purge"}, "", ExitDeclined, "and its 1 checkpoint", listed("alice", "bob", "bob2")},
		{[]string{"agent", "remove", "bob2", "--yes"}, "", ExitOK, "its secrets stay in the keychain of ssh://me@box", listed("alice", "bob")},
		{[]string{"agent", "repair"}, "", ExitOK, "agents.json of context box is fine (2 agents)", listed("alice", "bob")},
	} {
		var out, errOut bytes.Buffer
		code := Main(append([]string{"--context", "box"}, tt.args...), strings.NewReader(tt.stdin), &out, &errOut, notHere)
		text := out.String()
		if code != ExitOK {
			text = errOut.String()
		}
		if tt.code == ExitDeclined {
			text = errOut.String() + out.String() // the question
		}
		if code != tt.code || !strings.Contains(text, tt.out) {
			t.Errorf("%v: exit %d (want %d), want %q\nstdout: %s\nstderr: %s", tt.args, code, tt.code, tt.out, out.String(), errOut.String())
			continue
		}
		if tt.after != nil {
			if err := tt.after(); err != nil {
				t.Errorf("%v: %v", tt.args, err)
			}
		}
	}
	// The listings are the far side's agents only.
	out, errOut, code := runWith(t, notHere, "--context", "box", "agent", "list", "--json")
	var l []struct {
		Slug           string `json:"slug"`
		DiskQuotaBytes int64  `json:"diskQuotaBytes"`
	}
	if err := json.Unmarshal([]byte(out), &l); code != ExitOK || err != nil || len(l) != 2 || l[0].Slug != "alice" || l[1].Slug != "bob" || l[0].DiskQuotaBytes == 0 {
		t.Errorf("agent list --json: %d %v %q %q", code, err, out, errOut)
	}
	if out, _, _ := runWith(t, notHere, "--context", "box", "agent", "list"); strings.Contains(out, "carol") {
		t.Errorf("the far side's list has this machine's agent:\n%s", out)
	}
	// The far side's memory, events and agent logs, through its owner.
	fp := config.Paths{Root: far}
	mem, err := memory.Open(context.Background(), fp.MemoryDB(), memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	mem.Add(context.Background(), "alice", "alice likes tea on the far side", nil)
	ev, err := events.Open(context.Background(), fp.EventsDB(), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	ev.Emit(context.Background(), "alice", "build.far", nil)
	for _, tt := range []struct {
		args []string
		code int
		out  string // in stdout, or stderr when code != 0
	}{
		{[]string{"memory", "list", "--agent", "alice"}, ExitOK, "alice likes tea on the far side"},
		{[]string{"memory", "list", "--agent", "carol"}, ExitError, "carol"}, // this machine's agent
		{[]string{"events", "--agent", "alice"}, ExitOK, "alice  build.far"},
		{[]string{"events"}, ExitOK, "build.far"},
		{[]string{"logs", "--agent", "alice"}, ExitOK, "alice's log is empty"},
		{[]string{"logs"}, ExitOK, "the console log is empty: the VM has not booted in that data folder yet"},
		{[]string{"logs", "--write-console"}, ExitOK, "[    0.000000] Linux version far"},
	} {
		if tt.args[len(tt.args)-1] == "--write-console" { // the far VM's log, as QEMU writes it
			tt.args = tt.args[:1]
			os.MkdirAll(fp.Logs(), 0o700)
			if err := os.WriteFile(fp.ConsoleLog(), []byte("[    0.000000] Linux version far\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		out, errOut, code := runWith(t, notHere, append([]string{"--context", "box"}, tt.args...)...)
		text := out
		if code != ExitOK {
			text = errOut
		}
		if code != tt.code || !strings.Contains(text, tt.out) {
			t.Errorf("%v: exit %d (want %d), want %q\nstdout: %s\nstderr: %s", tt.args, code, tt.code, tt.out, out, errOut)
		}
	}
	if after, err := os.ReadFile(localJSON); err != nil || !bytes.Equal(after, before) {
		t.Errorf("this machine's agents.json changed: %v\n%s", err, after)
	}
}

func runWith(t *testing.T, own Owner, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, strings.NewReader(""), &out, &errOut, own)
	return out.String(), errOut.String(), code
}

// oldOwner answers ListAgents as an owner from before it does: with the
// control socket's answer to an op it doesn't know. It knows alice.
type oldOwner struct{ api.Controller }

func (oldOwner) GetAgent(context.Context, string) (agents.Agent, error) {
	return agents.Agent{ID: "id-1", Name: "alice", Slug: "alice", UID: 2001}, nil
}

func (oldOwner) ListAgents(context.Context) (api.AgentList, error) {
	return api.AgentList{}, fmt.Errorf("%w: %q is not an operation of the control socket", agentproto.ErrUnsupported, control.OpAgentList)
}

func (oldOwner) PluginLibrary(context.Context, control.PluginLibraryRequest) (api.PluginLibrary, error) {
	return api.PluginLibrary{}, fmt.Errorf("%w: %q is not an operation of the control socket", agentproto.ErrUnsupported, control.OpPluginLibrary)
}

func (oldOwner) Settings(context.Context) (api.SettingsFile, error) {
	return api.SettingsFile{}, fmt.Errorf("%w: %q is not an operation of the control socket", agentproto.ErrUnsupported, control.OpSettings)
}

// A far side too old for ListAgents is told to install this version
// there, as connect's lookup is, rather than failing with the op's name.
func TestAgentListThroughContextToAnOldOwner(t *testing.T) {
	fakeFar(t, "old", oldOwner{})
	for _, args := range [][]string{{"agent", "list"}, {"agent", "show", "alice"}, {"plugin", "list"}, {"plugin", "show", "x"}, {"config", "get"}} {
		_, errOut, code := run(t, append([]string{"--context", "old"}, args...)...)
		if code != ExitError || !strings.Contains(errOut, "the far side's osaurus-sandbox can't") || !strings.Contains(errOut, "`osaurus-sandbox context install old`") {
			t.Errorf("%v: %d %q", args, code, errOut)
		}
	}
}
