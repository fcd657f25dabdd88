//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/server"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
	"github.com/osaurus/osaurus-sandbox/vm"
)

// toolsEnv is one booted VM served to MCP clients the two ways users
// reach it: the real `osaurus-sandbox mcp` binary over stdio (relayed
// through an owner's control socket, as in the app) and the app's HTTP
// server on loopback with bearer tokens.
type toolsEnv struct {
	m     *vm.Machine
	home  string // OSAURUS_SANDBOX_HOME of the CLI
	reg   *agents.Registry
	url   string
	bin   string
	ports *host.Ports
	out   string // the host folder the guest mounts as /output
}

func newToolsEnv(t testing.TB) *toolsEnv { return newToolsEnvCAs(t, true) }

// newToolsEnvCAs is newToolsEnv, trusting the host's extra CAs only when
// the test reaches a package registry. It serves the shared guest.
func newToolsEnvCAs(t testing.TB, cas bool) *toolsEnv {
	t.Helper()
	return newToolsEnvOn(t, sharedGuest(t), cas)
}

// newToolsEnvOn is newToolsEnvCAs on m, for a test that needs a VM of
// its own.
func newToolsEnvOn(t testing.TB, m *vm.Machine, cas bool) *toolsEnv {
	t.Helper()
	// The CAs are the guest's own configuration: the shared guest gets
	// them once.
	if cas && (m != shared.m || !shared.casTrusted) {
		trustHostCAs(t, m.Agent())
		if m == shared.m {
			shared.casTrusted = true
		}
	}
	te := &toolsEnv{m: m, home: t.TempDir(), bin: buildCLI(t), out: filepath.Join(env.dataDir, "output")}
	if m == shared.m {
		te.out = filepath.Join(sharedDir(), "output")
	}
	paths := config.Paths{Root: te.home}
	var err error
	te.reg = openAgents(t, paths.AgentsJSON())
	// As the app's: with the plugin library, so both transports list
	// sandbox_plugin_register to agents that may register plugins.
	lib, err := plugins.OpenLibrary(paths.PluginsDir())
	if err != nil {
		t.Fatal(err)
	}
	env := tools.NewEnv(tools.Options{
		Guest:   func(context.Context) (*agentproto.Client, error) { return m.Agent(), nil },
		Agents:  te.reg,
		Plugins: plugins.NewInstalled(paths.AgentStateDir()),
		Registry: &tools.PluginRegistry{Library: lib, Allowlist: func() plugins.Allowlist {
			return plugins.NewAllowlist(config.DefaultPluginSetupAllowlist)
		}},
		// Listed like the app's; the keychain is only reached when called.
		SecretStore: secrets.New(),
		OutputDir:   te.out,
		KeepDir:     paths.Artifacts(),
	})
	// One tool host, as in the app: the stdio servers' calls (through the
	// control socket) and HTTP share its limits.
	// The owner's previews, for tests that expose ports (`ports close`).
	te.ports = &host.Ports{Guest: func(context.Context) (*agentproto.Client, error) { return m.Agent(), nil }, StateFile: paths.PreviewsFile()}
	t.Cleanup(func() { te.ports.Close("", 0) })
	serveOwner(t, paths, m, &host.ToolHost{Env: env, Registry: te.reg, Ports: te.ports})
	te.url = serveMCPHTTP(t, env, te.reg)
	return te
}

// trustHostCAs makes the guest trust the extra certificate authorities
// this machine trusts (/usr/local/share/ca-certificates): test machines
// may reach package registries through a TLS-inspecting proxy, and npm
// must get through it as the host's own tools do.
func trustHostCAs(t testing.TB, g *agentproto.Client) {
	t.Helper()
	certs, _ := filepath.Glob("/usr/local/share/ca-certificates/*.crt")
	if len(certs) == 0 {
		return
	}
	ctx := context.Background()
	for _, c := range certs {
		b, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		dst := "/usr/local/share/ca-certificates/host-" + filepath.Base(c)
		if _, err := g.WriteFile(ctx, agentproto.WriteFileRequest{Path: dst, Data: b, MakeParents: true}); err != nil {
			t.Fatal(err)
		}
	}
	// npm reads its own CA setting; point it at the system bundle.
	if _, err := g.WriteFile(ctx, agentproto.WriteFileRequest{Path: "/etc/npmrc", Data: []byte("cafile=/etc/ssl/certs/ca-certificates.crt\n")}); err != nil {
		t.Fatal(err)
	}
	// Its own deadline, far above sh's: it rehashes every certificate,
	// which under TCG on a loaded machine has taken over two minutes.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	out, errOut, st, err := g.Output(ctx, agentproto.ExecRequest{Shell: "update-ca-certificates"})
	if err != nil || st.Code != 0 {
		t.Fatalf("update-ca-certificates: %v %+v %s %s", err, st, out, errOut)
	}
}

// e2eOwner is the owner's Controller over the shared booted VM: the real
// control server and tool host, with the lifecycle left out (the tests
// share one VM and don't use it).
type e2eOwner struct {
	*host.ToolHost
	noLifecycle
}

