// Package runner is the built-in agent runner: it works a task with the
// configured model and the agent's own sandbox tools (the same catalog,
// limits and gates an MCP client of that agent gets), looping until the
// model answers without a tool call or a step or time budget runs out.
// Tasks are persisted (package store) as they go, so they can be watched
// live, survive a restart (as interrupted) and be cancelled from another
// process.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/inference"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// Errors.
var (
	// ErrForbidden: an agent dispatched to an agent its dispatchTo
	// setting doesn't list.
	ErrForbidden = agentproto.Class(agentproto.ErrPermission, "an agent may dispatch tasks only to itself and the agents its dispatchTo setting lists")
	// ErrEmptyTask: the task text is empty.
	ErrEmptyTask = agentproto.Class(agentproto.ErrInvalid, "the task is empty")
	// ErrBusy: the agent already has MaxRunning tasks running.
	ErrBusy = agentproto.Class(agentproto.ErrBusy, "too many tasks running")
)

// MaxTaskLen bounds a task's text.
const MaxTaskLen = 64 << 10

// MaxRunning bounds the tasks one agent has running in one process.
const MaxRunning = 3

// Bounds of dispatching to other agents, so that agents allowed to
// dispatch to each other can't loop or fan out without end:
// MaxDispatchDepth bounds a chain (alice → bob → carol is depth 2), and
// MaxDispatchedRunning the tasks one agent has dispatched to others that
// are still running (each target also keeps its own MaxRunning).
const (
	MaxDispatchDepth     = 3
	MaxDispatchedRunning = 3
)

// Model is the chat completions client (inference.Client).
type Model interface {
	Complete(ctx context.Context, req inference.Request, onDelta func(string)) (inference.Message, error)
}

// Budget bounds one task.
type Budget struct {
	MaxSteps int           // model calls
	Timeout  time.Duration // wall time
}

// Options configure a TaskRunner.
type Options struct {
	// Env lists the agents' tools.
	Env *tools.Env
	// Tools runs them; nil means Env. A runner outside the VM's owner
	// process passes the owner's, so its calls count against the same
	// limits as every other transport's.
	Tools tools.Invoker
	// Hide, when set, names tools of Env the runner neither offers the
	// model nor runs (the owner's secret tools: a task has nobody to ask).
	Hide   func(tool string) bool
	Agents *agents.Registry
	Model  Model
	Store  *Store
	// Budget is read when a task starts.
	Budget func() Budget
	// Ready, when set, says why the model can't be used (not configured),
	// so a dispatch fails at once instead of as a failed task.
	Ready func() error
	// CancelPoll is how often a running task checks for a cancel request
	// from another process; default 500 ms.
	CancelPoll time.Duration
	Logf       func(string, ...any)
	// Redactor, when set, scrubs the agent's secret values from
	// everything a task keeps (its record, what onUpdate and log lines
	// get) and everything sent to the model, on top of the tools'
	// own scrubbing of their envelopes.
	Redactor tools.Redactor
}

// TaskRunner works dispatched tasks: each runs the agent's model loop,
// its tool calls going to Options.Tools.
type TaskRunner struct {
	o Options

	mu      sync.Mutex
	running map[string]*live // by task id
	closed  bool
}

