package hostcli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/remotes"
)

// notHereOwner fails the test when a command opens this machine's data
// files: through a context, nothing here is the far side's.
func notHereOwner(t *testing.T) Owner {
	return Owner{OpenData: func(context.Context, config.Paths, func(string, ...any)) (api.Controller, error) {
		t.Error("a command through the context opened this machine's data files")
		return nil, errors.New("not through a context")
	}}
}

// throughBox runs a table of commands through context box, each with
// the text it prints (stdout, or stderr when it fails) and a check of
// the far side afterwards.
type remoteCase struct {
	args  []string
	code  int
	out   string
	after func() error
}

func throughBox(t *testing.T, cases []remoteCase) {
	t.Helper()
	own := notHereOwner(t)
	for _, tt := range cases {
		out, errOut, code := runWith(t, own, append([]string{"--context", "box"}, tt.args...)...)
		text := out
		if code != ExitOK {
			text = errOut
		}
		if code != tt.code || !strings.Contains(text, tt.out) {
			t.Errorf("%v: exit %d (want %d), want %q\nstdout: %s\nstderr: %s", tt.args, code, tt.code, tt.out, out, errOut)
			continue
		}
		if tt.after != nil {
			if err := tt.after(); err != nil {
				t.Errorf("%v: %v", tt.args, err)
			}
		}
	}
}