// noLifecycle leaves the lifecycle out: nil, its calls would panic.
type noLifecycle struct{ api.Controller }

func (o e2eOwner) Status(context.Context) (api.Status, error) {
	return api.Status{Status: control.Status{State: control.Running}, Owner: "e2e"}, nil
}

// serveOwner serves the control socket of p as the app would, with th's
// tools environment over m (th's Paths and Running are filled in).
func serveOwner(t testing.TB, p config.Paths, m *vm.Machine, th *host.ToolHost) {
	th.Paths = p
	th.Running = func(context.Context) (*agentproto.Client, error) {
		g := m.Agent()
		if err := g.Peer.Err(); err != nil {
			return nil, fmt.Errorf("%w: %w; start it first", agentproto.ErrUnavailable, err)
		}
		return g, nil
	}
	ln, err := server.Listen(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&server.Server{Ctl: e2eOwner{ToolHost: th}, Guest: th.Running, Shell: th.Terminal}).Serve(ctx, ln)
	}()
	t.Cleanup(func() { cancel(); ln.Close(); <-done })
}

func (te *toolsEnv) addAgent(t testing.TB, name string, fn func(*agents.AutonomousExec)) agents.Agent {
	t.Helper()
	a, err := te.reg.Add(name)
	if err != nil {
		t.Fatal(err)
	}
	if fn != nil {
		if a, err = te.reg.Update(a.ID, func(a *agents.Agent) error { fn(&a.AutonomousExec); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func autonomous(max int, background bool) func(*agents.AutonomousExec) {
	return func(ae *agents.AutonomousExec) {
		ae.Enabled, ae.MaxCommandsPerTurn, ae.BackgroundProcesses = true, max, background
	}
}

// session is an MCP client session with helpers.
type session struct {
	name    string
	cs      *mcp.ClientSession
	changed chan struct{}
}

func newSession(t testing.TB, name string, tr mcp.Transport) *session {
	t.Helper()
	s := &session{name: name, changed: make(chan struct{}, 16)}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { s.changed <- struct{}{} },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("%s: connect: %v", name, err)
	}
	t.Cleanup(func() { cs.Close() })
	s.cs = cs
	return s
}

// stdio runs the real binary as an MCP client would.
func (te *toolsEnv) stdio(t testing.TB, agent string) *session {
	cmd := exec.Command(te.bin, "mcp", "--agent", agent)
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+te.home)
	cmd.Stderr = testLog{t, "stdio server: "}
	return newSession(t, "stdio "+agent, &mcp.CommandTransport{Command: cmd})
}

func (te *toolsEnv) http(t testing.TB, agent string) *session {
	tok, err := te.reg.Token(agent)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: bearer(tok)}
	return newSession(t, "http "+agent, &mcp.StreamableClientTransport{Endpoint: te.url, HTTPClient: hc})
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

type testLog struct {
	t      testing.TB
	prefix string
}

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(l.prefix + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (s *session) tools(t testing.TB) []string {
	t.Helper()
	res, err := s.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("%s: list tools: %v", s.name, err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// call runs a tool and returns its envelope, checking that IsError agrees.
func (s *session) call(t testing.TB, tool string, args any) envelope.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %s: %v", s.name, tool, err)
	}
	e, err := envelope.Parse(res.Content[0].(*mcp.TextContent).Text)
	if err != nil {
		t.Fatalf("%s: %s: %v", s.name, tool, err)
	}
	if res.IsError == e.OK || e.Tool != tool {
		t.Fatalf("%s: %s: IsError %v for envelope %+v", s.name, tool, res.IsError, e)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Logf("%s: %s took %s", s.name, tool, d.Round(100*time.Millisecond))
	}
	return e
}

// ok runs a tool that must succeed and returns its result.
func (s *session) ok(t testing.TB, tool string, args any) map[string]any {
	t.Helper()
	e := s.call(t, tool, args)
	if !e.OK {
		t.Fatalf("%s: %s(%v): %s: %s", s.name, tool, args, e.Kind, e.Message)
	}
	r, _ := e.Result.(map[string]any)
	return r
}

// fails runs a tool that must fail with kind and returns the envelope.
func (s *session) fails(t testing.TB, tool string, args any, kind envelope.Kind) envelope.Envelope {
	t.Helper()
	e := s.call(t, tool, args)
	if e.OK || e.Kind != kind || e.Retryable != kind.Retryable() {
		t.Fatalf("%s: %s(%v): got %+v, want a %s failure", s.name, tool, args, e, kind)
	}
	return e
}

func (s *session) waitChanged(t testing.TB) {
	t.Helper()
	select {
	case <-s.changed:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no tools/list_changed notification", s.name)
	}
}

func num(v any) int {
	n, _ := v.(json.Number).Int64()
	return int(n)
}

// TestToolsOverMCP drives every tool through both transports against one
// booted VM, then checks isolation, gating, limiters, caps and failures.
func TestToolsOverMCP(t *testing.T) {
	// A VM of its own: its last step stops the VM. pip and npm use the
	// test's own index.
	te := newToolsEnvOn(t, boot(t, bootOpts{}), false)
	te.addAgent(t, "Alice", autonomous(100, true))
	te.addAgent(t, "Bob", autonomous(100, true))
	alice := te.stdio(t, "alice")
	bob := te.http(t, "bob")
	idx := serveLocalPackageIndex(t, te.m.Agent())

	t.Run("every tool over stdio", func(t *testing.T) { everyTool(t, alice, "alice", "jq", idx) })
	t.Run("every tool over HTTP", func(t *testing.T) { everyTool(t, bob, "bob", "tree", idx) })
	t.Run("concurrent calls", func(t *testing.T) { concurrentCalls(t, alice) })
	t.Run("isolation", func(t *testing.T) { isolation(t, alice, bob) })
	t.Run("gating", func(t *testing.T) { gating(t, te) })
	t.Run("limiters", func(t *testing.T) { limiters(t, te) })
	t.Run("output caps", func(t *testing.T) { outputCaps(t, alice, bob) })
	t.Run("failure envelopes", func(t *testing.T) { failures(t, alice, bob) })
	t.Run("remove agent", func(t *testing.T) { removeAgent(t, te, bob) })
	t.Run("VM gone", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		te.m.Stop(ctx)
		for _, s := range []*session{alice, te.http(t, "alice")} {
			e := s.fails(t, "sandbox_list_directory", nil, envelope.Unavailable)
			t.Logf("%s after the VM stopped: %s", s.name, e.Message)
		}
	})
}

func everyTool(t *testing.T, s *session, slug, pkg string, idx *pkgIndex) {
	home := "/workspace/agents/" + slug
	const script = "import sys\nprint('hello', *sys.argv[1:])\n"

	// All but sandbox_checkpoint: it needs the owner's checkpoints (a
	// host.Host), which this harness's tools environment has not, so its
	// gate hides it (TestSandboxCheckpointTool, host, covers it).
	if got := len(s.tools(t)); got != 22 {
		t.Fatalf("%d tools listed, want all 22", got)
	}
	r := s.ok(t, "sandbox_write_file", map[string]any{"path": "proj/hello.py", "content": script})
	if r["path"] != home+"/proj/hello.py" || num(r["size"]) != len(script) {
		t.Fatalf("write: %v", r)
	}
	if r = s.ok(t, "sandbox_read_file", map[string]any{"path": "proj/hello.py"}); r["content"] != script || r["kind"] != "file" {
		t.Fatalf("read: %v", r)
	}
	if r = s.ok(t, "sandbox_read_file", map[string]any{"path": "~/proj/hello.py", "start_line": 2, "line_count": 1}); r["content"] != "print('hello', *sys.argv[1:])\n" {
		t.Fatalf("read line 2: %v", r)
	}
	if r = s.ok(t, "sandbox_read_file", map[string]any{"path": home + "/proj/hello.py", "tail_lines": 1}); r["content"] != "print('hello', *sys.argv[1:])\n" {
		t.Fatalf("read tail: %v", r)
	}
	e := s.fails(t, "sandbox_edit_file", map[string]any{"path": "proj/hello.py", "old_string": "sys", "new_string": "os"}, envelope.InvalidArgs)
	if e.Field != "old_string" || !strings.Contains(e.Message, "matched 2 times") {
		t.Fatalf("ambiguous edit: %+v", e)
	}
	s.ok(t, "sandbox_edit_file", map[string]any{"path": "proj/hello.py", "old_string": "'hello'", "new_string": "'hi'"})

	r = s.ok(t, "sandbox_list_directory", map[string]any{"path": "proj"})
	if fmt.Sprint(r["entries"]) != fmt.Sprintf("[map[name:hello.py path:%s/proj/hello.py size:%d type:file]]", home, len(script)-3) {
		t.Fatalf("list: %v", r["entries"])
	}
	r = s.ok(t, "sandbox_list_directory", map[string]any{"recursive": true})
	if !strings.Contains(fmt.Sprint(r["entries"]), home+"/proj/hello.py") {
		t.Fatalf("recursive list: %v", r["entries"])
	}
	r = s.ok(t, "sandbox_search_files", map[string]any{"pattern": "h[io]'", "path": "proj", "include": "*.py", "context_lines": 1})
	lines := r["lines"].([]any)
	if num(r["match_count"]) != 1 || len(lines) != 2 || fmt.Sprint(lines[1]) != fmt.Sprintf("map[line:2 match:true path:%s/proj/hello.py text:print('hi', *sys.argv[1:])]", home) {
		t.Fatalf("search: %v", r)
	}
	if r = s.ok(t, "sandbox_find_files", map[string]any{"pattern": "hello"}); fmt.Sprint(r["files"]) != "["+home+"/proj/hello.py]" {
		t.Fatalf("find: %v", r)
	}

	r = s.ok(t, "sandbox_exec", map[string]any{"command": "whoami; pwd; stat -c %a ."})
	if r["stdout"] != fmt.Sprintf("agent-%s\n%s\n700\n", slug, home) || num(r["exit_code"]) != 0 {
		t.Fatalf("exec: %v", r)
	}
	if r = s.ok(t, "sandbox_exec", map[string]any{"command": "ls; exit 3", "cwd": "proj", "timeout": 60}); r["stdout"] != "hello.py\n" || num(r["exit_code"]) != 3 {
		t.Fatalf("exec in proj: %v", r)
	}
	r = s.ok(t, "sandbox_run_script", map[string]any{"path": "proj/hello.py", "args": []string{"there"}})
	if r["stdout"] != "hi there\n" || r["combined"] != "hi there\n" || r["language"] != "python" {
		t.Fatalf("run script: %v", r)
	}

	shared := "/workspace/shared/" + slug + "-hello.py"
	s.ok(t, "sandbox_move", map[string]any{"source": "proj/hello.py", "destination": shared})
	s.ok(t, "sandbox_read_file", map[string]any{"path": shared})
	s.ok(t, "sandbox_delete", map[string]any{"path": shared})
	s.ok(t, "sandbox_write_file", map[string]any{"path": "proj/x", "content": ""})
	s.fails(t, "sandbox_delete", map[string]any{"path": "proj"}, envelope.InvalidArgs)
	s.ok(t, "sandbox_delete", map[string]any{"path": "proj", "recursive": true})
	s.fails(t, "sandbox_read_file", map[string]any{"path": "proj/hello.py"}, envelope.NotFound)

	r = s.ok(t, "sandbox_exec_background", map[string]any{"command": "echo started; exec sleep 300"})
	pid := num(r["pid"])
	if r["background"] != true || r["log_file"] != fmt.Sprintf("%s/.sandbox/logs/%d.log", home, pid) {
		t.Fatalf("background: %v", r)
	}
	testwait.Eventually(t, "the background process's log to show its output", time.Minute, time.Second, func() bool {
		r = s.ok(t, "sandbox_process", map[string]any{"action": "poll", "pid": pid})
		if r["running"] != true {
			t.Fatalf("poll: %v", r)
		}
		return r["log_tail"] == "started\n"
	})
	if r = s.ok(t, "sandbox_process", map[string]any{"action": "kill", "pid": pid}); r["running"] != false || num(r["signal"]) != 15 {
		t.Fatalf("kill: %v", r)
	}
	if r = s.ok(t, "sandbox_process", map[string]any{"action": "wait", "pid": pid, "timeout": 1}); r["running"] != false {
		t.Fatalf("wait after kill: %v", r)
	}

	// pip and npm install from the index the test serves (whatever the
	// machine's network reaches): a package the index lacks fails with
	// pip's words, and the venv is made.
	e = s.fails(t, "sandbox_pip_install", map[string]any{"packages": []string{"osaurus-no-such-package"}}, envelope.ExecutionError)
	if !strings.Contains(e.Message, "pip install failed") || !strings.Contains(e.Message, "osaurus-no-such-package") {
		t.Fatalf("pip of a package the index lacks: %s", e.Message)
	}
	if r = s.ok(t, "sandbox_exec", map[string]any{"command": "command -v python3; command -v pip"}); r["stdout"] != home+"/.venv/bin/python3\n"+home+"/.venv/bin/pip\n" {
		t.Fatalf("the venv is not first on PATH: %v", r)
	}
	before := idx.fetched("/files/" + pipDemo + "-1.0.0-py3-none-any.whl")
	start := time.Now()
	r = s.ok(t, "sandbox_pip_install", map[string]any{"packages": []string{pipDemo + "==1.0.0"}})
	t.Logf("pip install %s: %s", pipDemo, time.Since(start).Round(time.Second))
	if fmt.Sprint(r["installed"]) != "["+pipDemo+"==1.0.0]" || r["venv"] != home+"/.venv" {
		t.Fatalf("pip install: %v", r)
	}
	if idx.fetched("/files/"+pipDemo+"-1.0.0-py3-none-any.whl") <= before {
		t.Fatal("pip did not fetch the wheel from the test's index")
	}
	if r = s.ok(t, "sandbox_exec", map[string]any{"command": "python3 -c 'import " + pipDemo + "; print(" + pipDemo + ".VALUE)'"}); r["stdout"] != "from the test index\n" {
		t.Fatalf("the installed module: %v", r)
	}

	before = idx.fetched("/" + npmDemo + "/-/" + npmDemo + "-1.0.0.tgz")
	start = time.Now()
	s.ok(t, "sandbox_npm_install", map[string]any{"packages": []string{npmDemo + "@1"}})
	t.Logf("npm install %s: %s", npmDemo, time.Since(start).Round(time.Second))
	if idx.fetched("/"+npmDemo+"/-/"+npmDemo+"-1.0.0.tgz") <= before {
		t.Fatal("npm did not fetch the tarball from the test's index")
	}
	if r = s.ok(t, "sandbox_exec", map[string]any{"command": npmDemo + " hi", "timeout": 120}); r["stdout"] != npmDemo+" hi\n" {
		t.Fatalf("%s from the npm prefix: %v", npmDemo, r)
	}

	start = time.Now()
	r = s.ok(t, "sandbox_install", map[string]any{"packages": []string{pkg}})
	t.Logf("apt install %s: %s", pkg, time.Since(start).Round(time.Second))
	if fmt.Sprint(r["installed"]) != "["+pkg+"]" {
		t.Fatalf("install: %v", r)
	}
	if r = s.ok(t, "sandbox_exec", map[string]any{"command": pkg + " --version"}); num(r["exit_code"]) != 0 {
		t.Fatalf("%s after install: %v", pkg, r)
	}
}

func isolation(t *testing.T, alice, bob *session) {
	bobHome := "/workspace/agents/bob"
	bob.ok(t, "sandbox_write_file", map[string]any{"path": "secret.txt", "content": "bob's secret 4711\n"})
	bob.ok(t, "sandbox_write_file", map[string]any{"path": "/workspace/shared/bob.txt", "content": "mine\n"})
	r := bob.ok(t, "sandbox_exec_background", map[string]any{"command": "exec sleep 600"})
	bobPid := num(r["pid"])

	// Directly: the host refuses the path.
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"sandbox_read_file", map[string]any{"path": bobHome + "/secret.txt"}},
		{"sandbox_write_file", map[string]any{"path": bobHome + "/planted", "content": "x"}},
		{"sandbox_list_directory", map[string]any{"path": bobHome}},
		{"sandbox_search_files", map[string]any{"pattern": "secret", "path": bobHome}},
		{"sandbox_read_file", map[string]any{"path": "../bob/secret.txt"}},
		{"sandbox_read_file", map[string]any{"path": "/etc/shadow"}},
	} {
		e := alice.fails(t, c.tool, c.args, envelope.InvalidArgs)
		if e.Field != "path" || !strings.Contains(e.Expected, "/workspace/agents/alice") {
			t.Errorf("%s %v: %+v", c.tool, c.args, e)
		}
	}

	// Through symlinks alice plants in her home: the guest refuses them.
	alice.ok(t, "sandbox_exec", map[string]any{"command": "ln -sfn " + bobHome + " bobhome && ln -sfn /etc etc && ln -sfn " + bobHome + "/secret.txt s && ln -sfn /etc/passwd pw"})
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"sandbox_read_file", map[string]any{"path": "bobhome/secret.txt"}},
		{"sandbox_read_file", map[string]any{"path": "s"}},
		{"sandbox_read_file", map[string]any{"path": "etc/passwd"}},
		{"sandbox_read_file", map[string]any{"path": "pw"}},
		{"sandbox_list_directory", map[string]any{"path": "bobhome"}},
		{"sandbox_list_directory", map[string]any{"path": "etc"}},
		{"sandbox_write_file", map[string]any{"path": "bobhome/planted", "content": "x"}},
		{"sandbox_write_file", map[string]any{"path": "etc/evil", "content": "x"}},
		{"sandbox_edit_file", map[string]any{"path": "s", "old_string": "bob", "new_string": "eve"}},
		{"sandbox_search_files", map[string]any{"pattern": "root", "path": "etc"}},
		{"sandbox_search_files", map[string]any{"pattern": "secret", "path": "bobhome"}},
		{"sandbox_find_files", map[string]any{"pattern": "*", "path": "bobhome"}},
		{"sandbox_exec", map[string]any{"command": "ls", "cwd": "bobhome"}},
		{"sandbox_move", map[string]any{"source": "bobhome/secret.txt", "destination": "stolen.txt"}},
		{"sandbox_delete", map[string]any{"path": "bobhome/secret.txt"}},
	} {
		e := alice.call(t, c.tool, c.args)
		if e.OK || e.Kind != envelope.Rejected {
			t.Errorf("%s %v through a symlink: %+v", c.tool, c.args, e)
		}
	}
	// ...and nothing went through them: bob's file is as he wrote it, and
	// nothing was planted, edited, moved out or deleted.
	if r := bob.ok(t, "sandbox_exec", map[string]any{"command": "cat secret.txt; for f in planted /etc/evil; do test -e $f && echo exists: $f; done; true"}); r["stdout"] != "bob's secret 4711\n" {
		t.Errorf("a write through alice's symlinks landed: bob sees %v", r)
	}
	if r := alice.ok(t, "sandbox_exec", map[string]any{"command": "test -e stolen.txt && echo exists: stolen.txt; true"}); r["stdout"] != "" {
		t.Errorf("a move through a symlink landed: %v", r)
	}
	// A search of her whole home doesn't follow the links either.
	if r := alice.ok(t, "sandbox_search_files", map[string]any{"pattern": "4711|root:"}); num(r["match_count"]) != 0 {
		t.Errorf("search followed a symlink: %v", r)
	}
	// Her own commands meet Unix permissions.
	if r := alice.ok(t, "sandbox_exec", map[string]any{"command": "cat " + bobHome + "/secret.txt; ls " + bobHome}); num(r["exit_code"]) == 0 || strings.Contains(str(r["stdout"]), "4711") {
		t.Errorf("alice read bob's home: %v", r)
	}
	// Ignore files bob plants in the shared area don't hide alice's files
	// from her searches there.
	alice.ok(t, "sandbox_write_file", map[string]any{"path": "/workspace/shared/alice-notes.txt", "content": "needle-7319\n"})
	for _, f := range []string{".rgignore", ".ignore", ".gitignore"} {
		bob.ok(t, "sandbox_write_file", map[string]any{"path": "/workspace/shared/" + f, "content": "*.txt\n"})
	}
	if r := alice.ok(t, "sandbox_search_files", map[string]any{"pattern": "needle-7319", "path": "/workspace/shared"}); num(r["match_count"]) != 1 {
		t.Errorf("a planted ignore file hid alice's file from her search: %v", r)
	}
	// The guest's hardening, seen from an agent's shell. Her command ran
	// in her network namespace, which waits for the policy's modules, the
	// last the guest loads: module loading is off by then, or (our own
	// kernel) the kernel can't load modules at all.
	r = alice.ok(t, "sandbox_exec", map[string]any{"command": "cat /proc/sys/fs/protected_regular /proc/sys/fs/protected_fifos /proc/sys/kernel/kptr_restrict /proc/sys/kernel/yama/ptrace_scope; " +
		"if [ -e /proc/modules ]; then cat /proc/sys/kernel/modules_disabled; else echo no-module-support; fi"})
	if got := str(r["stdout"]); got != "2\n2\n2\n1\n1\n" && got != "2\n2\n2\n1\nno-module-support\n" {
		t.Errorf("sysctls: %v", r)
	}
	r = alice.ok(t, "sandbox_exec", map[string]any{"command": "unshare --user --map-root-user true"})
	if num(r["exit_code"]) == 0 {
		t.Errorf("an agent created a user namespace: %v", r)
	}
	r = alice.ok(t, "sandbox_exec", map[string]any{"command": "awk '$2 == \"/workspace\" || $2 == \"/output\" {print $2, $4}' /proc/mounts"})
	for _, line := range strings.Split(strings.TrimSpace(str(r["stdout"])), "\n") {
		if opts := strings.Split(line, ","); !slices.Contains(opts, "nosuid") || !slices.Contains(opts, "nodev") {
			t.Errorf("share mounted without nosuid,nodev: %q", line)
		}
	}
	if n := strings.Count(str(r["stdout"]), "\n"); n != 2 {
		t.Errorf("want /workspace and /output in /proc/mounts: %v", r)
	}

	// Install only installs: apt's trailing "-" (remove, for every agent)
	// and other manager syntax are refused before anything runs.
	for _, pkg := range []string{"bash-", "coreutils-", "jq/bookworm", "-y"} {
		if e := alice.fails(t, "sandbox_install", map[string]any{"packages": []string{pkg}}, envelope.InvalidArgs); e.Field != "packages" {
			t.Errorf("install %q: %+v", pkg, e)
		}
	}

	// Shared files: readable, but only their owner may delete them.
	alice.ok(t, "sandbox_read_file", map[string]any{"path": "/workspace/shared/bob.txt"})
	alice.fails(t, "sandbox_delete", map[string]any{"path": "/workspace/shared/bob.txt"}, envelope.Rejected)
	alice.fails(t, "sandbox_write_file", map[string]any{"path": "/workspace/shared/bob.txt", "content": "x"}, envelope.Rejected)

	// Processes: hidden (hidepid=2) and out of reach.
	r = alice.ok(t, "sandbox_exec", map[string]any{"command": fmt.Sprintf("ps -eo pid=,user=; ls /proc/%d", bobPid)})
	if strings.Contains(str(r["stdout"]), "agent-bob") || strings.Contains(str(r["stdout"]), fmt.Sprint(bobPid)) || num(r["exit_code"]) == 0 {
		t.Errorf("alice sees bob's process %d: %v", bobPid, r)
	}
	if r := bob.ok(t, "sandbox_exec", map[string]any{"command": "ps -eo user= | sort -u"}); strings.Contains(str(r["stdout"]), "agent-alice") {
		t.Errorf("bob sees alice's processes: %v", r)
	}
	alice.fails(t, "sandbox_process", map[string]any{"action": "kill", "pid": bobPid, "force": true}, envelope.Rejected)
	alice.fails(t, "sandbox_process", map[string]any{"action": "poll", "pid": bobPid}, envelope.Rejected)
	if r := alice.ok(t, "sandbox_exec", map[string]any{"command": fmt.Sprintf("kill -9 %d", bobPid)}); num(r["exit_code"]) == 0 {
		t.Errorf("alice's kill -9 of bob's process worked: %v", r)
	}
	if r := bob.ok(t, "sandbox_process", map[string]any{"action": "poll", "pid": bobPid}); r["running"] != true {
		t.Errorf("bob's process died: %v", r)
	}
	bob.ok(t, "sandbox_process", map[string]any{"action": "kill", "pid": bobPid, "force": true})
}

