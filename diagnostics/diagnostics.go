// Package diagnostics checks, in parallel, that the running sandbox can do
// what agents need: run commands, reach the network, run as an agent user,
// install packages, run the tools' programs (the toolset), and reach the
// host bridge.
package diagnostics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sourcegraph/conc/pool"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/pkgname"
)

// Outcome of one check.
type Outcome string

const (
	Pass         Outcome = "pass"
	Fail         Outcome = "fail"
	NotAvailable Outcome = "not-available" // the feature doesn't exist yet; never a pass
)

// Result of one check.
type Result struct {
	Name     string        `json:"name"`
	Outcome  Outcome       `json:"outcome"`
	Duration time.Duration `json:"duration"`
	Detail   string        `json:"detail,omitempty"`
	Hint     string        `json:"hint,omitempty"` // what to do, when it failed
}

// Passed reports whether every check passed.
func Passed(rs []Result) bool {
	for _, r := range rs {
		if r.Outcome != Pass {
			return false
		}
	}
	return len(rs) > 0
}

// Env is what the checks need.
type Env struct {
	Agent *agentproto.Client
	// PackageManager is "apk" or "apt" (from the guest's handshake).
	PackageManager string
	// NATURL is fetched from inside the guest.
	NATURL string
	// Bridge, when set, checks the host API bridge from inside the guest
	// (CheckBridge). An app that does not serve the bridge leaves it nil
	// and the check says so rather than passing.
	Bridge func(ctx context.Context, c *agentproto.Client) error
	// Agents are the agents whose Linux users the agent-user check runs
	// as, one check each (ChecksFor). Without any, the check runs as the
	// synthetic DiagUser, so a fresh install still learns whether users
	// can be made.
	Agents []AgentUser
}

// AgentUser is an agent as the agent-user check needs it: the user is made
// exactly as the tools make it (same uid, home and mode), so the check
// proves what the agent's own tool calls rely on.
type AgentUser struct {
	Name      string // display name, for the detail
	Slug      string // names the check: agent-user:<slug>
	User      string
	Home      string
	UID       int
	AdoptHome bool
}

// Check is one diagnostic.
type Check struct {
	Name    string
	Timeout time.Duration
	Hint    string
	Run     func(ctx context.Context, env Env) (detail string, err error)
}

// errNotAvailable marks a check whose feature is missing.
var errNotAvailable = errors.New("not available yet")

// DiagUser is the Linux user the agent-user check creates.
const DiagUser = "agent-diag"

// UsersOf are the agents as the agent-user check needs them.
func UsersOf(as []agents.Agent) []AgentUser {
	out := make([]AgentUser, 0, len(as))
	for _, a := range as {
		out = append(out, AgentUser{Name: a.Name, Slug: a.Slug, User: a.User(), Home: a.Home(), UID: a.UID, AdoptHome: a.AdoptHome})
	}
	return out
}

// homeMode is the agents' home mode (as package tools makes it).
const homeMode = 0o700

// Checks are the standard diagnostics with the agent-user check run as
// DiagUser (ChecksFor(Env{})): the names a window lists before a run.
func Checks() []Check { return ChecksFor(Env{}) }

// ChecksFor are the standard diagnostics for env: the agent-user check is
// one check per agent of env.Agents, named "agent-user:<slug>", each run
// as that agent's own Linux user.
func ChecksFor(env Env) []Check {
	var out []Check
	for _, c := range standard() {
		if c.Name != "agent-user" {
			out = append(out, c)
			continue
		}
		if len(env.Agents) == 0 {
			out = append(out, c)
			continue
		}
		for _, a := range env.Agents {
			out = append(out, agentUserCheck(a))
		}
	}
	return out
}