// Through a remote context `config` reads and changes the far side's
// sandbox.json, through its owner; this machine's is never written.
func TestConfigThroughContext(t *testing.T) {
	local, far, _ := farAndLocal(t, []string{"config", "set", "cpus", "3"})
	farSide(t, "box", far)
	fp := config.Paths{Root: far}
	farHas := func(want func(config.Sandbox) bool) func() error {
		return func() error {
			s, err := config.LoadSandbox(fp.SandboxJSON())
			if err != nil || !want(s) {
				return errors.New("the far side's sandbox.json is not as it should be: " + fmtErr(err))
			}
			return nil
		}
	}
	throughBox(t, []remoteCase{
		{[]string{"config", "get", "cpus"}, ExitOK, "3", nil},
		{[]string{"config", "get"}, ExitOK, "memoryGB", nil},
		{[]string{"config", "set", "memoryGB", "4"}, ExitOK, "saved on context box; restart its VM", farHas(func(s config.Sandbox) bool { return s.MemoryGB == 4 && s.CPUs == 3 })},
		{[]string{"config", "set", "memoryGB", "99"}, ExitError, "memoryGB: 99, allowed 1–8", farHas(func(s config.Sandbox) bool { return s.MemoryGB == 4 })},
		{[]string{"config", "set", "nokey", "1"}, ExitUsage, "unknown key \"nokey\"", nil},
		{[]string{"config", "reset", "cpus"}, ExitOK, "saved on context box", farHas(func(s config.Sandbox) bool { return s.CPUs == config.Defaults().CPUs && s.MemoryGB == 4 })},
		{[]string{"config", "set", "mcpPort", "5000"}, ExitOK, "saved on context box", farHas(func(s config.Sandbox) bool { return s.MCPPort == 5000 })},
		{[]string{"config", "reset"}, ExitOK, "every setting is at its default", farHas(func(s config.Sandbox) bool { return s == config.Defaults() })},
	})
	// A typo made by hand there is named with the fix through the context.
	os.WriteFile(fp.SandboxJSON(), []byte("{\"cpus\": 2,\n\"cpuz\": 4}\n"), 0o644)
	throughBox(t, []remoteCase{
		{[]string{"config", "get", "cpus"}, ExitError, "`osaurus-sandbox --context box config reset cpuz`", nil},
		{[]string{"config", "reset", "cpuz"}, ExitOK, "saved on context box", farHas(func(config.Sandbox) bool {
			b, _ := os.ReadFile(fp.SandboxJSON())
			return !strings.Contains(string(b), "cpuz")
		})},
	})
	if _, err := os.Stat(config.Paths{Root: local}.SandboxJSON()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("this machine's sandbox.json was written: %v", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// A save based on a read the file has since moved on from is refused,
// over the socket as well, and nothing is written.
func TestSaveSettingsConflict(t *testing.T) {
	_, far, _ := farAndLocal(t)
	ctx := context.Background()
	cl, err := client.Dial(ctx, config.Paths{Root: far})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f, err := cl.Settings(ctx)
	if err != nil || f.Revision != "" || f.Settings != config.Defaults() {
		t.Fatalf("%+v %v", f, err)
	}
	next := f.Settings
	next.CPUs = 4
	saved, err := cl.SaveSettings(ctx, api.SettingsSave{Settings: next, IfRevision: f.Revision})
	if err != nil || saved.Settings.CPUs != 4 || saved.Revision == "" {
		t.Fatalf("%+v %v", saved, err)
	}
	next.CPUs = 5
	_, err = cl.SaveSettings(ctx, api.SettingsSave{Settings: next, IfRevision: f.Revision})
	if !errors.Is(err, agentproto.ErrBusy) || !strings.Contains(err.Error(), "changed since it was read") {
		t.Fatalf("a save on a stale revision: %v", err)
	}
	if s, _ := config.LoadSandbox(config.Paths{Root: far}.SandboxJSON()); s.CPUs != 4 {
		t.Errorf("the stale save wrote: %+v", s)
	}
	bad := next
	bad.Network = "sideways"
	if _, err := cl.SaveSettings(ctx, api.SettingsSave{Settings: bad, IfRevision: saved.Revision}); !errors.Is(err, agentproto.ErrInvalid) || !strings.Contains(err.Error(), "network") {
		t.Errorf("an invalid save: %v", err)
	}
}

// previewOwner relays one preview and closes what it is asked to.
type previewOwner struct {
	api.Controller
	closed *api.ClosePortsRequest
}

func (previewOwner) Previews(context.Context) ([]api.Preview, error) {
	return []api.Preview{{Agent: "alice", Port: 3000, HostPort: 41234, URL: "http://127.0.0.1:41234/"}}, nil
}

func (o previewOwner) ClosePorts(_ context.Context, req api.ClosePortsRequest) (api.ClosePortsResult, error) {
	*o.closed = req
	return api.ClosePortsResult{Closed: 1}, nil
}

func (previewOwner) GetAgent(context.Context, string) (agents.Agent, error) {
	return agents.Agent{ID: "id-1", Name: "alice", Slug: "alice", UID: 2001}, nil
}

// Through a remote context `ports` lists the far owner's previews, says
// where their URLs are, and closes them there; this machine's list (left
// by an owner here) is neither shown nor touched.
func TestPortsThroughContext(t *testing.T) {
	var closed api.ClosePortsRequest
	local := fakeFar(t, "box", previewOwner{closed: &closed})
	lp := config.Paths{Root: local}
	os.MkdirAll(filepath.Dir(lp.PreviewsFile()), 0o755)
	here := []byte(`[{"agent":"carol","port":8080,"hostPort":40000,"url":"http://127.0.0.1:40000/"}]`)
	if err := os.WriteFile(lp.PreviewsFile(), here, 0o644); err != nil {
		t.Fatal(err)
	}
	throughBox(t, []remoteCase{
		{[]string{"ports"}, ExitOK, "alice  3000  http://127.0.0.1:41234/", nil},
		{[]string{"ports"}, ExitOK, "on the loopback of context box's machine; an agent's MCP relay (`osaurus-sandbox --context box mcp --agent NAME`) forwards", nil},
		{[]string{"ports", "--json"}, ExitOK, `"hostPort":41234`, nil},
		{[]string{"ports", "close", "alice", "3000"}, ExitOK, "closed 1 previews on context box", func() error {
			if closed.Agent != "alice" || closed.Port != 3000 {
				return errors.New("the far owner was not asked to close alice's 3000")
			}
			return nil
		}},
	})
	if out, _, _ := runWith(t, notHereOwner(t), "--context", "box", "ports"); strings.Contains(out, "carol") {
		t.Errorf("this machine's preview listed through the context:\n%s", out)
	}
	if b, err := os.ReadFile(lp.PreviewsFile()); err != nil || string(b) != string(here) {
		t.Errorf("this machine's previews file changed: %v %s", err, b)
	}
}

// Through a remote context `project list` is the far owner's projects
// with the far agents granted each; an upload from here shows this
// machine's folder. This machine's projects.json is neither read nor
// written.
func TestProjectListThroughContext(t *testing.T) {
	farDir := t.TempDir()
	local, far, _ := farAndLocal(t, []string{"agent", "add", "alice"}, []string{"project", "add", farDir, "--name", "there"},
		[]string{"agent", "set", "alice", "projects", "there"})
	here := t.TempDir()
	if _, errOut, code := run(t, "project", "add", here, "--name", "mine"); code != ExitOK {
		t.Fatal(errOut)
	}
	farSide(t, "box", far)
	user := t.TempDir()
	put(t, filepath.Join(user, "README.md"), "hi\n")
	if _, errOut, code := run(t, "--context", "box", "project", "add", user, "--name", "up"); code != ExitOK {
		t.Fatal(errOut)
	}
	localJSON := config.Paths{Root: local}.ProjectsJSON()
	before, _ := os.ReadFile(localJSON)
	throughBox(t, []remoteCase{
		{[]string{"project", "list"}, ExitOK, "there", nil},
		{[]string{"project", "list"}, ExitOK, "alice", nil},
		{[]string{"project", "list"}, ExitOK, "(uploaded from " + user + " here)", nil},
		{[]string{"project", "list", "--json"}, ExitOK, `"localDir":"` + user + `"`, nil},
	})
	if out, _, _ := runWith(t, notHereOwner(t), "--context", "box", "project", "list"); strings.Contains(out, "mine") {
		t.Errorf("this machine's project listed through the context:\n%s", out)
	}
	if after, _ := os.ReadFile(localJSON); string(after) != string(before) {
		t.Errorf("this machine's projects.json changed:\n%s", after)
	}
}

// Through a remote context `plugin update` fetches a URL origin here and
// saves the new version in the far library; the repairs are the far
// owner's.
func TestPluginUpdateAndRepairsThroughContext(t *testing.T) {
	version := "1.0.0"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(strings.Replace(helloPlugin, "1.0.0", version, 1)))
	}))
	defer srv.Close()
	pluginHTTPClient = srv.Client()
	defer func() { pluginHTTPClient = nil }()
	local, far, _ := farAndLocal(t, []string{"agent", "add", "alice"}, []string{"project", "add", t.TempDir(), "--name", "p"})
	farSide(t, "box", far)
	if _, errOut, code := run(t, "--context", "box", "plugin", "import", srv.URL+"/hello.json"); code != ExitOK {
		t.Fatal(errOut)
	}
	version = "2.0.0"
	farVersion := func(want int) func() error {
		return func() error {
			lib, _ := plugins.OpenLibrary(config.Paths{Root: far}.PluginsDir())
			if e, err := lib.Get("hello-tools"); err != nil || e.Current().Number != want {
				return fmt.Errorf("the far library's hello-tools is not at version %d: %v", want, err)
			}
			return nil
		}
	}
	throughBox(t, []remoteCase{
		{[]string{"plugin", "update", "hello-tools"}, ExitOK, "updated hello-tools as library version 2", farVersion(2)},
		{[]string{"plugin", "update", "nope"}, ExitError, "nope", nil},
		{[]string{"plugin", "repair"}, ExitOK, "every agent's install record is fine", nil},
		{[]string{"project", "repair"}, ExitOK, "projects.json of context box is fine (1 projects)", nil},
		{[]string{"agent", "repair"}, ExitOK, "agents.json of context box is fine (1 agents)", nil},
	})
	for _, f := range []string{config.Paths{Root: local}.PluginsDir(), config.Paths{Root: local}.ProjectsJSON(), config.Paths{Root: local}.AgentsJSON()} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was made on this machine (%v)", f, err)
		}
	}
}