func gating(t *testing.T, te *toolsEnv) {
	te.addAgent(t, "Carol", nil)
	for _, s := range []*session{te.stdio(t, "carol"), te.http(t, "carol")} {
		if got := s.tools(t); !slices.Equal(got, []string{"sandbox_directory_tree", "sandbox_file_info", "sandbox_find_files",
			"sandbox_list_directory", "sandbox_read_file", "sandbox_read_multiple_files", "sandbox_search_files"}) {
			t.Fatalf("%s: tools of a read-only agent: %v", s.name, got)
		}
		e := s.fails(t, "sandbox_exec", map[string]any{"command": "id"}, envelope.ToolNotFound)
		if !strings.Contains(e.Message, "autonomous exec") {
			t.Fatal(e.Message)
		}
		s.ok(t, "sandbox_list_directory", nil)

		update := func(fn func(*agents.AutonomousExec)) {
			if _, err := te.reg.Update("carol", func(a *agents.Agent) error { fn(&a.AutonomousExec); return nil }); err != nil {
				t.Fatal(err)
			}
			s.waitChanged(t)
		}
		set := func(on bool) { update(func(ae *agents.AutonomousExec) { ae.Enabled = on }) }
		set(true)
		// Background processes follow autonomous exec (a new agent's
		// backgroundProcesses is on), as the seed documents.
		if got := len(s.tools(t)); got != 22 {
			t.Fatalf("%s: %d tools after enabling, want 22", s.name, got)
		}
		if r := s.ok(t, "sandbox_exec", map[string]any{"command": "whoami"}); r["stdout"] != "agent-carol\n" {
			t.Fatalf("exec: %v", r)
		}
		s.ok(t, "sandbox_exec_background", map[string]any{"command": "true"})
		// The setting still takes them away for users who want them off.
		update(func(ae *agents.AutonomousExec) { ae.BackgroundProcesses = false })
		if got := len(s.tools(t)); got != 20 {
			t.Fatalf("%s: %d tools with backgroundProcesses off, want 20", s.name, got)
		}
		s.fails(t, "sandbox_exec_background", map[string]any{"command": "sleep 1"}, envelope.ToolNotFound)
		update(func(ae *agents.AutonomousExec) { ae.BackgroundProcesses = true })
		set(false)
		s.fails(t, "sandbox_write_file", map[string]any{"path": "x", "content": "y"}, envelope.ToolNotFound)
	}
}

