package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

var (
	readOnlyTools = []string{"sandbox_read_file", "sandbox_list_directory", "sandbox_search_files", "sandbox_find_files",
		"sandbox_file_info", "sandbox_read_multiple_files", "sandbox_directory_tree"}
	execTools = []string{"sandbox_write_file", "sandbox_edit_file", "sandbox_move", "sandbox_delete", "sandbox_exec",
		"sandbox_install", "sandbox_pip_install", "sandbox_npm_install", "sandbox_run_script", "sandbox_share_artifact"}
	backgroundTools = []string{"sandbox_exec_background", "sandbox_process"}
)

func names(specs []Spec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

func sorted(lists ...[]string) []string {
	out := slices.Concat(lists...)
	slices.Sort(out)
	return out
}

func TestListFollowsAutonomousExec(t *testing.T) {
	env := NewEnv(Options{})
	tests := []struct {
		name                string
		enabled, background bool
		want                []string
	}{
		{"read-only by default", false, false, sorted(readOnlyTools)},
		{"background alone grants nothing", false, true, sorted(readOnlyTools)},
		{"autonomous exec", true, false, sorted(readOnlyTools, execTools)},
		{"with background processes", true, true, sorted(readOnlyTools, execTools, backgroundTools)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := names(env.Toolset(testAgent("bob", tt.enabled, tt.background)).List())
			if !slices.Equal(got, tt.want) {
				t.Fatalf("tools = %v\nwant    %v", got, tt.want)
			}
		})
	}
	if got := sorted(Names()); !slices.Equal(got, sorted(readOnlyTools, execTools, backgroundTools, []string{"sandbox_plugin_register", "sandbox_secret_check", "sandbox_secret_set", "sandbox_request_review", "sandbox_expose_port", "sandbox_checkpoint"})) {
		t.Fatalf("Names() = %v", got)
	}
}

func TestSchemasAndAnnotations(t *testing.T) {
	for _, s := range NewEnv(Options{}).Toolset(testAgent("bob", true, true)).List() {
		t.Run(s.Name, func(t *testing.T) {
			if s.InputSchema["type"] != "object" || s.InputSchema["additionalProperties"] != false {
				t.Fatalf("schema %v lacks type object / additionalProperties false", s.InputSchema)
			}
			props := s.InputSchema["properties"].(map[string]any)
			for _, r := range s.InputSchema["required"].([]string) {
				if props[r] == nil {
					t.Errorf("required %q is not a property", r)
				}
			}
			for name, p := range props {
				if p.(map[string]any)["description"] == "" {
					t.Errorf("property %s has no description", name)
				}
			}
			readOnly := slices.Contains(readOnlyTools, s.Name)
			if s.ReadOnly != readOnly {
				t.Errorf("ReadOnly = %v, want %v", s.ReadOnly, readOnly)
			}
			if !readOnly && s.Name != "sandbox_install" && s.Name != "sandbox_pip_install" && s.Name != "sandbox_npm_install" && !s.Destructive {
				t.Errorf("a tool that changes or deletes files must be marked destructive")
			}
			if s.Description == "" {
				t.Error("no description")
			}
		})
	}
}

func TestGatedToolsAreNotFoundAndTouchNothing(t *testing.T) {
	h := newHarness(t)
	for _, tt := range []struct {
		enabled, background bool
		tool                string
	}{
		{false, false, "sandbox_exec"},
		{false, false, "sandbox_write_file"},
		{false, true, "sandbox_install"},
		{true, false, "sandbox_exec_background"},
		{true, false, "sandbox_process"},
	} {
		h.ts = h.env.Toolset(testAgent("bob", tt.enabled, tt.background))
		e := h.call(tt.tool, map[string]any{"command": "id"})
		failed(t, e, envelope.ToolNotFound, "")
		if !strings.Contains(e.Message, "osaurus-sandbox agent set bob") {
			t.Errorf("%s: message doesn't say how to enable it: %s", tt.tool, e.Message)
		}
	}
	failed(t, h.call("sandbox_nope", nil), envelope.ToolNotFound, "")
	if ops := h.guest.ops(); len(ops) != 0 {
		t.Fatalf("gated calls reached the guest: %v", ops)
	}
}

