package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/inference"
	"github.com/osaurus/osaurus-sandbox/internal/scriptedmodel"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// runnerSecret has a quote, so JSON (tool-call arguments, envelopes, the
// task record) escapes it.
const runnerSecret = `hunter2"Zx9Qw8Lp`

// showsSecret reports whether s holds runnerSecret, raw or JSON-escaped.
func showsSecret(s string) bool {
	esc, _ := json.Marshal(runnerSecret)
	return strings.Contains(s, runnerSecret) || strings.Contains(s, strings.Trim(string(esc), `"`)) || strings.Contains(s, "Zx9Qw8Lp")
}

type oneSecret struct{}

func (oneSecret) Redact(_, s string) string {
	return secrets.ScrubValues(map[string]string{"TOKEN": runnerSecret}, s)
}

// leakyTools answers every call with a failure quoting the secret, as an
// owner process in another version, or one that failed mid-call, might.
type leakyTools struct{}

func (leakyTools) RunTool(_ context.Context, _ agents.Agent, name string, _ json.RawMessage) envelope.Envelope {
	e := envelope.InvalidArg(name, "x"+runnerSecret, "y"+runnerSecret, "timed out: TOKEN="+runnerSecret)
	return e
}
func (leakyTools) EndTurn(context.Context, string) {}

// TestTaskRecordsAndModelRequestsAreScrubbed: whatever carries the
// agent's secret (the task, a tool's failure, the model's own words and
// arguments) is scrubbed from the task record, the live updates, and
// every request to the model server.
func TestTaskRecordsAndModelRequestsAreScrubbed(t *testing.T) {
	f := setup(t)
	f.r.Close()
	f.r = runner.New(runner.Options{
		Env:    tools.NewEnv(tools.Options{Guest: noVM, Agents: f.reg}),
		Tools:  leakyTools{},
		Agents: f.reg,
		Model: &inference.Client{Settings: func() (inference.Settings, error) {
			return inference.Settings{URL: f.model.URL, Model: "scripted"}, nil
		}},
		Store:      f.store,
		Budget:     func() runner.Budget { return f.budget },
		CancelPoll: 20 * time.Millisecond,
		Redactor:   oneSecret{},
	})
	t.Cleanup(f.r.Close)
	f.model.Play(
		scriptedmodel.Turn{Content: "the key is " + runnerSecret, Calls: []scriptedmodel.Call{
			{Name: "sandbox_list_directory", Args: fmt.Sprintf(`{"path":%q}`, runnerSecret)}}},
		scriptedmodel.Turn{Content: "done; it was " + runnerSecret},
	)
	var updates []runner.Task
	task, err := f.r.Run(context.Background(), "alice", "use "+runnerSecret, "cli", func(t runner.Task) { updates = append(updates, t) })
	if err != nil {
		t.Fatal(err)
	}
	if task.State != runner.Done {
		t.Fatalf("task %+v", task)
	}
	b, err := os.ReadFile(filepath.Join(f.store.Dir, task.ID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if showsSecret(string(b)) || !strings.Contains(string(b), "[REDACTED:TOKEN]") {
		t.Errorf("task record:\n%s", b)
	}
	for _, u := range updates {
		if ub, _ := json.Marshal(u); showsSecret(string(ub)) {
			t.Errorf("live update shows the secret: %s", ub)
		}
	}
	reqs := f.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	for i, r := range reqs {
		if rb, _ := json.Marshal(r); showsSecret(string(rb)) {
			t.Errorf("model request %d shows the secret: %s", i, rb)
		}
	}
}

// TestTaskRecordsAreBoundedPerAgent: an agent's finished tasks beyond
// MaxTasksPerAgent are forgotten oldest first; running ones and other
// agents' stay.
func TestTaskRecordsAreBoundedPerAgent(t *testing.T) {
	s := &runner.Store{Dir: t.TempDir()}
	base := time.Now().UTC()
	id := func(i int) string { return fmt.Sprintf("%016x", i+1) }
	for i := range runner.MaxTasksPerAgent + 10 {
		st := runner.Done
		if i == 0 {
			st = runner.Running // the oldest still runs: kept
		}
		if err := s.Save(runner.Task{ID: id(i), Agent: "alice", State: st, Created: base.Add(time.Duration(i) * time.Second), PID: os.Getpid()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Save(runner.Task{ID: id(999), Agent: "bob", State: runner.Done, Created: base}); err != nil {
		t.Fatal(err)
	}
	if err := s.Prune("alice", runner.MaxTasksPerAgent-1); err != nil {
		t.Fatal(err)
	}
	ts, _ := s.List("alice")
	if len(ts) != runner.MaxTasksPerAgent-1 || ts[len(ts)-1].ID != id(0) || ts[0].ID != id(runner.MaxTasksPerAgent+9) {
		t.Errorf("after pruning alice has %d tasks, oldest %s", len(ts), ts[len(ts)-1].ID)
	}
	if bs, _ := s.List("bob"); len(bs) != 1 {
		t.Errorf("bob's tasks: %d", len(bs))
	}
}