// concurrentCalls: one stdio client's calls run at the same time (through
// the stdio server, the owner's socket and the tool host). The first
// reads from a FIFO that only the second writes to, so run one after the
// other they would never finish.
func concurrentCalls(t *testing.T, s *session) {
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	first := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "sandbox_exec",
			Arguments: map[string]any{"command": "rm -f rendezvous && mkfifo rendezvous && cat rendezvous", "timeout": 120}})
		first <- result{res, err}
	}()
	s.ok(t, "sandbox_exec", map[string]any{"command": "until [ -p rendezvous ]; do sleep 0.1; done; echo met > rendezvous", "timeout": 120})
	r := <-first
	if r.err != nil {
		t.Fatal(r.err)
	}
	e, err := envelope.Parse(r.res.Content[0].(*mcp.TextContent).Text)
	if out, _ := e.Result.(map[string]any); err != nil || !e.OK || out["stdout"] != "met\n" {
		t.Fatalf("the reader: %+v %v", e, err)
	}
}

func limiters(t *testing.T, te *toolsEnv) {
	te.addAgent(t, "Dave", autonomous(2, false))
	// One command count per agent, whatever the transport: each session is
	// opened after the previous one's commands, and starts a new turn.
	for _, open := range []func() *session{func() *session { return te.http(t, "dave") }, func() *session { return te.stdio(t, "dave") }} {
		s := open()
		s.ok(t, "sandbox_exec", map[string]any{"command": "true"})
		s.ok(t, "sandbox_list_directory", nil) // not a command (and no other subtest's files needed)
		s.ok(t, "sandbox_exec", map[string]any{"command": "true"})
		e := s.fails(t, "sandbox_exec", map[string]any{"command": "true"}, envelope.Rejected)
		if !strings.Contains(e.Message, "2 of 2 commands used this turn") {
			t.Fatal(e.Message)
		}
		s.fails(t, "sandbox_run_script", map[string]any{"path": "x.sh"}, envelope.Rejected)
	}

	te.addAgent(t, "Erin", nil)
	s := te.http(t, "erin")
	for i := range 120 {
		if e := s.call(t, "sandbox_list_directory", nil); !e.OK {
			t.Fatalf("call %d: %+v", i+1, e)
		}
	}
	e := s.fails(t, "sandbox_list_directory", nil, envelope.Rejected)
	if !strings.Contains(e.Message, "rate limit reached") {
		t.Fatal(e.Message)
	}

	// One rate window per agent, whatever the transport or process: a
	// stdio client that reconnects (a new process) gets no fresh quota.
	te.addAgent(t, "Fay", nil)
	for i, s := range []*session{te.stdio(t, "fay"), te.http(t, "fay")} {
		for j := range 60 {
			if e := s.call(t, "sandbox_list_directory", nil); !e.OK {
				t.Fatalf("%s: call %d: %+v", s.name, i*60+j+1, e)
			}
		}
	}
	again := te.stdio(t, "fay")
	if e := again.fails(t, "sandbox_list_directory", nil, envelope.Rejected); !strings.Contains(e.Message, "rate limit reached") {
		t.Fatal(e.Message)
	}
}