func TestArgumentErrors(t *testing.T) {
	tests := []struct {
		name, tool, args string
		field            string
		msg              string
	}{
		{"unknown argument", "sandbox_read_file", `{"path":"a","lines":3}`, "lines", "unknown argument `lines`; this tool takes: line_count, max_chars, path, start_line, tail_lines"},
		{"wrong type", "sandbox_read_file", `{"path":"a","start_line":"3"}`, "start_line", "argument `start_line` must be an integer of at least 1, got a JSON string"},
		{"missing required", "sandbox_read_file", `{}`, "path", "missing required argument `path`"},
		{"null required", "sandbox_exec", `{"command":null}`, "command", "missing required argument `command`"},
		{"not an object", "sandbox_read_file", `["a"]`, "", "the arguments must be a JSON object"},
		{"trailing data", "sandbox_read_file", `{"path":"a"} {}`, "", "the arguments have data after the JSON object"},
		{"negative", "sandbox_read_file", `{"path":"a","tail_lines":-1}`, "tail_lines", "argument `tail_lines` must be positive, got -1"},
		{"tail with start", "sandbox_read_file", `{"path":"a","tail_lines":5,"start_line":2}`, "tail_lines", "tail_lines can't be combined"},
		{"negative timeout", "sandbox_exec", `{"command":"true","timeout":-5}`, "timeout", "argument `timeout` must not be negative"},
		{"empty command", "sandbox_exec", `{"command":"  "}`, "command", "command is empty"},
		{"bad action", "sandbox_process", `{"action":"stop","pid":42}`, "action", `action "stop" is not one of poll, wait, kill`},
		{"bad package", "sandbox_install", `{"packages":["-oAPT::x=1"]}`, "packages", `"-oAPT::x=1" is not a valid package name`},
		{"shell in package", "sandbox_pip_install", `{"packages":["requests; rm -rf ~"]}`, "packages", "is not a valid package name"},
		{"no packages", "sandbox_npm_install", `{"packages":[]}`, "packages", "packages is empty"},
		{"empty old_string", "sandbox_edit_file", `{"path":"a","old_string":"","new_string":"x"}`, "old_string", "old_string is empty"},
		{"slash in find glob", "sandbox_find_files", `{"pattern":"src/*.go"}`, "pattern", "contains a slash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			e := h.call(tt.tool, tt.args)
			failed(t, e, envelope.InvalidArgs, tt.field)
			if !strings.Contains(e.Message, tt.msg) {
				t.Fatalf("message %q\nlacks %q", e.Message, tt.msg)
			}
			for _, op := range h.guest.ops() {
				if op != agentproto.OpUserAdd && op != agentproto.OpMkdir && op != agentproto.OpExec {
					t.Fatalf("invalid arguments reached the guest as %s", op)
				}
			}
		})
	}
}

func TestPathRejections(t *testing.T) {
	tests := []struct {
		tool   string
		args   map[string]any
		field  string
		reason string
	}{
		{"sandbox_read_file", map[string]any{"path": "../alice/notes.txt"}, "path", "traversal"},
		{"sandbox_read_file", map[string]any{"path": "/workspace/agents/bob-evil/x"}, "path", "outside_allowed_roots"},
		{"sandbox_read_file", map[string]any{"path": "/etc/passwd"}, "path", "outside_allowed_roots"},
		{"sandbox_list_directory", map[string]any{"path": "~alice"}, "path", "outside_allowed_roots"},
		{"sandbox_write_file", map[string]any{"path": "a;b", "content": "x"}, "path", "dangerous_character"},
		{"sandbox_move", map[string]any{"source": "a", "destination": "/tmp/a"}, "destination", "outside_allowed_roots"},
		{"sandbox_exec", map[string]any{"command": "ls", "cwd": "/"}, "cwd", "outside_allowed_roots"},
		{"sandbox_search_files", map[string]any{"pattern": "x", "path": "a\x00b"}, "path", "null_byte"},
		{"sandbox_run_script", map[string]any{"path": ""}, "path", "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.reason, func(t *testing.T) {
			h := newHarness(t)
			e := h.call(tt.tool, tt.args)
			failed(t, e, envelope.InvalidArgs, tt.field)
			if !strings.Contains(e.Message, "Argument `"+tt.field+"` rejected: "+tt.reason) {
				t.Fatalf("message %q does not give the reason %s", e.Message, tt.reason)
			}
			if !strings.Contains(e.Expected, "/workspace/agents/bob") || !strings.Contains(e.Expected, "/workspace/shared") {
				t.Fatalf("expected %q does not name the allowed roots", e.Expected)
			}
		})
	}
}

