package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/inference"
	"github.com/osaurus/osaurus-sandbox/internal/scriptedmodel"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// noVM is a guest that isn't running: tool calls that need the VM come
// back as "unavailable" envelopes, which is enough to see the loop hand
// results to the model. The tools themselves run on the real guest in
// e2e.TestHostServices.
func noVM(context.Context) (*agentproto.Client, error) {
	return nil, errors.New("the VM is stopped")
}

type fixture struct {
	model  *scriptedmodel.Server
	reg    *agents.Registry
	store  *runner.Store
	r      *runner.TaskRunner
	alice  agents.Agent
	budget runner.Budget
}

func setup(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	reg, err := agents.Open(filepath.Join(dir, "agents.json"))
	if err != nil {
		t.Fatal(err)
	}
	alice, err := reg.Add("Alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Add("Bob"); err != nil {
		t.Fatal(err)
	}
	f := &fixture{model: scriptedmodel.Start(t, "127.0.0.1:0"), reg: reg, alice: alice,
		store: &runner.Store{Dir: filepath.Join(dir, "tasks")}, budget: runner.Budget{MaxSteps: 5, Timeout: time.Minute}}
	f.r = f.newRunner()
	t.Cleanup(f.r.Close)
	return f
}

func (f *fixture) newRunner() *runner.TaskRunner {
	return newRunnerWith(f, tools.Options{Guest: noVM, Agents: f.reg})
}

func newRunnerWith(f *fixture, o tools.Options) *runner.TaskRunner {
	return runner.New(runner.Options{
		Env:    tools.NewEnv(o),
		Agents: f.reg,
		Model: &inference.Client{Settings: func() (inference.Settings, error) {
			return inference.Settings{URL: f.model.URL, Model: "scripted"}, nil
		}},
		Store:      f.store,
		Budget:     func() runner.Budget { return f.budget },
		CancelPoll: 20 * time.Millisecond,
	})
}

func TestLoopHandsToolResultsToTheModel(t *testing.T) {
	f := setup(t)
	f.model.Play(
		scriptedmodel.Turn{Content: "let me look", Calls: []scriptedmodel.Call{
			{Name: "sandbox_list_directory", Args: `{}`},
			{Name: "sandbox_exec", Args: `{"command":"id"}`}, // gated: autonomous exec is off
			{Name: "sandbox_read_file", Args: `{"path":`},    // not JSON
		}},
		scriptedmodel.Turn{Content: "Nothing to do: the VM is stopped."},
	)
	var updates []runner.Task
	task, err := f.r.Run(context.Background(), "alice", "  list my home  ", "cli", func(t runner.Task) { updates = append(updates, t) })
	if err != nil {
		t.Fatal(err)
	}
	if task.State != runner.Done || task.Answer != "Nothing to do: the VM is stopped." || task.Task != "list my home" || len(task.Steps) != 2 {
		t.Fatalf("task = %+v", task)
	}
	calls := task.Steps[0].ToolCalls
	kinds := []envelope.Kind{envelope.Unavailable, envelope.ToolNotFound, envelope.InvalidArgs}
	for i, c := range calls {
		e, err := envelope.Parse(c.Result)
		if err != nil || e.OK || e.Kind != kinds[i] || !c.Done {
			t.Errorf("call %d %s: %+v (%v), want kind %s", i, c.Name, e, err, kinds[i])
		}
	}
	reqs := f.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls", len(reqs))
	}
	// The model is offered the agent's tools: read-only ones only, as
	// its MCP client would be.
	names := reqs[0].ToolNames()
	if !slices.Contains(names, "sandbox_read_file") || slices.Contains(names, "sandbox_exec") || slices.Contains(names, "sandbox_write_file") {
		t.Errorf("offered tools %v", names)
	}
	// Second request: system, user, assistant with 3 calls, 3 tool results.
	m := reqs[1].Messages
	if len(m) != 6 || m[2].Role != "assistant" || len(m[2].ToolCalls) != 3 || m[3].Role != "tool" || m[3].ToolCallID != m[2].ToolCalls[0].ID ||
		!strings.Contains(m[4].Content, "autonomous exec") {
		t.Errorf("second request messages: %+v", m)
	}
	// Live updates: after the model turn and after every tool result.
	if len(updates) != 5 || updates[0].Steps[0].ToolCalls[0].Done || !updates[1].Steps[0].ToolCalls[0].Done {
		t.Errorf("%d updates", len(updates))
	}
	// Persisted as shown.
	got, err := f.store.Get(task.ID)
	if err != nil || got.State != runner.Done || len(got.Steps) != 2 || got.Steps[0].ToolCalls[1].Result != calls[1].Result {
		t.Errorf("stored = %+v, %v", got, err)
	}
}