func outputCaps(t *testing.T, alice, bob *session) {
	for _, s := range []*session{alice, bob} {
		e := s.call(t, "sandbox_exec", map[string]any{"command": "seq 1 100000; seq 1 20000 >&2"})
		r, _ := e.Result.(map[string]any)
		out, _ := r["stdout"].(string)
		errOut, _ := r["stderr"].(string)
		if !strings.HasPrefix(out, "1\n2\n3\n") || !strings.HasSuffix(out, "99999\n100000\n") || !strings.Contains(out, "bytes omitted of 588895") || len(out) > tools.StdoutCap+100 {
			t.Errorf("%s: stdout of %d characters: %.40q ... %.40q", s.name, len(out), out, out[max(0, len(out)-40):])
		}
		if !strings.HasPrefix(errOut, "1\n2\n") || !strings.HasSuffix(errOut, "19999\n20000\n") || len(errOut) > tools.StderrCap+100 {
			t.Errorf("%s: stderr of %d characters", s.name, len(errOut))
		}
		if len(e.Warnings) != 2 {
			t.Errorf("%s: warnings %q", s.name, e.Warnings)
		}
		s.ok(t, "sandbox_write_file", map[string]any{"path": "big.txt", "content": strings.Repeat("0123456789\n", 3000)})
		r = s.ok(t, "sandbox_read_file", map[string]any{"path": "big.txt"})
		if content, _ := r["content"].(string); r["truncated"] != true || len(content) != tools.DefaultMaxChars {
			t.Errorf("%s: read cap: truncated %v, %d characters", s.name, r["truncated"], len(content))
		}
	}
}