// With no owner to be had there (a damaged agents.json keeps one from
// starting), `agent repair` through the context says to run it on that
// machine.
func TestAgentRepairThroughContextNoOwner(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv(remotes.Env, "")
	t.Setenv(config.HomeEnv, shortDir(t, "loc"))
	farSide(t, "box", shortDir(t, "far"))
	// The far side's command fails as a dial-stdio whose owner did not
	// come up does.
	rc := remotes.Context{Name: "down", URL: "ssh://me@box", Command: "false"}
	if err := (&cli{paths: config.Paths{Root: os.Getenv(config.HomeEnv)}}).contextStore().Add(rc); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runWith(t, notHereOwner(t), "--context", "down", "agent", "repair")
	if code == ExitOK || !strings.Contains(errOut, "if that machine's agents.json is damaged, no owner can start there to repair it: run `ssh me@box false agent repair` on it") {
		t.Errorf("%d %s", code, errOut)
	}
}

// Through a remote context `run` and `task` use the far owner and its
// agents; the far side's inference settings apply (this machine's,
// which would let a task start, don't), and its refusal comes back
// naming the context.
func TestTasksThroughContext(t *testing.T) {
	local, far, _ := farAndLocal(t, []string{"agent", "add", "alice"})
	for _, args := range [][]string{{"agent", "add", "carol"}, {"config", "set", "inferenceUrl", "http://127.0.0.1:9/v1"}} {
		if _, errOut, code := run(t, args...); code != ExitOK {
			t.Fatal(args, errOut)
		}
	}
	farSide(t, "box", far)
	throughBox(t, []remoteCase{
		{[]string{"run", "--agent", "carol", "hi"}, ExitError, "carol", nil},
		{[]string{"run", "--agent", "alice", "hi"}, ExitError, "context box (ssh://me@box): ", nil},
		{[]string{"run", "--agent", "alice", "hi"}, ExitError, "`osaurus-sandbox --context box config set inferenceUrl", nil},
		{[]string{"task", "list"}, ExitOK, "", nil},
		{[]string{"task", "list", "--agent", "carol"}, ExitError, "carol", nil},
		{[]string{"task", "show", "nope"}, ExitError, "nope", nil},
		{[]string{"task", "cancel", "nope"}, ExitError, "nope", nil},
	})
	if _, err := os.Stat(config.Paths{Root: local}.TasksDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("this machine got a tasks folder: %v", err)
	}
}
