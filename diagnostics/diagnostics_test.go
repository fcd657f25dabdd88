package diagnostics

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// fakeGuest answers exec with a canned reply per script prefix.
func fakeGuest(t *testing.T, reply func(script string) (string, int)) *agentproto.Client {
	t.Helper()
	a, b := net.Pipe()
	srv, _ := agentproto.NewServerPeer(b)
	m := agentproto.NewMux()
	m.Handle(agentproto.OpHello, agentproto.Unary(func(context.Context, *agentproto.HelloRequest) (*agentproto.HelloResponse, error) {
		return &agentproto.HelloResponse{Major: agentproto.VersionMajor}, nil
	}))
	m.Handle(agentproto.OpExec, agentproto.Exec(func(ctx context.Context, req *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
		eio.Started(1)
		out, code := reply(req.Shell)
		if out == "hang" {
			<-ctx.Done()
			return agentproto.ExitStatus{}, ctx.Err()
		}
		eio.Stdout.Write([]byte(out))
		return agentproto.ExitStatus{Exited: true, Code: code}, nil
	}))
	m.Handle(agentproto.OpUserAdd, agentproto.Unary(func(context.Context, *agentproto.UserAddRequest) (*agentproto.UserAddResponse, error) {
		return &agentproto.UserAddResponse{UID: 2000}, nil
	}))
	go srv.Serve(context.Background(), m)
	cp, _ := agentproto.NewClientPeer(a)
	t.Cleanup(func() { cp.Close(nil); srv.Close(nil) })
	c, err := agentproto.Handshake(context.Background(), cp)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func byName(rs []Result) map[string]Result {
	m := map[string]Result{}
	for _, r := range rs {
		m[r.Name] = r
	}
	return m
}

func TestChecksReportPassFailAndHints(t *testing.T) {
	c := fakeGuest(t, func(script string) (string, int) {
		switch {
		case strings.HasPrefix(script, "echo hello"):
			return "hello from sandbox\n", 0
		case script == "whoami":
			return DiagUser + "\n", 0
		case strings.Contains(script, "curl"):
			return "curl: (6) Could not resolve host", 6
		case strings.Contains(script, "apt-get"):
			return "hang", 0
		}
		return "", 127
	})
	checks := Checks()
	for i := range checks {
		if checks[i].Name == "package-manager" {
			checks[i].Timeout = 300 * time.Millisecond
		}
	}
	var live []string
	rs := Run(context.Background(), Env{Agent: c, PackageManager: "apt", NATURL: "http://example.invalid/"}, checks, func(r Result) {
		live = append(live, r.Name)
	})
	got := byName(rs)
	if got["exec"].Outcome != Pass || got["agent-user"].Outcome != Pass {
		t.Errorf("exec/agent-user: %+v %+v", got["exec"], got["agent-user"])
	}
	nat := got["nat"]
	if nat.Outcome != Fail || !strings.Contains(nat.Detail, "exit 6") || !strings.Contains(nat.Hint, "outbound") {
		t.Errorf("nat: %+v", nat)
	}
	pm := got["package-manager"]
	if pm.Outcome != Fail || !strings.Contains(pm.Detail, "timed out") || pm.Hint == "" {
		t.Errorf("package manager timeout: %+v", pm)
	}
	if got["bridge"].Outcome != NotAvailable {
		t.Errorf("bridge: %+v, want not-available (never a pass)", got["bridge"])
	}
	if len(live) != len(checks) || Passed(rs) {
		t.Errorf("live %v, passed %v", live, Passed(rs))
	}
	for _, r := range rs {
		if r.Outcome != NotAvailable && r.Duration <= 0 {
			t.Errorf("%s has no duration", r.Name)
		}
	}
}

func TestChecksRunInParallel(t *testing.T) {
	c := fakeGuest(t, func(string) (string, int) { return "", 0 })
	// Each check waits until all four have started: run one after another
	// they would never get there.
	var mu sync.Mutex
	started := 0
	all := make(chan struct{})
	var checks []Check
	for _, n := range []string{"a", "b", "c", "d"} {
		checks = append(checks, Check{Name: n, Timeout: 10 * time.Second, Hint: "h",
			Run: func(ctx context.Context, env Env) (string, error) {
				mu.Lock()
				started++
				if started == 4 {
					close(all)
				}
				mu.Unlock()
				select {
				case <-all:
					return "together", nil
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}})
	}
	rs := Run(context.Background(), Env{Agent: c}, checks, nil)
	if !Passed(rs) {
		t.Fatalf("checks did not run at the same time: %+v", rs)
	}
}

func TestNoVMFailsEveryCheckWithAHint(t *testing.T) {
	rs := Run(context.Background(), Env{}, Checks(), nil)
	for _, r := range rs {
		if r.Outcome != Fail || !strings.Contains(r.Hint, "Start") {
			t.Errorf("%s without a VM: %+v", r.Name, r)
		}
	}
}

func TestToolsetCheck(t *testing.T) {
	var toolset Check
	for _, c := range Checks() {
		if c.Name == "toolset" {
			toolset = c
		}
	}
	if toolset.Run == nil {
		t.Fatal("no toolset check")
	}
	tests := []struct {
		name, pm, missing string
		pass              bool
		detail            []string
	}{
		{"all present", "apk", "", true, []string{"all present: rg, bash"}},
		{"ripgrep and node missing on alpine", "apk", "rg\nnode\n", false,
			[]string{"ripgrep (rg) for sandbox_search_files", "Node.js (node)", `sandbox_install {"packages": ["ripgrep", "nodejs"]}`}},
		{"venv missing on debian", "apt", "venv\n", false, []string{`sandbox_install {"packages": ["python3-venv"]}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeGuest(t, func(script string) (string, int) {
				if !strings.Contains(script, "command -v rg") || !strings.Contains(script, "import venv") {
					return "unexpected script", 1
				}
				return tt.missing, 0
			})
			r := Run(context.Background(), Env{Agent: c, PackageManager: tt.pm}, []Check{toolset}, nil)[0]
			if (r.Outcome == Pass) != tt.pass {
				t.Fatalf("%+v, want pass %v", r, tt.pass)
			}
			for _, d := range tt.detail {
				if !strings.Contains(r.Detail, d) {
					t.Errorf("detail %q lacks %q", r.Detail, d)
				}
			}
			if !tt.pass && !strings.Contains(r.Hint, "packages") {
				t.Errorf("hint %q does not say how to install", r.Hint)
			}
		})
	}
}

// The agent-user check runs as each agent given, under its own name; with
// none it runs as the synthetic user.
func TestAgentUserCheckPerAgent(t *testing.T) {
	names := func(cs []Check) (out []string) {
		for _, c := range cs {
			if strings.HasPrefix(c.Name, "agent-user") {
				out = append(out, c.Name)
			}
		}
		return out
	}
	if got := names(ChecksFor(Env{})); len(got) != 1 || got[0] != "agent-user" {
		t.Errorf("without agents: %v", got)
	}
	env := Env{Agents: []AgentUser{{Name: "Alice", Slug: "alice", User: "agent-alice", UID: 2001}, {Name: "Bob", Slug: "bob", User: "agent-bob", UID: 2002}}}
	if got := names(ChecksFor(env)); len(got) != 2 || got[0] != "agent-user:alice" || got[1] != "agent-user:bob" {
		t.Errorf("with two agents: %v", got)
	}
}