func failures(t *testing.T, alice, bob *session) {
	for _, s := range []*session{alice, bob} {
		e := s.fails(t, "sandbox_read_file", map[string]any{"path": "../x"}, envelope.InvalidArgs)
		if e.Field != "path" || !strings.HasPrefix(e.Message, "Argument `path` rejected: traversal") {
			t.Errorf("%s: traversal: %+v", s.name, e)
		}
		e = s.fails(t, "sandbox_read_file", map[string]any{"path": "x", "colour": "red"}, envelope.InvalidArgs)
		if e.Field != "colour" {
			t.Errorf("%s: unknown argument: %+v", s.name, e)
		}
		s.fails(t, "sandbox_read_file", map[string]any{"path": "no-such-file"}, envelope.NotFound)
		e = s.fails(t, "sandbox_exec", map[string]any{"command": "echo before; sleep 30", "timeout": 2}, envelope.Timeout)
		if !strings.Contains(e.Message, "stdout: before") {
			t.Errorf("%s: timeout message: %s", s.name, e.Message)
		}
		e = s.fails(t, "sandbox_install", map[string]any{"packages": []string{"no-such-package-osaurus"}}, envelope.ExecutionError)
		if !strings.Contains(e.Message, "Unable to locate package no-such-package-osaurus") {
			t.Errorf("%s: install of a missing package: %s", s.name, e.Message)
		}
		s.fails(t, "sandbox_process", map[string]any{"action": "poll", "pid": 999999}, envelope.NotFound)
		s.fails(t, "sandbox_made_up", nil, envelope.ToolNotFound)
	}
}