// agentUserCheck makes a's Linux user as the tools do (idempotent), runs
// `id` as it and checks the kernel's answer names that user and uid.
func agentUserCheck(a AgentUser) Check {
	return Check{
		Name: "agent-user:" + a.Slug, Timeout: 30 * time.Second,
		Hint: fmt.Sprintf("Creating or running as %s (agent %s) failed. The root disk may be damaged: Reset the sandbox (workspaces are kept).", a.User, a.Name),
		Run: func(ctx context.Context, env Env) (string, error) {
			if _, err := env.Agent.UserAdd(ctx, agentproto.UserAddRequest{Name: a.User, Home: a.Home, HomeMode: homeMode, UID: a.UID, AdoptHome: a.AdoptHome}); err != nil {
				return "", fmt.Errorf("creating %s: %w", a.User, err)
			}
			out, err := run(ctx, env.Agent, a.User, `printf '%s %s\n' "$(id -un)" "$(id -u)"`)
			if err != nil {
				return out, err
			}
			want := a.User
			if a.UID != 0 {
				want = fmt.Sprintf("%s %d", a.User, a.UID)
			}
			got := strings.TrimSpace(out)
			if a.UID == 0 {
				got, _, _ = strings.Cut(got, " ")
			}
			if got != want {
				return out, fmt.Errorf("id said %q, want %q", got, want)
			}
			return fmt.Sprintf("agent %s: ran id as %s (uid %s)", a.Name, a.User, strings.Fields(strings.TrimSpace(out))[1]), nil
		},
	}
}

func standard() []Check {
	return []Check{
		{
			Name: "exec", Timeout: 30 * time.Second,
			Hint: "The guest agent did not run a command. Restart the sandbox; if it persists, Reset it.",
			Run: func(ctx context.Context, env Env) (string, error) {
				out, err := run(ctx, env.Agent, "", "echo hello from sandbox")
				if err != nil {
					return out, err
				}
				if out != "hello from sandbox\n" {
					return out, fmt.Errorf("echo returned %q", out)
				}
				return "echo round trip ok", nil
			},
		},
		{
			Name: "nat", Timeout: 20 * time.Second,
			Hint: "The VM can't reach the network. Check that Network is \"outbound\" in Resources (\"none\" has no network card) and that this computer is online.",
			Run: func(ctx context.Context, env Env) (string, error) {
				if env.NATURL == "" {
					return "", errors.New("no URL configured (diagnosticsUrl)")
				}
				q := shellQuote(env.NATURL)
				script := "if command -v curl >/dev/null; then curl -fsS -o /dev/null --max-time 15 -w '%{http_code}' " + q +
					"; else wget -q -O /dev/null -T 15 " + q + " && echo 200; fi"
				out, err := run(ctx, env.Agent, "", script)
				if err != nil {
					return out, err
				}
				return "fetched " + env.NATURL + " (HTTP " + strings.TrimSpace(out) + ")", nil
			},
		},
		{
			Name: "agent-user", Timeout: 30 * time.Second,
			Hint: "Creating or using an agent's Linux user failed. The root disk may be damaged: Reset the sandbox (workspaces are kept).",
			Run: func(ctx context.Context, env Env) (string, error) {
				if _, err := env.Agent.UserAdd(ctx, agentproto.UserAddRequest{Name: DiagUser, Home: "/workspace/agents/diag"}); err != nil {
					return "", err
				}
				out, err := run(ctx, env.Agent, DiagUser, "whoami")
				if err != nil {
					return out, err
				}
				if strings.TrimSpace(out) != DiagUser {
					return out, fmt.Errorf("whoami said %q", strings.TrimSpace(out))
				}
				return "no agents yet: ran whoami as the synthetic user " + DiagUser, nil
			},
		},
		{
			Name: "package-manager", Timeout: 4 * time.Minute,
			Hint: "Installing a package as root failed. It needs outbound network (see the nat check) and a working package index; try again, or Reset the sandbox.",
			Run: func(ctx context.Context, env Env) (string, error) {
				var script string
				switch env.PackageManager {
				case "apk":
					script = "apk add --no-cache jq >/dev/null && jq --version"
				case "apt":
					script = "export DEBIAN_FRONTEND=noninteractive; (dpkg -s jq >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends jq >/dev/null; }) && jq --version"
				default:
					return "", fmt.Errorf("unknown package manager %q", env.PackageManager)
				}
				out, err := run(ctx, env.Agent, "", script)
				if err != nil {
					return out, err
				}
				return env.PackageManager + " installed " + strings.TrimSpace(out), nil
			},
		},
		{
			Name: "toolset", Timeout: 30 * time.Second,
			Hint: "Tools that need the missing programs fail until they are installed (sandbox_search_files falls back to a built-in search). " +
				"Add the packages to the image manifest's \"packages\" and Reset the sandbox (the built-in image has them all), " +
				"or have an agent with autonomous exec install them with the sandbox_install call in the detail.",
			Run: checkToolset,
		},
		{
			Name: "bridge", Timeout: 20 * time.Second,
			Hint: "The guest could not reach the host API bridge. The detail names the failing step; restarting the sandbox copies osaurus-host and reconnects the relay.",
			Run: func(ctx context.Context, env Env) (string, error) {
				if env.Bridge == nil {
					return "", errNotAvailable
				}
				return "bridge answered", env.Bridge(ctx, env.Agent)
			},
		},
	}
}

