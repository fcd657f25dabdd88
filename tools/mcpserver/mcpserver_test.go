package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// fakeGuest answers the few ops the tests use: listing a directory gives
// one entry named after the calling user, so a test can tell which agent
// a call ran as.
func fakeGuest(t *testing.T) *agentproto.Client {
	t.Helper()
	host, guest := net.Pipe()
	sp, err := agentproto.NewServerPeer(guest)
	if err != nil {
		t.Fatal(err)
	}
	m := agentproto.NewMux()
	m.Handle(agentproto.OpHello, agentproto.Unary(func(context.Context, *agentproto.HelloRequest) (*agentproto.HelloResponse, error) {
		return &agentproto.HelloResponse{Major: agentproto.VersionMajor}, nil
	}))
	m.Handle(agentproto.OpMkdir, agentproto.Unary(func(context.Context, *agentproto.PathRequest) (*agentproto.Empty, error) {
		return &agentproto.Empty{}, nil
	}))
	m.Handle(agentproto.OpExec, agentproto.Exec(func(_ context.Context, _ *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
		return agentproto.ExitStatus{Exited: true}, eio.Started(1)
	}))
	m.Handle(agentproto.OpUserAdd, agentproto.Unary(func(_ context.Context, r *agentproto.UserAddRequest) (*agentproto.UserAddResponse, error) {
		return &agentproto.UserAddResponse{Home: r.Home}, nil
	}))
	m.Handle(agentproto.OpList, agentproto.Unary(func(_ context.Context, r *agentproto.ListRequest) (*agentproto.ListResponse, error) {
		return &agentproto.ListResponse{Entries: []agentproto.FileInfo{{Path: r.User, Name: r.User, Type: "file"}}}, nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	go sp.Serve(ctx, m)
	cp, err := agentproto.NewClientPeer(host)
	if err != nil {
		t.Fatal(err)
	}
	c, err := agentproto.Handshake(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cp.Close(nil); sp.Close(nil) })
	return c
}

type fixture struct {
	reg *agents.Registry
	cfg Config
	bob agents.Agent
	tok string
}

func newFixture(t *testing.T) *fixture {
	reg, err := agents.Open(filepath.Join(t.TempDir(), "agents.json"))
	if err != nil {
		t.Fatal(err)
	}
	bob, err := reg.Add("Bob")
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := reg.Token(bob.ID)
	g := fakeGuest(t)
	env := tools.NewEnv(tools.Options{Guest: func(context.Context) (*agentproto.Client, error) { return g, nil }})
	return &fixture{reg: reg, cfg: Config{Env: env, Registry: reg, Version: "test"}, bob: bob, tok: tok}
}

func (f *fixture) set(t *testing.T, ref string, fn func(*agents.AutonomousExec)) {
	t.Helper()
	if _, err := f.reg.Update(ref, func(a *agents.Agent) error { fn(&a.AutonomousExec); return nil }); err != nil {
		t.Fatal(err)
	}
}

// changes counts tools/list_changed notifications.
type changes struct {
	mu sync.Mutex
	n  int
	ch chan struct{}
}

func newChanges() *changes { return &changes{ch: make(chan struct{}, 16)} }

func (c *changes) handler(context.Context, *mcp.ToolListChangedRequest) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	c.ch <- struct{}{}
}

func (c *changes) wait(t *testing.T) {
	t.Helper()
	select {
	case <-c.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed notification")
	}
}

func connectInMemory(t *testing.T, f *fixture, ref string, ch *changes) *mcp.ClientSession {
	t.Helper()
	s, err := NewAgentServer(f.cfg, ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	return connectClient(t, ct, ch)
}

func connectClient(t *testing.T, tr mcp.Transport, ch *changes) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if ch != nil {
		opts.ToolListChangedHandler = ch.handler
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	slices.Sort(out)
	return out
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) (envelope.Envelope, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("call %s: %d content items", name, len(res.Content))
	}
	e, err := envelope.Parse(res.Content[0].(*mcp.TextContent).Text)
	if err != nil {
		t.Fatal(err)
	}
	return e, res.IsError
}

var readOnly = []string{"sandbox_directory_tree", "sandbox_file_info", "sandbox_find_files", "sandbox_list_directory", "sandbox_read_file",
	"sandbox_read_multiple_files", "sandbox_search_files"}

func TestToolsFollowSettingsAndAreAnnounced(t *testing.T) {
	f := newFixture(t)
	ch := newChanges()
	cs := connectInMemory(t, f, "bob", ch)
	if got := listNames(t, cs); !slices.Equal(got, readOnly) {
		t.Fatalf("tools of a new agent: %v", got)
	}

	f.set(t, "bob", func(ae *agents.AutonomousExec) { ae.Enabled = true })
	ch.wait(t)
	// Background processes follow autonomous exec by default.
	got := listNames(t, cs)
	if len(got) != 19 || !slices.Contains(got, "sandbox_exec") || !slices.Contains(got, "sandbox_exec_background") || !slices.Contains(got, "sandbox_process") {
		t.Fatalf("with autonomous exec: %v", got)
	}
	// The setting still turns them off.
	f.set(t, "bob", func(ae *agents.AutonomousExec) { ae.BackgroundProcesses = false })
	ch.wait(t)
	if got := listNames(t, cs); len(got) != 17 || slices.Contains(got, "sandbox_exec_background") || slices.Contains(got, "sandbox_process") {
		t.Fatalf("with background processes off: %v", got)
	}
	f.set(t, "bob", func(ae *agents.AutonomousExec) { ae.BackgroundProcesses = true })
	ch.wait(t)
	f.set(t, "bob", func(ae *agents.AutonomousExec) { ae.Enabled = false })
	ch.wait(t)
	if got := listNames(t, cs); !slices.Equal(got, readOnly) {
		t.Fatalf("after turning it off: %v", got)
	}
	// A tool that is no longer listed answers with an envelope saying why.
	e, isErr := callTool(t, cs, "sandbox_exec", map[string]any{"command": "id"})
	if !isErr || e.Kind != envelope.ToolNotFound || !strings.Contains(e.Message, "it needs autonomous exec, which is off") {
		t.Fatalf("a delisted tool: %+v (IsError %v)", e, isErr)
	}
	e, _ = callTool(t, cs, "rm_rf", nil)
	if e.Kind != envelope.ToolNotFound || !strings.Contains(e.Message, "sandbox_read_file") {
		t.Fatalf("an unknown tool: %+v", e)
	}

	// A change made by another process arrives through Reload.
	other, err := agents.Open(f.reg.Path())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Update("bob", func(a *agents.Agent) error { a.AutonomousExec.Enabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := f.reg.Reload(); err != nil {
		t.Fatal(err)
	}
	ch.wait(t)
	if got := listNames(t, cs); len(got) != 19 {
		t.Fatalf("after another process's change: %v", got)
	}
}

func TestToolMetadata(t *testing.T) {
	f := newFixture(t)
	f.set(t, "bob", func(ae *agents.AutonomousExec) { ae.Enabled, ae.BackgroundProcesses = true, true })
	cs := connectInMemory(t, f, "bob", nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		schema := tl.InputSchema.(map[string]any)
		if schema["type"] != "object" || schema["additionalProperties"] != false {
			t.Errorf("%s: schema %v", tl.Name, schema)
		}
		a := tl.Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Fatalf("%s: annotations %+v", tl.Name, a)
		}
		if a.ReadOnlyHint != slices.Contains(readOnly, tl.Name) {
			t.Errorf("%s: readOnlyHint %v", tl.Name, a.ReadOnlyHint)
		}
		if (tl.Name == "sandbox_delete" || tl.Name == "sandbox_write_file") && !*a.DestructiveHint {
			t.Errorf("%s is not marked destructive", tl.Name)
		}
	}
}

func TestCallResults(t *testing.T) {
	f := newFixture(t)
	cs := connectInMemory(t, f, "bob", nil)
	e, isErr := callTool(t, cs, "sandbox_list_directory", map[string]any{})
	if !e.OK || isErr {
		t.Fatalf("list: %+v (IsError %v)", e, isErr)
	}
	entries := e.Result.(map[string]any)["entries"].([]any)
	if entries[0].(map[string]any)["name"] != "agent-bob" {
		t.Fatalf("ran as %v, want agent-bob", entries[0])
	}
	e, isErr = callTool(t, cs, "sandbox_read_file", map[string]any{"path": "../alice/x"})
	if e.OK || !isErr || e.Kind != envelope.InvalidArgs || e.Field != "path" {
		t.Fatalf("traversal: %+v (IsError %v)", e, isErr)
	}
}

func TestRemovedAgentLosesItsTools(t *testing.T) {
	f := newFixture(t)
	ch := newChanges()
	cs := connectInMemory(t, f, "bob", ch)
	if _, err := f.reg.Remove("bob"); err != nil {
		t.Fatal(err)
	}
	ch.wait(t)
	if got := listNames(t, cs); len(got) != 0 {
		t.Fatalf("tools of a removed agent: %v", got)
	}
}

// bearerTransport adds a token to every request.
type bearerTransport struct{ tok string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

func serveHTTP(t *testing.T, f *fixture) string {
	t.Helper()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := NewHTTPHandler(f.cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		h.Close()
	})
	return "http://" + ln.Addr().String() + Path
}

func TestHTTPTokensPickTheAgent(t *testing.T) {
	f := newFixture(t)
	alice, err := f.reg.Add("Alice")
	if err != nil {
		t.Fatal(err)
	}
	aliceTok, _ := f.reg.Token(alice.ID)
	f.set(t, "alice", func(ae *agents.AutonomousExec) { ae.Enabled = true })
	url := serveHTTP(t, f)

	for _, tt := range []struct {
		name, tok, user string
		tools           int
	}{{"bob", f.tok, "agent-bob", 7}, {"alice", aliceTok, "agent-alice", 19}} {
		t.Run(tt.name, func(t *testing.T) {
			cs := connectClient(t, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{tt.tok}}}, nil)
			if got := listNames(t, cs); len(got) != tt.tools {
				t.Fatalf("%d tools: %v", len(got), got)
			}
			e, _ := callTool(t, cs, "sandbox_list_directory", nil)
			if name := e.Result.(map[string]any)["entries"].([]any)[0].(map[string]any)["name"]; name != tt.user {
				t.Fatalf("ran as %v, want %s", name, tt.user)
			}
		})
	}
}