type live struct {
	agent  string
	by     string // the dispatching agent, when another
	depth  int
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// New returns a TaskRunner.
func New(o Options) *TaskRunner {
	if o.CancelPoll <= 0 {
		o.CancelPoll = 500 * time.Millisecond
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Tools == nil {
		o.Tools = o.Env
	}
	return &TaskRunner{o: o, running: map[string]*live{}}
}

// Store is the task store.
func (r *TaskRunner) Store() *Store { return r.o.Store }

// Causes of a task's end other than its own.
var (
	errCancelled = errors.New("cancelled")
	errShutdown  = errors.New("the app stopped")
)

// Dispatch starts a task from the guest: caller (an agent's slug) may
// dispatch to itself (target empty or its own id, slug or name) and to
// the agents its dispatchTo setting lists, by id, slug or name. A task for
// another agent runs as that agent, with its settings and limits, and is
// visible to both. Chains and fan-out are bounded (MaxDispatchDepth,
// MaxDispatchedRunning).
func (r *TaskRunner) Dispatch(caller, target, task string) (Task, error) {
	r.o.Agents.Reload()
	a, err := r.o.Agents.GetSlug(caller)
	if err != nil {
		return Task{}, fmt.Errorf("%w: %s is not an agent of this app", ErrForbidden, caller)
	}
	if target == "" {
		return r.start(a, task, "dispatch", "", a.Slug, nil)
	}
	t, err := r.o.Agents.Get(target)
	if err == nil && t.ID == a.ID {
		return r.start(a, task, "dispatch", "", a.Slug, nil)
	}
	// An unknown agent gets the same answer as one not allowed, so the
	// setting is also what lets an agent learn who exists.
	if err != nil || !slices.Contains(a.DispatchTo, t.ID) {
		return Task{}, fmt.Errorf("%w: %s may not dispatch to %q; the user allows it with `osaurus-sandbox agent set %s dispatchTo NAME`",
			ErrForbidden, a.Slug, target, a.Slug)
	}
	return r.start(t, task, "dispatch", a.Slug, a.Slug, nil)
}

// Start begins working a task for agent ref in the background; onUpdate,
// when set, gets the task after every change.
func (r *TaskRunner) Start(ref, task, source string, onUpdate func(Task)) (Task, error) {
	// Another process (the CLI, the window) may have changed the agents.
	r.o.Agents.Reload()
	a, err := r.o.Agents.Get(ref)
	if err != nil {
		return Task{}, err
	}
	return r.start(a, task, source, "", "", onUpdate)
}

// start begins a task as a; by is the agent that dispatched it, when
// another one, and from the agent whose command dispatched it (empty for
// the user). A task continues the chain of from's deepest running task
// (one of them is what dispatched), one deeper when it goes to another
// agent, so a loop through self-dispatches is bounded too.
func (r *TaskRunner) start(a agents.Agent, task, source, by, from string, onUpdate func(Task)) (Task, error) {
	task = strings.TrimSpace(task)
	switch {
	case task == "":
		return Task{}, fmt.Errorf("%w: say what the agent should do", ErrEmptyTask)
	case len(task) > MaxTaskLen:
		return Task{}, fmt.Errorf("%w: the task is %d bytes, the limit is %d", ErrEmptyTask, len(task), MaxTaskLen)
	}
	if r.o.Ready != nil {
		if err := r.o.Ready(); err != nil {
			return Task{}, err
		}
	}
	task = r.scrub(a.Slug, task)
	now := time.Now().UTC()
	t := Task{ID: newID(), Agent: a.Slug, Task: task, Source: source, State: Running, Created: now, Updated: now, Steps: []Step{}, PID: os.Getpid(), DispatchedBy: by}
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &live{agent: a.Slug, by: by, cancel: cancel, done: make(chan struct{})}
	r.mu.Lock()
	n, dispatched, depth := 0, 0, 0
	for _, o := range r.running {
		if o.agent == a.Slug {
			n++
		}
		if by != "" && o.by == by {
			dispatched++
		}
		if from != "" && o.agent == from {
			depth = max(depth, o.depth)
		}
	}
	if by != "" {
		depth++
	}
	l.depth, t.Depth = depth, depth
	switch {
	case r.closed:
		r.mu.Unlock()
		cancel(nil)
		return Task{}, errShutdown
	case n >= MaxRunning:
		r.mu.Unlock()
		cancel(nil)
		return Task{}, fmt.Errorf("%w: %s already has %d tasks running; wait for one or cancel it", ErrBusy, a.Slug, n)
	case depth > MaxDispatchDepth:
		r.mu.Unlock()
		cancel(nil)
		return Task{}, fmt.Errorf("%w: this would be the %d-th dispatch to another agent in a chain, over the limit of %d (runner.MaxDispatchDepth); do the work yourself", ErrBusy, depth, MaxDispatchDepth)
	case dispatched >= MaxDispatchedRunning:
		r.mu.Unlock()
		cancel(nil)
		return Task{}, fmt.Errorf("%w: %s already has %d tasks it dispatched to other agents running (runner.MaxDispatchedRunning); wait for one", ErrBusy, by, dispatched)
	}
	r.running[t.ID] = l
	r.mu.Unlock()
	// Bound the agent's records before adding one (MaxTasksPerAgent).
	if err := r.o.Store.Prune(a.Slug, MaxTasksPerAgent-1); err != nil {
		r.o.Logf("runner: pruning %s's old tasks: %v", a.Slug, err)
	}
	if err := r.o.Store.Save(t); err != nil {
		r.forget(t.ID)
		cancel(nil)
		return Task{}, err
	}
	go func() {
		defer close(l.done)
		defer r.forget(t.ID)
		defer cancel(nil)
		r.work(ctx, a, t, onUpdate)
	}()
	return t, nil
}

func (r *TaskRunner) forget(id string) {
	r.mu.Lock()
	delete(r.running, id)
	r.mu.Unlock()
}

// Run works a task in the foreground until it ends or ctx does (which
// cancels it).
func (r *TaskRunner) Run(ctx context.Context, ref, task, source string, onUpdate func(Task)) (Task, error) {
	t, err := r.Start(ref, task, source, onUpdate)
	if err != nil {
		return t, err
	}
	select {
	case <-ctx.Done():
		r.Cancel(t.ID)
	case <-r.doneOf(t.ID):
	}
	<-r.doneOf(t.ID)
	return r.o.Store.Get(t.ID)
}

func (r *TaskRunner) doneOf(id string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.running[id]; l != nil {
		return l.done
	}
	c := make(chan struct{})
	close(c)
	return c
}

// Wait waits up to d for a task to finish and returns it as it is then.
// Tasks of other processes are not waited for.
func (r *TaskRunner) Wait(ctx context.Context, id string, d time.Duration) (Task, error) {
	if d > 0 {
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-r.doneOf(id):
		case <-tm.C:
		case <-ctx.Done():
		}
	}
	return r.o.Store.Get(id)
}

// Cancel stops a task: at once when this process works it, else through
// the store for the process that does.
func (r *TaskRunner) Cancel(id string) (Task, error) {
	r.mu.Lock()
	l := r.running[id]
	r.mu.Unlock()
	if l != nil {
		l.cancel(errCancelled)
		<-l.done
		return r.o.Store.Get(id)
	}
	return r.o.Store.RequestCancel(id)
}

// Recover marks tasks left running by an earlier process interrupted.
// The owner calls it when it starts.
func (r *TaskRunner) Recover() {
	ts, _ := r.o.Store.List("")
	for _, t := range ts {
		r.mu.Lock()
		_, mine := r.running[t.ID]
		r.mu.Unlock()
		// The pid is ours but the task isn't: the pid was reused.
		if t.State == Running && t.PID == os.Getpid() && !mine {
			r.o.Store.interrupt(&t, "the app restarted before the task finished")
		}
	}
}

// Close interrupts every running task and waits for them to be saved.
func (r *TaskRunner) Close() {
	r.mu.Lock()
	r.closed = true
	var ls []*live
	for _, l := range r.running {
		ls = append(ls, l)
	}
	r.mu.Unlock()
	for _, l := range ls {
		l.cancel(errShutdown)
		<-l.done
	}
}

// systemPrompt is a task's system prompt; skill appends the Sandbox Plugin
// Creator skill (tools.Toolset.PluginCreatorSkill).
func systemPrompt(a agents.Agent, skill bool) string {
	p := basePrompt(a)
	if skill {
		p += "\n\n" + tools.PluginCreatorSkillText()
	}
	return p
}

func basePrompt(a agents.Agent) string {
	return "You are " + a.Name + ", an agent working in an isolated Linux VM (the Osaurus sandbox) as the Linux user " + a.User() +
		". Your home is " + a.Home() + "; /workspace/shared is shared with other agents. Use the sandbox_* tools to do the task. " +
		"Every tool returns a JSON envelope: {ok, result, warnings} or {ok: false, kind, message}; read the message and fix the call. " +
		"When the task is done, reply with a short summary of what you did and no tool call."
}

// work is the loop of one task.
func (r *TaskRunner) work(ctx context.Context, a agents.Agent, t Task, onUpdate func(Task)) {
	b := Budget{MaxSteps: 20, Timeout: 10 * time.Minute}
	if r.o.Budget != nil {
		b = r.o.Budget()
	}
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, b.Timeout, fmt.Errorf("the time budget of %s ran out (runnerTimeoutSeconds)", b.Timeout))
	defer cancelTimeout()
	go r.watchCancel(ctx, t.ID)

	save := func() {
		t = r.scrubTask(t)
		t.Updated = time.Now().UTC()
		if err := r.o.Store.Save(t); err != nil {
			r.o.Logf("runner: saving task %s: %v", t.ID, err)
		}
		if onUpdate != nil {
			onUpdate(t.clone())
		}
	}
	finish := func(state, answer, errMsg string) {
		t.State, t.Answer, t.Error = state, answer, errMsg
		save()
		os.Remove(r.o.Store.cancelFile(t.ID))
	}
	ended := func() bool {
		if ctx.Err() == nil {
			return false
		}
		cause := context.Cause(ctx)
		switch {
		case errors.Is(cause, errCancelled):
			finish(Cancelled, "", "cancelled")
		case errors.Is(cause, errShutdown):
			finish(Interrupted, "", "the app stopped before the task finished")
		default:
			finish(Failed, "", cause.Error())
		}
		return true
	}
	// A task is a new conversation: a new turn for maxCommandsPerTurn.
	r.o.Tools.EndTurn(ctx, a.ID)
	skill := r.o.Env.Toolset(a).PluginCreatorSkill() && (r.o.Hide == nil || !r.o.Hide("sandbox_plugin_register"))
	msgs := []inference.Message{{Role: "system", Content: systemPrompt(a, skill)}, {Role: "user", Content: t.Task}}
	for n := 1; ; n++ {
		if ended() {
			return
		}
		if n > b.MaxSteps {
			finish(Failed, "", fmt.Sprintf("the step budget of %d model calls ran out before the model gave an answer (runnerMaxSteps)", b.MaxSteps))
			return
		}
		// The agent's settings as they are now: a gate turned off in the
		// meantime holds from this step.
		r.o.Agents.Reload()
		cur, err := r.o.Agents.Get(a.ID)
		if err != nil {
			finish(Failed, "", "the agent was removed")
			return
		}
		ts := r.o.Env.Toolset(cur)
		var specs []inference.Tool
		for _, sp := range ts.List() {
			if r.o.Hide != nil && r.o.Hide(sp.Name) {
				continue
			}
			specs = append(specs, inference.Tool{Type: "function", Function: inference.Function{Name: sp.Name, Description: sp.Description, Parameters: sp.InputSchema}})
		}
		m, err := r.o.Model.Complete(ctx, inference.Request{Messages: r.scrubMessages(a.Slug, msgs), Tools: specs}, nil)
		if ended() {
			return
		}
		if err != nil {
			finish(Failed, "", err.Error())
			return
		}
		// What the model said is kept and sent back to it: scrubbed once
		// here, so neither sees a value the model echoed.
		m.Content = r.scrub(a.Slug, m.Content)
		for i := range m.ToolCalls {
			m.ToolCalls[i].Function.Arguments = r.scrubJSON(a.Slug, m.ToolCalls[i].Function.Arguments)
		}
		st := Step{N: n, Time: time.Now().UTC(), Content: m.Content}
		for _, c := range m.ToolCalls {
			st.ToolCalls = append(st.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		t.Steps = append(t.Steps, st)
		if len(m.ToolCalls) == 0 {
			finish(Done, m.Content, "")
			return
		}
		save()
		msgs = append(msgs, inference.Message{Role: "assistant", Content: m.Content, ToolCalls: m.ToolCalls})
		for i, c := range m.ToolCalls {
			var env envelope.Envelope
			args := json.RawMessage(c.Function.Arguments)
			if strings.TrimSpace(c.Function.Arguments) == "" {
				args = json.RawMessage("{}")
			}
			switch {
			case r.o.Hide != nil && r.o.Hide(c.Function.Name):
				env = envelope.Failf(c.Function.Name, envelope.ToolNotFound, "there is no tool %s in a task", c.Function.Name)
			case !json.Valid(args):
				env = envelope.Fail(c.Function.Name, envelope.InvalidArgs, "the arguments are not valid JSON; send a JSON object")
			default:
				env = r.o.Tools.RunTool(ctx, cur, c.Function.Name, args)
			}
			res := env.Scrub(func(s string) string { return r.scrub(a.Slug, s) }).JSON()
			tc := &t.Steps[len(t.Steps)-1].ToolCalls[i]
			tc.Result, tc.OK, tc.Done = res, !env.IsError(), true
			save()
			msgs = append(msgs, inference.Message{Role: "tool", ToolCallID: c.ID, Content: res})
			if ended() {
				return
			}
		}
	}
}

// watchCancel ends a task when another process asks to cancel it.
func (r *TaskRunner) watchCancel(ctx context.Context, id string) {
	tk := time.NewTicker(r.o.CancelPoll)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			if r.o.Store.cancelRequested(id) {
				r.mu.Lock()
				l := r.running[id]
				r.mu.Unlock()
				if l != nil {
					l.cancel(errCancelled)
				}
				return
			}
		}
	}
}