// toolsetScript prints each program of the toolset that the guest lacks,
// one a line ("venv": python3 can't make a virtual environment with pip).
func toolsetScript() string {
	var b strings.Builder
	for _, t := range pkgname.Tools {
		if t.Program == "venv" {
			b.WriteString("python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || echo venv\n")
			continue
		}
		fmt.Fprintf(&b, "command -v %s >/dev/null 2>&1 || echo %s\n", t.Program, t.Program)
	}
	return b.String()
}

// checkToolset lists the programs the sandbox_* tools need that the guest
// lacks, and the sandbox_install call that brings them.
func checkToolset(ctx context.Context, env Env) (string, error) {
	out, err := run(ctx, env.Agent, "", toolsetScript())
	if err != nil {
		return out, err
	}
	var missing, pkgs []string
	for _, p := range strings.Fields(out) {
		t := pkgname.ToolFor(p)
		missing = append(missing, t.What+" for "+t.UsedBy)
		for _, pkg := range t.Packages(env.PackageManager) {
			if !slices.Contains(pkgs, pkg) {
				pkgs = append(pkgs, pkg)
			}
		}
	}
	if len(missing) == 0 {
		names := make([]string, len(pkgname.Tools))
		for i, t := range pkgname.Tools {
			names[i] = t.Program
		}
		return "all present: " + strings.Join(names, ", "), nil
	}
	msg := "missing: " + strings.Join(missing, "; ")
	if len(pkgs) > 0 {
		msg += "; install with " + pkgname.InstallCall(pkgs)
	}
	return out, errors.New(msg)
}

// run executes a shell script; a non-zero exit is an error carrying the
// output's tail.
func run(ctx context.Context, c *agentproto.Client, user, script string) (string, error) {
	out, errOut, st, err := c.Output(ctx, agentproto.ExecRequest{Identity: agentproto.Identity{User: user}, Shell: script})
	if err != nil {
		return "", err
	}
	if st.Code != 0 || st.TimedOut {
		msg := strings.TrimSpace(string(errOut) + string(out))
		if len(msg) > 400 {
			msg = "…" + msg[len(msg)-400:]
		}
		return string(out), fmt.Errorf("exit %d: %s", st.Code, msg)
	}
	return string(out), nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Run runs the checks in parallel. onResult, when set, gets each result as
// soon as its check finishes (from that check's goroutine, serialised).
// The returned results are in the checks' order.
func Run(ctx context.Context, env Env, checks []Check, onResult func(Result)) []Result {
	results := make([]Result, len(checks))
	var mu sync.Mutex
	p := pool.New().WithContext(ctx)
	for i, c := range checks {
		p.Go(func(ctx context.Context) error {
			r := runOne(ctx, env, c)
			mu.Lock()
			results[i] = r
			if onResult != nil {
				onResult(r)
			}
			mu.Unlock()
			return nil
		})
	}
	p.Wait()
	return results
}

func runOne(ctx context.Context, env Env, c Check) (r Result) {
	r.Name = c.Name
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	defer func() {
		r.Duration = time.Since(start).Round(time.Microsecond)
		if p := recover(); p != nil {
			r.Outcome, r.Detail, r.Hint = Fail, fmt.Sprint("check panicked: ", p), c.Hint
		}
	}()
	if env.Agent == nil {
		return Result{Name: c.Name, Outcome: Fail, Detail: "the sandbox VM is not running", Hint: "Start the sandbox, then run diagnostics."}
	}
	detail, err := c.Run(ctx, env)
	switch {
	case errors.Is(err, errNotAvailable):
		r.Outcome, r.Detail, r.Hint = NotAvailable, "not available yet", c.Hint
	case err != nil:
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("timed out after %s: %w", c.Timeout, err)
		}
		r.Outcome, r.Detail, r.Hint = Fail, err.Error(), c.Hint
	default:
		r.Outcome, r.Detail = Pass, detail
	}
	return r
}