func TestHTTPRefusals(t *testing.T) {
	f := newFixture(t)
	url := serveHTTP(t, f)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	post := func(url, auth, session string) *http.Response {
		req, _ := http.NewRequest("POST", url, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tt := range []struct {
		name, auth string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "Bearer " + strings.Repeat("0", 64), http.StatusUnauthorized},
		{"not bearer", "Basic " + f.tok, http.StatusUnauthorized},
		{"empty bearer", "Bearer ", http.StatusUnauthorized},
		{"good token", "Bearer " + f.tok, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(url, tt.auth, "")
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
			if tt.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("no WWW-Authenticate challenge: %v", resp.Header)
			}
		})
	}
	if resp := post(strings.TrimSuffix(url, Path)+"/other", "Bearer "+f.tok, ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("other path: %d", resp.StatusCode)
	}

	// Bob's session can't be used with Alice's token.
	resp := post(url, "Bearer "+f.tok, "")
	session := resp.Header.Get("Mcp-Session-Id")
	alice, _ := f.reg.Add("Alice")
	aliceTok, _ := f.reg.Token(alice.ID)
	if resp := post(url, "Bearer "+aliceTok, session); resp.StatusCode == http.StatusOK {
		t.Fatalf("bob's session %q accepted alice's token", session)
	}

	// A removed agent's token stops working at once.
	if _, err := f.reg.Remove("bob"); err != nil {
		t.Fatal(err)
	}
	if resp := post(url, "Bearer "+f.tok, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("removed agent's token: %d", resp.StatusCode)
	}
}

func TestListenOnlyOnLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "localhost:0", "[::]:0"} {
		if ln, err := Listen(addr); !errors.Is(err, ErrNotLoopback) {
			if ln != nil {
				ln.Close()
			}
			t.Errorf("Listen(%q) = %v, want ErrNotLoopback", addr, err)
		}
	}
	if DefaultAddr != "127.0.0.1:47821" {
		t.Fatalf("DefaultAddr changed to %s; the README and the app's snippets name it", DefaultAddr)
	}
}

func TestStdioServesOverStreams(t *testing.T) {
	f := newFixture(t)
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeStdio(ctx, f.cfg, "Bob", st) }()
	cs := connectClient(t, ct, nil)
	if got := listNames(t, cs); !slices.Equal(got, readOnly) {
		t.Fatalf("tools %v", got)
	}
	cs.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	if err := ServeStdio(context.Background(), f.cfg, "nobody", st); !errors.Is(err, agents.ErrNotFound) {
		t.Fatalf("unknown agent: %v", err)
	}
}

func TestSnippets(t *testing.T) {
	c := Client{Exe: "/opt/osaurus sandbox/osaurus-sandbox", Agent: agents.Agent{Slug: "bob"}, Token: "abc123"}
	var desktop map[string]map[string]struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	if err := json.Unmarshal([]byte(c.ClaudeDesktop()), &desktop); err != nil {
		t.Fatal(err)
	}
	srv := desktop["mcpServers"]["osaurus-sandbox-bob"]
	if srv.Command != c.Exe || !slices.Equal(srv.Args, []string{"mcp", "--agent", "bob"}) {
		t.Fatalf("desktop config %s", c.ClaudeDesktop())
	}
	if got, want := c.ClaudeCodeStdio(), "claude mcp add --scope user osaurus-sandbox-bob -- '/opt/osaurus sandbox/osaurus-sandbox' mcp --agent bob"; got != want {
		t.Fatalf("stdio: %s\nwant   %s", got, want)
	}
	if got, want := c.ClaudeCodeHTTP(), "claude mcp add --scope user --transport http osaurus-sandbox-bob http://127.0.0.1:47821/mcp --header 'Authorization: Bearer abc123'"; got != want {
		t.Fatalf("http: %s\nwant %s", got, want)
	}
}