func TestUsersAreCreatedOnFirstUse(t *testing.T) {
	h := newHarness(t)
	h.guest.put("/workspace/agents/bob/a.txt", "hi")
	ok(t, h.call("sandbox_read_file", map[string]any{"path": "a.txt"}))
	ok(t, h.call("sandbox_read_file", map[string]any{"path": "a.txt"}))
	want := []string{agentproto.OpMkdir, agentproto.OpExec, agentproto.OpUserAdd, agentproto.OpReadFile, agentproto.OpReadFile}
	if got := h.guest.ops(); !slices.Equal(got, want) {
		t.Fatalf("ops = %v, want %v", got, want)
	}
	mk := h.guest.last(t, agentproto.OpMkdir).(agentproto.PathRequest)
	if mk.Path != "/workspace/shared" || mk.Mode != 0o1777 || mk.User != "" {
		t.Fatalf("shared dir request %+v, want /workspace/shared 1777 as root", mk)
	}
	chmod := h.guest.last(t, agentproto.OpExec).(agentproto.ExecRequest)
	if !slices.Equal(chmod.Argv, []string{"chmod", "1777", "/workspace/shared"}) || chmod.User != "" {
		t.Fatalf("chmod request %+v", chmod)
	}
	ua := h.guest.last(t, agentproto.OpUserAdd).(agentproto.UserAddRequest)
	if ua.Name != "agent-bob" || ua.Home != "/workspace/agents/bob" || ua.HomeMode != 0o700 {
		t.Fatalf("user add %+v", ua)
	}

	// Another agent gets its own user; the shared dir is done.
	h.guest.reset()
	alice := h.env.Toolset(testAgent("alice", false, false))
	alice.Call(context.Background(), "sandbox_list_directory", nil)
	if got := h.guest.ops(); !slices.Equal(got, []string{agentproto.OpUserAdd, agentproto.OpList}) {
		t.Fatalf("alice's first call: %v", got)
	}

	// A new guest session (the VM restarted) starts over.
	f2 := newFakeGuest()
	c2 := f2.connect(t)
	env := h.env
	env.guest = func(context.Context) (*agentproto.Client, error) { return c2, nil }
	alice.Call(context.Background(), "sandbox_list_directory", nil)
	if got := f2.ops(); !slices.Equal(got, []string{agentproto.OpMkdir, agentproto.OpExec, agentproto.OpUserAdd, agentproto.OpList}) {
		t.Fatalf("after a restart: %v", got)
	}
}