func TestGateFollowsSettings(t *testing.T) {
	f := setup(t)
	if _, err := f.reg.Update("alice", func(a *agents.Agent) error { a.AutonomousExec.Enabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	f.model.Play(scriptedmodel.Turn{Content: "done"})
	if _, err := f.r.Run(context.Background(), "alice", "x", "cli", nil); err != nil {
		t.Fatal(err)
	}
	if names := f.model.Requests()[0].ToolNames(); !slices.Contains(names, "sandbox_exec") || !slices.Contains(names, "sandbox_write_file") {
		t.Errorf("with autonomous exec on, offered %v", names)
	}
}

func TestBudgetsAndErrors(t *testing.T) {
	f := setup(t)
	loop := scriptedmodel.Turn{Calls: []scriptedmodel.Call{{Name: "sandbox_list_directory", Args: `{}`}}}
	f.model.Respond(func(scriptedmodel.Request) scriptedmodel.Turn { return loop })
	f.budget.MaxSteps = 3
	task, err := f.r.Run(context.Background(), "alice", "never ends", "cli", nil)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != runner.Failed || !strings.Contains(task.Error, "step budget of 3") || len(task.Steps) != 3 || len(f.model.Requests()) != 3 {
		t.Fatalf("step budget: %+v", task)
	}

	// Time budget: the model is still thinking when it runs out.
	hold := make(chan struct{})
	defer close(hold)
	f.model.Respond(func(scriptedmodel.Request) scriptedmodel.Turn { return scriptedmodel.Turn{Hold: hold} })
	f.budget = runner.Budget{MaxSteps: 5, Timeout: 200 * time.Millisecond}
	task, err = f.r.Run(context.Background(), "alice", "slow", "cli", nil)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != runner.Failed || !strings.Contains(task.Error, "time budget") {
		t.Fatalf("time budget: %+v", task)
	}

	// Upstream error: the task fails with the server's message.
	f.budget = runner.Budget{MaxSteps: 5, Timeout: time.Minute}
	f.model.Play(scriptedmodel.Turn{Status: 500, Error: "model not loaded"})
	task, err = f.r.Run(context.Background(), "alice", "x", "cli", nil)
	if err != nil || task.State != runner.Failed || !strings.Contains(task.Error, "model not loaded") {
		t.Fatalf("upstream error: %+v %v", task, err)
	}
}

func TestDispatchRules(t *testing.T) {
	f := setup(t)
	for _, tc := range []struct {
		caller, target, task string
		want                 error
	}{
		{"alice", "bob", "x", runner.ErrForbidden},
		{"alice", "nobody", "x", runner.ErrForbidden},
		{"mallory", "", "x", runner.ErrForbidden}, // an agent-* user the app doesn't know
		{"alice", "", "  ", runner.ErrEmptyTask},
		{"alice", "alice", strings.Repeat("x", runner.MaxTaskLen+1), runner.ErrEmptyTask},
	} {
		if _, err := f.r.Dispatch(tc.caller, tc.target, tc.task); !errors.Is(err, tc.want) {
			t.Errorf("Dispatch(%s→%q): %v, want %v", tc.caller, tc.target, err, tc.want)
		}
	}
	f.model.Play(scriptedmodel.Turn{Content: "ok"})
	task, err := f.r.Dispatch("alice", f.alice.ID, "by id")
	if err != nil || task.Source != "dispatch" || task.Agent != "alice" {
		t.Fatalf("own id: %+v %v", task, err)
	}
	if task, err = f.r.Wait(context.Background(), task.ID, time.Minute); err != nil || task.State != runner.Done || task.Answer != "ok" {
		t.Fatalf("wait: %+v %v", task, err)
	}
}

func TestCancel(t *testing.T) {
	f := setup(t)
	hold := make(chan struct{})
	defer close(hold)
	f.model.Play(scriptedmodel.Turn{Hold: hold})
	arrived := f.model.Arrived()
	task, err := f.r.Start("alice", "think forever", "cli", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-arrived
	if got, err := f.r.Cancel(task.ID); err != nil || got.State != runner.Cancelled {
		t.Fatalf("in-process cancel: %+v %v", got, err)
	}

	// From another process: through the store, which the working
	// process watches.
	f.model.Play(scriptedmodel.Turn{Hold: hold})
	arrived = f.model.Arrived()
	task, err = f.r.Start("alice", "think forever", "cli", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-arrived
	if got, err := f.store.RequestCancel(task.ID); err != nil || got.State != runner.Running {
		t.Fatalf("RequestCancel: %+v %v", got, err)
	}
	if got, err := f.r.Wait(context.Background(), task.ID, time.Minute); err != nil || got.State != runner.Cancelled {
		t.Fatalf("after RequestCancel: %+v %v", got, err)
	}
	if _, err := f.store.RequestCancel("../../etc/x"); !errors.Is(err, runner.ErrNotFound) {
		t.Errorf("bad id: %v", err)
	}
}

func TestRestartMarksInterrupted(t *testing.T) {
	f := setup(t)
	hold := make(chan struct{})
	defer close(hold)
	f.model.Play(scriptedmodel.Turn{Hold: hold})
	arrived := f.model.Arrived()
	task, err := f.r.Start("alice", "long", "dispatch", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-arrived
	// The app stops with the task running.
	f.r.Close()
	got, err := f.store.Get(task.ID)
	if err != nil || got.State != runner.Interrupted {
		t.Fatalf("after Close: %+v %v", got, err)
	}

	// A task file left "running" by a process that died (pid 0 never
	// exists as a process) reads as interrupted.
	stale := runner.Task{ID: "0123456789abcdef", Agent: "alice", Task: "t", State: runner.Running, PID: 0, Created: time.Now()}
	if err := f.store.Save(stale); err != nil {
		t.Fatal(err)
	}
	// One left by this very pid (reused after a restart) is interrupted
	// by Recover.
	mine := runner.Task{ID: "fedcba9876543210", Agent: "alice", Task: "t", State: runner.Running, PID: os.Getpid(), Created: time.Now()}
	if err := f.store.Save(mine); err != nil {
		t.Fatal(err)
	}
	r2 := f.newRunner()
	defer r2.Close()
	r2.Recover()
	ts, err := f.store.List("alice")
	if err != nil || len(ts) != 3 {
		t.Fatalf("list: %d %v", len(ts), err)
	}
	for _, tk := range ts {
		if tk.State != runner.Interrupted || tk.Error == "" {
			t.Errorf("task %s: %s %q", tk.ID, tk.State, tk.Error)
		}
	}
	if ts, _ := f.store.List("bob"); len(ts) != 0 {
		t.Errorf("bob's list: %v", ts)
	}
}

// recorder is a tools.Invoker that answers every call itself, as the owner
// process does for a runner in another process.
type recorder struct {
	calls, turns []string
}

func (r *recorder) RunTool(_ context.Context, a agents.Agent, name string, _ json.RawMessage) envelope.Envelope {
	r.calls = append(r.calls, a.Slug+" "+name)
	return envelope.OK(name, map[string]any{"from": "the owner"})
}

func (r *recorder) EndTurn(_ context.Context, agentID string) { r.turns = append(r.turns, agentID) }

// A runner given Tools runs every tool call through it and starts the
// agent's turn there, where the limits every transport shares are kept.
func TestToolsRunElsewhere(t *testing.T) {
	f := setup(t)
	rec := &recorder{}
	r := runner.New(runner.Options{
		Env: tools.NewEnv(tools.Options{Guest: noVM, Agents: f.reg}), Tools: rec, Agents: f.reg,
		Model: &inference.Client{Settings: func() (inference.Settings, error) {
			return inference.Settings{URL: f.model.URL, Model: "scripted"}, nil
		}},
		Store: f.store, Budget: func() runner.Budget { return f.budget },
	})
	t.Cleanup(r.Close)
	f.model.Play(
		scriptedmodel.Turn{Calls: []scriptedmodel.Call{{Name: "sandbox_list_directory", Args: `{}`}}},
		scriptedmodel.Turn{Content: "done"},
	)
	task, err := r.Run(context.Background(), "alice", "look around", "cli", func(runner.Task) {})
	if err != nil {
		t.Fatal(err)
	}
	if task.State != runner.Done || !slices.Equal(rec.calls, []string{"alice sandbox_list_directory"}) || !slices.Equal(rec.turns, []string{f.alice.ID}) {
		t.Fatalf("task %s, calls %q, turns %q", task.State, rec.calls, rec.turns)
	}
	if res := task.Steps[0].ToolCalls[0].Result; !strings.Contains(res, "the owner") {
		t.Errorf("result %s", res)
	}
}