// scrub replaces agent's secret values in text.
func (r *TaskRunner) scrub(agent, text string) string {
	if r.o.Redactor == nil || text == "" {
		return text
	}
	return r.o.Redactor.Redact(agent, text)
}

// scrubJSON scrubs text that is usually JSON (tool-call arguments, an
// envelope): its strings decoded, so a value JSON escapes (a quote, a
// backslash) is found too, then the text as a whole. Text with nothing
// to scrub keeps its form.
func (r *TaskRunner) scrubJSON(agent, text string) string {
	if r.o.Redactor == nil || text == "" {
		return text
	}
	var v any
	if json.Unmarshal([]byte(text), &v) == nil {
		f := func(s string) string { return r.scrub(agent, s) }
		before, _ := json.Marshal(envelope.ScrubValue(v, func(s string) string { return s }))
		after, _ := json.Marshal(envelope.ScrubValue(v, f))
		if string(before) != string(after) {
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if enc.Encode(envelope.ScrubValue(v, f)) == nil {
				text = strings.TrimSuffix(b.String(), "\n")
			}
		}
	}
	return r.scrub(agent, text)
}

// scrubTask scrubs every text of a task record.
func (r *TaskRunner) scrubTask(t Task) Task {
	if r.o.Redactor == nil {
		return t
	}
	f := func(s string) string { return r.scrub(t.Agent, s) }
	t.Task, t.Answer, t.Error = f(t.Task), f(t.Answer), f(t.Error)
	for i := range t.Steps {
		st := &t.Steps[i]
		st.Content = f(st.Content)
		for j := range st.ToolCalls {
			c := &st.ToolCalls[j]
			c.Arguments, c.Result = r.scrubJSON(t.Agent, c.Arguments), r.scrubJSON(t.Agent, c.Result)
		}
	}
	return t
}

// scrubMessages is msgs as sent to the model: every text scrubbed.
func (r *TaskRunner) scrubMessages(agent string, msgs []inference.Message) []inference.Message {
	if r.o.Redactor == nil {
		return msgs
	}
	out := make([]inference.Message, len(msgs))
	for i, m := range msgs {
		m.Content = r.scrub(agent, m.Content)
		if len(m.ToolCalls) > 0 {
			cs := slices.Clone(m.ToolCalls)
			for j := range cs {
				cs[j].Function.Arguments = r.scrubJSON(agent, cs[j].Function.Arguments)
			}
			m.ToolCalls = cs
		}
		out[i] = m
	}
	return out
}