func TestEveryToolRunsAsTheAgentBeneathItsRoot(t *testing.T) {
	h := newHarness(t)
	h.guest.put("/workspace/agents/bob/s.py", "print(1)\n")
	h.guest.put("/workspace/agents/bob/f.txt", "one\n")
	h.guest.put("/workspace/shared/g.txt", "two\n")
	h.guest.wait[4242] = agentproto.ExitStatus{}
	h.call("sandbox_list_directory", nil) // creates the user first
	calls := []struct {
		tool string
		args map[string]any
		root string
	}{
		{"sandbox_read_file", map[string]any{"path": "/workspace/shared/g.txt"}, "/workspace/shared"},
		{"sandbox_list_directory", map[string]any{"path": "~"}, "/workspace/agents/bob"},
		{"sandbox_search_files", map[string]any{"pattern": "x", "path": "/workspace/shared"}, "/workspace/shared"},
		{"sandbox_find_files", map[string]any{"pattern": "x"}, "/workspace/agents/bob"},
		{"sandbox_write_file", map[string]any{"path": "/workspace/shared/n.txt", "content": "x"}, "/workspace/shared"},
		{"sandbox_edit_file", map[string]any{"path": "f.txt", "old_string": "one", "new_string": "1"}, "/workspace/agents/bob"},
		{"sandbox_move", map[string]any{"source": "f.txt", "destination": "/workspace/shared/f.txt"}, "/workspace"},
		{"sandbox_delete", map[string]any{"path": "/workspace/shared/f.txt"}, "/workspace/shared"},
		{"sandbox_exec", map[string]any{"command": "id", "cwd": "/workspace/shared"}, "/workspace/shared"},
		{"sandbox_exec_background", map[string]any{"command": "sleep 9"}, "/workspace/agents/bob"},
		{"sandbox_process", map[string]any{"action": "poll", "pid": 4242}, ""},
		{"sandbox_pip_install", map[string]any{"packages": []string{"requests"}}, "/workspace/agents/bob"},
		{"sandbox_npm_install", map[string]any{"packages": []string{"left-pad"}}, "/workspace/agents/bob"},
		{"sandbox_run_script", map[string]any{"path": "s.py"}, "/workspace/agents/bob"},
	}
	for _, c := range calls {
		h.guest.reset()
		h.call(c.tool, c.args)
		h.guest.mu.Lock()
		reqs := h.guest.reqs
		h.guest.mu.Unlock()
		if len(reqs) == 0 {
			t.Fatalf("%s sent nothing", c.tool)
		}
		for _, r := range reqs {
			id := identityOf(r.req)
			if id.User != "agent-bob" {
				t.Errorf("%s: %s ran as %q, want agent-bob", c.tool, r.op, id.User)
			}
			if id.Root != c.root && !(r.op == agentproto.OpReadFile || r.op == agentproto.OpMove || r.op == agentproto.OpStat) {
				t.Errorf("%s: %s has root %q, want %q", c.tool, r.op, id.Root, c.root)
			}
			if r.op == agentproto.OpExec || r.op == agentproto.OpStartBg {
				if env := execOf(r.req).Env; !slices.Contains(env, "PATH=/workspace/agents/bob/.venv/bin:/workspace/agents/bob/.npm-global/bin:"+basePath) {
					t.Errorf("%s: env %v lacks the agent's PATH", c.tool, env)
				}
			}
		}
	}

	// Installing system packages is the one thing done as root, with
	// nothing of the agent's in its environment.
	h.guest.reset()
	h.guest.put("/var/lib/apt/lists/deb_bookworm_main_binary-amd64_Packages", "")
	ok(t, h.call("sandbox_install", map[string]any{"packages": []string{"jq"}}))
	for _, r := range h.guest.all(agentproto.OpExec) {
		req := r.(agentproto.ExecRequest)
		if req.User != "" || req.Root != "" {
			t.Errorf("install ran as %+v, want root", req.Identity)
		}
		if !slices.Equal(req.Env, []string{"DEBIAN_FRONTEND=noninteractive"}) {
			t.Errorf("install env %v", req.Env)
		}
	}
}

func identityOf(req any) agentproto.Identity {
	switch r := req.(type) {
	case agentproto.ExecRequest:
		return r.Identity
	case agentproto.StartBackgroundRequest:
		return r.Identity
	case agentproto.ReadFileRequest:
		return r.Identity
	case agentproto.WriteFileRequest:
		return r.Identity
	case agentproto.PathRequest:
		return r.Identity
	case agentproto.ListRequest:
		return r.Identity
	case agentproto.MoveRequest:
		return r.Identity
	case agentproto.SignalRequest:
		return r.Identity
	case agentproto.WaitRequest:
		return r.Identity
	}
	return agentproto.Identity{User: fmt.Sprintf("<%T>", req)}
}

