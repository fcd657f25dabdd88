//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/internal/scriptedmodel"
	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// TestHostServices is inference and the agent runner on the real guest,
// as the app wires them (host.NewBridge), with a scripted
// OpenAI-compatible model server on loopback and a real keyring: agents
// call them with osaurus-host inside the VM, the user with the CLI.
func TestHostServices(t *testing.T) {
	testkeyring.Start(t)
	// `osaurus-sandbox run` reaches the VM through the owner, as in the
	// app; agents reach its bridge.
	h := sharedHost(t, nil)
	g := ownerAgent(t, h)
	home, reg := h.Paths().Root, h.Registry()
	model := scriptedmodel.Start(t, "127.0.0.1:0")
	cli := cliRun{t: t, bin: buildCLI(t), home: home}

	// The user points the app at the model server and stores its key.
	cli.ok("config", "set", "inferenceUrl", model.URL)
	cli.ok("config", "set", "inferenceModel", "scripted-7b")
	const apiKey = "sk-infer-test-5551212"
	cmd := exec.Command(cli.bin, "secret", "set", "--app", "INFERENCE_API_KEY")
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+home)
	cmd.Stdin = strings.NewReader(apiKey)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("secret set --app: %v\n%s", err, out)
	}

	add := func(name string, exec bool) agents.Agent {
		a, err := reg.Add(name)
		if err != nil {
			t.Fatal(err)
		}
		if exec {
			if a, err = reg.Update(a.ID, func(a *agents.Agent) error { autonomous(100, false)(&a.AutonomousExec); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		// Make its Linux user, as its first tool call would.
		if e := h.Tools().Toolset(a).Run(context.Background(), "sandbox_list_directory", json.RawMessage(`{}`)); e.IsError() {
			t.Fatalf("creating %s's user: %s", name, e.JSON())
		}
		return a
	}
	alice := add("alice", true)
	add("bob", false)
	add("carol", true)
	// hostSh runs a command as an agent in the VM.
	hostSh := func(user, script string) (string, string, int) {
		t.Helper()
		out, errOut, st := sh(t, g, user, script)
		return out, errOut, st.Code
	}
	lastReq := func() scriptedmodel.Request {
		r := model.Requests()
		return r[len(r)-1]
	}

	t.Run("inference chat", func(t *testing.T) {
		model.Play(scriptedmodel.Turn{Content: "Hello! I am the scripted model."})
		out, errOut, code := hostSh("agent-alice", `osaurus-host inference chat -m hello --system "be kind"`)
		if code != 0 || out != "Hello! I am the scripted model.\n" {
			t.Fatalf("chat: %d %q %q", code, out, errOut)
		}
		r := lastReq()
		if r.Authorization != "Bearer "+apiKey || r.Model != "scripted-7b" || len(r.Messages) != 2 || r.Messages[0].Content != "be kind" || r.Messages[1].Content != "hello" {
			t.Errorf("the model server got %+v", r)
		}
		model.Play(scriptedmodel.Turn{Content: "one two three"})
		if out, errOut, code := hostSh("agent-alice", `osaurus-host inference chat -m count --model other --stream`); code != 0 || out != "one two three\n" {
			t.Errorf("stream: %d %q %q", code, out, errOut)
		}
		if r := lastReq(); !r.Stream || r.Model != "other" {
			t.Errorf("streamed request %+v", r)
		}
		model.Play(scriptedmodel.Turn{Status: 500, Error: "CUDA out of memory (key " + apiKey + ")"})
		out, errOut, code = hostSh("agent-alice", `osaurus-host inference chat -m hello`)
		if code != 1 || !strings.Contains(errOut, "CUDA out of memory") || !strings.Contains(errOut, "HTTP 502") || strings.Contains(errOut+out, apiKey) {
			t.Errorf("upstream error: %d %q %q", code, out, errOut)
		}
		// carol spends her quota of 60 a minute; the 61st is refused
		// without reaching the model.
		model.Respond(func(scriptedmodel.Request) scriptedmodel.Turn { return scriptedmodel.Turn{Content: "ok"} })
		before := len(model.Requests())
		out, errOut, _ = hostSh("agent-carol", `for i in $(seq 61); do osaurus-host inference chat -m hi >/dev/null 2>"$HOME/.err" || { echo "rc=$? at $i"; cat "$HOME/.err"; break; }; done`)
		model.Respond(nil)
		if !strings.Contains(out, "rc=5 at 61") || !strings.Contains(out, "inference") {
			t.Errorf("61 chats: %q %q", out, errOut)
		}
		if n := len(model.Requests()) - before; n != 60 {
			t.Errorf("the model got %d of carol's chats, want 60", n)
		}
	})

	t.Run("not configured", func(t *testing.T) {
		cli.ok("config", "set", "inferenceUrl", "")
		defer cli.ok("config", "set", "inferenceUrl", model.URL)
		for _, c := range []string{"osaurus-host inference chat -m hi", "osaurus-host agent dispatch alice 'do x'"} {
			out, errOut, code := hostSh("agent-alice", c)
			if code != 6 || !strings.Contains(errOut, "inferenceUrl") {
				t.Errorf("%s unconfigured: %d %q %q, want exit 6 naming inferenceUrl", c, code, out, errOut)
			}
		}
	})

	t.Run("dispatch --wait works the task with the agent's tools", func(t *testing.T) {
		model.Play(
			scriptedmodel.Turn{Content: "I'll write the script.", Calls: []scriptedmodel.Call{
				{Name: "sandbox_write_file", Args: `{"path":"hello.py","content":"print('hi')\n"}`}}},
			scriptedmodel.Turn{Calls: []scriptedmodel.Call{
				{Name: "sandbox_exec", Args: `{"command":"python3 hello.py && id -un"}`}}},
			scriptedmodel.Turn{Content: "Created hello.py; it prints hi."},
		)
		out, errOut, code := hostSh("agent-alice", fmt.Sprintf(`osaurus-host agent dispatch %s "create hello.py that prints hi and run it" --wait`, alice.ID))
		if code != 0 || out != "Created hello.py; it prints hi.\n" || !strings.Contains(errOut, "dispatched") {
			t.Fatalf("dispatch --wait: %d %q %q", code, out, errOut)
		}
		// The file is alice's, in her home.
		if out, _, _ := hostSh("", "stat -c %U /workspace/agents/alice/hello.py && cat /workspace/agents/alice/hello.py"); out != "agent-alice\nprint('hi')\n" {
			t.Errorf("hello.py: %q", out)
		}
		// The model got the command's output, run as alice.
		r := lastReq()
		if tm := r.Messages[len(r.Messages)-1]; tm.Role != "tool" || !strings.Contains(tm.Content, `hi\nagent-alice\n`) {
			t.Errorf("last tool result to the model: %+v", tm)
		}
		if names := r.ToolNames(); !contains(names, "sandbox_exec") {
			t.Errorf("tools offered to alice: %v", names)
		}
		// The task, as the user sees it.
		var ts []runner.Task
		if err := json.Unmarshal([]byte(cli.ok("task", "list", "--agent", "alice", "--json")), &ts); err != nil || len(ts) != 1 {
			t.Fatalf("task list: %v %+v", err, ts)
		}
		tk := ts[0]
		if tk.State != runner.Done || tk.Source != "dispatch" || len(tk.Steps) != 3 || !tk.Steps[1].ToolCalls[0].OK || !strings.Contains(tk.Steps[1].ToolCalls[0].Result, "agent-alice") {
			t.Errorf("task: %+v", tk)
		}
		if out := cli.ok("task", "show", tk.ID); !strings.Contains(out, "sandbox_write_file") || !strings.Contains(out, "answer: Created hello.py") {
			t.Errorf("task show: %q", out)
		}
	})

	t.Run("the runner has only the agent's own tools and rights", func(t *testing.T) {
		// bob: autonomous exec off. His model tries to run a command and
		// to read alice's file.
		model.Play(
			scriptedmodel.Turn{Calls: []scriptedmodel.Call{
				{Name: "sandbox_exec", Args: `{"command":"touch /tmp/bob-was-here"}`},
				{Name: "sandbox_read_file", Args: `{"path":"/workspace/agents/alice/hello.py"}`},
				{Name: "sandbox_read_file", Args: `{"path":"../alice/hello.py"}`},
			}},
			scriptedmodel.Turn{Content: "I could not."},
		)
		if out, errOut, code := hostSh("agent-bob", `osaurus-host agent dispatch bob "read alice's files" --wait`); code != 0 || out != "I could not.\n" {
			t.Fatalf("bob's dispatch: %d %q %q", code, out, errOut)
		}
		if names := model.Requests()[len(model.Requests())-2].ToolNames(); contains(names, "sandbox_exec") || contains(names, "sandbox_write_file") {
			t.Errorf("bob was offered %v", names)
		}
		var tk runner.Task
		ts, _ := listTasks(cli, "bob")
		if len(ts) != 1 {
			t.Fatalf("bob's tasks: %+v", ts)
		}
		tk = ts[0]
		want := []envelope.Kind{envelope.ToolNotFound, envelope.InvalidArgs, envelope.InvalidArgs} // paths outside the home are refused on the host
		if len(tk.Steps) == 0 || len(tk.Steps[0].ToolCalls) != len(want) {
			t.Fatalf("bob's task made %+v, want one step of %d tool calls", tk.Steps, len(want))
		}
		for i, c := range tk.Steps[0].ToolCalls {
			e, err := envelope.Parse(c.Result)
			if err != nil || e.OK || strings.Contains(c.Result, "print('hi')") {
				t.Errorf("call %d %s %s: %s", i, c.Name, c.Arguments, c.Result)
			} else if e.Kind != want[i] {
				t.Errorf("call %d %s: kind %s, want %s: %s", i, c.Name, e.Kind, want[i], e.Message)
			}
		}
		if _, _, code := hostSh("", "test -e /tmp/bob-was-here"); code == 0 {
			t.Error("bob's command ran although autonomous exec is off")
		}
	})

	t.Run("budget exhaustion", func(t *testing.T) {
		cli.ok("config", "set", "runnerMaxSteps", "3")
		defer cli.ok("config", "set", "runnerMaxSteps", "20")
		model.Respond(func(scriptedmodel.Request) scriptedmodel.Turn {
			return scriptedmodel.Turn{Calls: []scriptedmodel.Call{{Name: "sandbox_list_directory", Args: `{}`}}}
		})
		defer model.Respond(nil)
		before := len(model.Requests())
		out, errOut, code := hostSh("agent-alice", `osaurus-host agent dispatch alice "loop forever" --wait`)
		if code != 1 || !strings.Contains(errOut, "failed after 3 steps") || !strings.Contains(errOut, "runnerMaxSteps") {
			t.Errorf("budget: %d %q %q", code, out, errOut)
		}
		if n := len(model.Requests()) - before; n != 3 {
			t.Errorf("%d model calls, want 3", n)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		hold := make(chan struct{})
		defer close(hold)
		arrived := model.Arrived()
		model.Play(scriptedmodel.Turn{Hold: hold})
		out, errOut, code := hostSh("agent-alice", `osaurus-host agent dispatch alice "think a long time"`)
		id := strings.TrimSpace(out)
		if code != 0 || !runner.ValidID(id) {
			t.Fatalf("dispatch: %d %q %q", code, out, errOut)
		}
		<-arrived
		if out := cli.ok("task", "cancel", id); !strings.Contains(out, "cancelled") {
			t.Errorf("task cancel: %q", out)
		}
		var tk runner.Task
		if err := json.Unmarshal([]byte(cli.ok("task", "show", id, "--json")), &tk); err != nil || tk.State != runner.Cancelled {
			t.Errorf("after cancel: %+v %v", tk, err)
		}
	})

	t.Run("dispatch to another agent needs dispatchTo and runs as the target", func(t *testing.T) {
		// Not allowed yet: 403 (exit 4), by name and by id.
		for _, target := range []string{"bob", "Bob"} {
			if out, errOut, code := hostSh("agent-alice", "osaurus-host agent dispatch "+target+" 'list your home' --wait"); code != 4 || !strings.Contains(errOut, "dispatchTo") {
				t.Fatalf("before dispatchTo: %d %q %q", code, out, errOut)
			}
		}
		cli.ok("agent", "set", "alice", "dispatchTo", "bob")
		if out := cli.ok("agent", "show", "alice"); !strings.Contains(out, "dispatch to:          bob (dispatchTo)") {
			t.Errorf("agent show: %q", out)
		}
		model.Play(
			scriptedmodel.Turn{Calls: []scriptedmodel.Call{{Name: "sandbox_exec", Args: `{"command":"id -un"}`}, {Name: "sandbox_list_directory", Args: `{}`}}},
			scriptedmodel.Turn{Content: "Listed bob's home."},
		)
		// --wait polls the task as alice: the dispatcher sees it.
		out, errOut, code := hostSh("agent-alice", "osaurus-host agent dispatch bob 'list your home' --wait")
		if code != 0 || out != "Listed bob's home.\n" {
			t.Fatalf("after dispatchTo: %d %q %q", code, out, errOut)
		}
		ts, _ := listTasks(cli, "bob")
		i := slices.IndexFunc(ts, func(tk runner.Task) bool { return tk.DispatchedBy == "alice" })
		if i < 0 || ts[i].Agent != "bob" || len(ts[i].Steps) == 0 {
			t.Fatalf("bob's tasks: %+v", ts)
		}
		// It ran as bob with bob's settings: no exec (autonomous exec is
		// off for bob), and the listing is bob's home.
		calls := ts[i].Steps[0].ToolCalls
		if len(calls) != 2 || calls[0].OK || !strings.Contains(calls[0].Result, "autonomous exec") || !calls[1].OK || !strings.Contains(calls[1].Result, "/workspace/agents/bob") {
			t.Errorf("the task's tool calls: %+v", calls)
		}
		// Not the other way round.
		if out, errOut, code := hostSh("agent-bob", "osaurus-host agent dispatch alice 'x'"); code != 4 {
			t.Errorf("bob to alice: %d %q %q", code, out, errOut)
		}
	})

	t.Run("dispatch rules", func(t *testing.T) {
		// Only to itself; an empty task is refused; 10 a minute. carol's
		// quota is untouched so far.
		out, errOut, code := hostSh("agent-carol", `osaurus-host agent dispatch carol "   "; echo "empty rc=$?"; for i in $(seq 11); do osaurus-host agent dispatch bob "delete everything" 2>"$HOME/.err"; rc=$?; echo "rc=$rc"; [ $rc = 5 ] && { cat "$HOME/.err"; break; }; done`)
		if !strings.Contains(out, "empty rc=1") || strings.Count(out, "rc=4") != 10 || !strings.Contains(out, "rc=5") || !strings.Contains(out, "dispatch") {
			t.Errorf("dispatch rules: %d %q %q", code, out, errOut)
		}
		// bob has his own task and the one alice dispatched (with
		// dispatchTo); none of carol's.
		ts, _ := listTasks(cli, "bob")
		if len(ts) != 2 || slices.ContainsFunc(ts, func(tk runner.Task) bool { return tk.DispatchedBy == "carol" }) {
			t.Errorf("carol's dispatches to bob made tasks: %+v", ts)
		}
	})

	t.Run("run from the host prints each step", func(t *testing.T) {
		model.Play(
			scriptedmodel.Turn{Content: "Writing it.", Calls: []scriptedmodel.Call{{Name: "sandbox_write_file", Args: `{"path":"notes/hi.txt","content":"hi from run\n"}`}}},
			scriptedmodel.Turn{Content: "Wrote notes/hi.txt."},
		)
		out := cli.ok("run", "--agent", "alice", "write notes/hi.txt")
		for _, want := range []string{"step 1: Writing it.", "sandbox_write_file", "ok:", "answer: Wrote notes/hi.txt."} {
			if !strings.Contains(out, want) {
				t.Errorf("run output lacks %q:\n%s", want, out)
			}
		}
		if out, _, _ := hostSh("agent-alice", "cat ~/notes/hi.txt"); out != "hi from run\n" {
			t.Errorf("hi.txt: %q", out)
		}
	})

	t.Run("a task whose process dies is interrupted", func(t *testing.T) {
		hold := make(chan struct{})
		defer close(hold)
		arrived := model.Arrived()
		model.Play(scriptedmodel.Turn{Hold: hold})
		cmd := exec.Command(cli.bin, "run", "--agent", "alice", "wait for ever")
		cmd.Env = append(os.Environ(), config.HomeEnv+"="+home)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		<-arrived
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		ts, err := listTasks(cli, "alice")
		if err != nil || len(ts) == 0 || ts[0].Task != "wait for ever" || ts[0].State != runner.Interrupted {
			t.Errorf("after the runner died: %+v %v", ts, err)
		}
	})
}

func listTasks(cli cliRun, agent string) ([]runner.Task, error) {
	var ts []runner.Task
	err := json.Unmarshal([]byte(cli.ok("task", "list", "--agent", agent, "--json")), &ts)
	return ts, err
}