// A context puts --context NAME before mcp in every stdio form, so the
// client keeps reaching that sandbox; without one the forms are as before.
func TestSnippetsNameTheContext(t *testing.T) {
	for _, tt := range []struct {
		ctx   string
		args  []string
		stdio string
	}{
		{"", []string{"mcp", "--agent", "bob"}, "claude mcp add --scope user osaurus-sandbox-bob -- /bin/osaurus-sandbox mcp --agent bob"},
		{"box", []string{"--context", "box", "mcp", "--agent", "bob"}, "claude mcp add --scope user osaurus-sandbox-bob -- /bin/osaurus-sandbox --context box mcp --agent bob"},
		{"lab.2", []string{"--context", "lab.2", "mcp", "--agent", "bob"}, "claude mcp add --scope user osaurus-sandbox-bob -- /bin/osaurus-sandbox --context lab.2 mcp --agent bob"},
	} {
		c := Client{Exe: "/bin/osaurus-sandbox", Agent: agents.Agent{Slug: "bob"}, Context: tt.ctx}
		var desktop map[string]map[string]struct {
			Args []string `json:"args"`
		}
		if err := json.Unmarshal([]byte(c.ClaudeDesktop()), &desktop); err != nil {
			t.Fatal(err)
		}
		if got := desktop["mcpServers"]["osaurus-sandbox-bob"].Args; !slices.Equal(got, tt.args) || !slices.Equal(c.Args(), tt.args) {
			t.Errorf("context %q: desktop args %q, Args %q, want %q", tt.ctx, got, c.Args(), tt.args)
		}
		if got := c.ClaudeCodeStdio(); got != tt.stdio {
			t.Errorf("context %q: stdio %s\nwant %s", tt.ctx, got, tt.stdio)
		}
	}
}

// turnRecorder is a tools.Invoker that records turn ends and tool calls in order.
type turnRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *turnRecorder) RunTool(_ context.Context, _ agents.Agent, name string, _ json.RawMessage) envelope.Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "run")
	return envelope.OK(name, map[string]any{})
}

func (r *turnRecorder) EndTurn(_ context.Context, agentID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "end "+agentID)
}

func (r *turnRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

// A new session starts a new turn before its first tool call, whatever the
// transport and whichever protocol the client speaks: the 2025 handshake
// (initialize, initialized) or the stateless one (server/discover, or
// nothing at all).
func TestNewSessionEndsTurn(t *testing.T) {
	for _, tc := range []struct {
		name, transport, version string
	}{
		{"stdio stateless", "stdio", ""},
		{"stdio 2025-11-25", "stdio", "2025-11-25"},
		{"stdio 2025-06-18", "stdio", "2025-06-18"},
		{"http stateless", "http", ""},
		{"http 2025-11-25", "http", "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.set(t, "Bob", func(ae *agents.AutonomousExec) { ae.Enabled = true })
			rec := &turnRecorder{}
			f.cfg.Invoker = rec
			var url string
			if tc.transport == "http" {
				url = serveHTTP(t, f)
			}
			connect := func() *mcp.ClientSession {
				var tr mcp.Transport
				if tc.transport == "http" {
					tr = &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{f.tok}}}
				} else {
					st, ct := mcp.NewInMemoryTransports()
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan error, 1)
					go func() { done <- ServeStdio(ctx, f.cfg, "Bob", st) }()
					t.Cleanup(func() { cancel(); <-done })
					tr = ct
				}
				c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil)
				cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: tc.version})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cs.Close() })
				return cs
			}
			want := []string{"end " + f.bob.ID, "run", "run"}
			for i := range 2 {
				cs := connect()
				callTool(t, cs, "sandbox_exec", map[string]any{"command": "true"})
				callTool(t, cs, "sandbox_exec", map[string]any{"command": "true"})
				if got := rec.take(); !slices.Equal(got, want) {
					t.Fatalf("session %d: %q, want %q", i+1, got, want)
				}
			}
		})
	}
}