func removeAgent(t *testing.T, te *toolsEnv, bob *session) {
	g := te.m.Agent()
	bob.ok(t, "sandbox_exec_background", map[string]any{"command": "exec sleep 600"})
	uid, _, _ := sh(t, g, "", "id -u agent-bob")
	tok, err := te.reg.Token("bob")
	if err != nil {
		t.Fatal(err)
	}
	// The real CLI, reaching the guest through the owner.
	cmd := exec.Command(te.bin, "agent", "remove", "bob")
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+te.home)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "stopped its processes and deleted the Linux user agent-bob") {
		t.Fatalf("agent remove: %v\n%s", err, out)
	}
	if err := te.reg.Reload(); err != nil {
		t.Fatal(err)
	}
	// The open session hears that the tools are gone, and its token no
	// longer gets it anything.
	bob.waitChanged(t)
	if _, err := bob.cs.ListTools(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("a removed agent's session lists tools: %v", err)
	}
	// Zombies (killed, not yet reaped by PID 1) run nothing: not counted.
	check := fmt.Sprintf("id agent-bob 2>&1; ps -e -o uid=,stat= | awk '$1 == %s && $2 !~ /^Z/' | wc -l; test -f /workspace/agents/bob/secret.txt && echo home kept", strings.TrimSpace(uid))
	got, _, _ := sh(t, g, "", check)
	if !strings.Contains(got, "no such user") || !strings.Contains(got, "\n0\n") || !strings.HasSuffix(got, "home kept\n") {
		t.Fatalf("after removal: %q", got)
	}
	// Purging later removes the home even though the user is gone.
	if err := tools.RemoveUser(context.Background(), g, agents.Agent{Slug: "bob"}, true); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := sh(t, g, "", "ls /workspace/agents"); strings.Contains(got, "bob") {
		t.Fatalf("purge kept the home: %q", got)
	}
	// Its token is refused from now on.
	req, _ := http.NewRequest("POST", te.url, strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d for a removed agent's token, want 401", resp.StatusCode)
	}
}