func execOf(req any) agentproto.ExecRequest {
	if r, ok := req.(agentproto.StartBackgroundRequest); ok {
		return r.ExecRequest
	}
	return req.(agentproto.ExecRequest)
}

func TestGuestErrorsBecomeEnvelopes(t *testing.T) {
	tests := []struct {
		name string
		err  error
		kind envelope.Kind
		msg  string
	}{
		{"symlink escape", fmt.Errorf("%w: openat link/passwd", agentproto.ErrEscape), envelope.Rejected, "through a symbolic link"},
		{"permission", fmt.Errorf("%w: open x", agentproto.ErrPermission), envelope.Rejected, "permission denied"},
		{"not found", notFound("/workspace/agents/bob/x"), envelope.NotFound, "no such file"},
		{"invalid", fmt.Errorf("%w: bad", agentproto.ErrInvalid), envelope.InvalidArgs, "bad"},
		{"io error", errors.New("input/output error"), envelope.ExecutionError, "input/output error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.guest.fail[agentproto.OpReadFile] = tt.err
			e := h.call("sandbox_read_file", map[string]any{"path": "x"})
			failed(t, e, tt.kind, "")
			if !strings.Contains(e.Message, tt.msg) {
				t.Fatalf("message %q lacks %q", e.Message, tt.msg)
			}
		})
	}

	t.Run("no VM", func(t *testing.T) {
		env := NewEnv(Options{Guest: func(context.Context) (*agentproto.Client, error) {
			return nil, errors.New("the sandbox VM is not running")
		}})
		e, _ := envelope.Parse(env.Toolset(testAgent("bob", false, false)).Call(context.Background(), "sandbox_list_directory", nil))
		failed(t, e, envelope.Unavailable, "")
	})
	t.Run("VM went away", func(t *testing.T) {
		h := newHarness(t)
		h.call("sandbox_list_directory", nil) // user created
		c, _ := h.env.guest(context.Background())
		c.Peer.Close(errors.New("the VM died"))
		failed(t, h.call("sandbox_list_directory", nil), envelope.Unavailable, "")
	})
	t.Run("user creation fails", func(t *testing.T) {
		h := newHarness(t)
		h.guest.fail[agentproto.OpUserAdd] = fmt.Errorf("%w: user agent-bob exists with home /x", agentproto.ErrExists)
		e := h.call("sandbox_list_directory", nil)
		failed(t, e, envelope.ExecutionError, "")
		if !strings.Contains(e.Message, "could not create the Linux user agent-bob") {
			t.Fatal(e.Message)
		}
	})
}

func TestLimiters(t *testing.T) {
	t.Run("exec limiter counts commands per turn", func(t *testing.T) {
		h := newHarness(t)
		a := testAgent("bob", true, false)
		a.AutonomousExec.MaxCommandsPerTurn = 2
		h.ts = h.env.Toolset(a)
		ok(t, h.call("sandbox_exec", map[string]any{"command": "true"}))
		h.guest.put("/workspace/shared/x", "x")
		ok(t, h.call("sandbox_read_file", map[string]any{"path": "/workspace/shared/x"})) // not a command
		h.guest.put("/workspace/agents/bob/s.sh", "echo\n")
		ok(t, h.call("sandbox_run_script", map[string]any{"path": "s.sh"}))
		h.guest.reset()
		e := h.call("sandbox_exec", map[string]any{"command": "true"})
		failed(t, e, envelope.Rejected, "")
		if !strings.Contains(e.Message, "2 of 2 commands used this turn") {
			t.Fatal(e.Message)
		}
		if ops := h.guest.ops(); len(ops) != 0 {
			t.Fatalf("a refused command reached the guest: %v", ops)
		}
		h.env.ExecLimiter().EndTurn(a.ID)
		ok(t, h.call("sandbox_exec", map[string]any{"command": "true"}))
	})
	t.Run("rate limiter per service", func(t *testing.T) {
		h := newHarness(t, func(o *Options) { o.RateLimits = map[string]int{serviceRead: 2} })
		h.guest.put("/workspace/agents/bob/a", "x")
		for range 2 {
			ok(t, h.call("sandbox_read_file", map[string]any{"path": "a"}))
		}
		e := h.call("sandbox_list_directory", nil)
		failed(t, e, envelope.Rejected, "")
		if !strings.Contains(e.Message, "rate limit reached for "+serviceRead) {
			t.Fatal(e.Message)
		}
		ok(t, h.call("sandbox_exec", map[string]any{"command": "true"})) // another service
	})
	t.Run("invalid arguments spend no quota", func(t *testing.T) {
		h := newHarness(t)
		a := testAgent("bob", true, false)
		a.AutonomousExec.MaxCommandsPerTurn = 1
		h.ts = h.env.Toolset(a)
		for range 3 {
			failed(t, h.call("sandbox_exec", map[string]any{"command": ""}), envelope.InvalidArgs, "command")
		}
		ok(t, h.call("sandbox_exec", map[string]any{"command": "true"}))
	})
}

type upper struct{}

func (upper) Redact(agentID, s string) string {
	return strings.ReplaceAll(s, "hunter22", "[REDACTED:PASSWORD]")
}

func TestRedactorScrubsResultsAndWarnings(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Redactor = upper{} })
	h.guest.exec = printer("the password is hunter22\n", "", agentproto.ExitStatus{})
	r := ok(t, h.call("sandbox_exec", map[string]any{"command": "cat secret"}))
	if r["stdout"] != "the password is [REDACTED:PASSWORD]\n" {
		t.Fatalf("stdout %q", r["stdout"])
	}
}

func TestInstallsAreSerialisedAcrossAgents(t *testing.T) {
	h := newHarness(t)
	h.guest.put("/var/lib/apt/lists/x_Packages", "")
	var mu sync.Mutex
	running, most := 0, 0
	h.guest.exec = func(req *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		for range 1000 {
			eio.Stdout.Write([]byte("."))
		}
		mu.Lock()
		running--
		mu.Unlock()
		return agentproto.ExitStatus{Exited: true}, nil
	}
	var wg sync.WaitGroup
	for _, slug := range []string{"a1", "a2", "a3", "a4"} {
		ts := h.env.Toolset(testAgent(slug, true, false))
		ts.Call(context.Background(), "sandbox_list_directory", nil) // users first
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, _ := envelope.Parse(ts.Call(context.Background(), "sandbox_install", []byte(`{"packages":["jq"]}`)))
			if !e.OK {
				t.Errorf("%s: %s", slug, e.Message)
			}
		}()
	}
	wg.Wait()
	if most != 1 {
		t.Fatalf("%d installs ran at once, want 1", most)
	}
}

func TestLostUserIsCreatedAgain(t *testing.T) {
	h := newHarness(t)
	h.guest.put("/workspace/agents/bob/a", "x")
	ok(t, h.call("sandbox_read_file", map[string]any{"path": "a"}))
	h.guest.reset()
	h.guest.fail[agentproto.OpReadFile] = fmt.Errorf("%w: agent-bob", agentproto.ErrNoSuchUser)
	failed(t, h.call("sandbox_read_file", map[string]any{"path": "a"}), envelope.ExecutionError, "")
	want := []string{agentproto.OpReadFile, agentproto.OpUserAdd, agentproto.OpReadFile}
	if got := h.guest.ops(); !slices.Equal(got, want) {
		t.Fatalf("ops %v, want %v", got, want)
	}
}

func TestRelayedUnavailableIsUnavailable(t *testing.T) {
	h := newHarness(t)
	h.call("sandbox_list_directory", nil)
	h.guest.fail[agentproto.OpList] = fmt.Errorf("%w: the sandbox VM is not running; start it first", agentproto.ErrUnavailable)
	failed(t, h.call("sandbox_list_directory", nil), envelope.Unavailable, "")
}

func TestFirstUseWithoutAVM(t *testing.T) {
	h := newHarness(t)
	c, _ := h.env.guest(context.Background())
	c.Peer.Close(errors.New("the VM died"))
	failed(t, h.call("sandbox_list_directory", nil), envelope.Unavailable, "")
}
