package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/inference"
	"github.com/osaurus/osaurus-sandbox/internal/scriptedmodel"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

func TestDispatch(t *testing.T) {
	dir := t.TempDir()
	reg, err := agents.Open(filepath.Join(dir, "agents.json"))
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := reg.Add("alice")
	bobA, _ := reg.Add("bob")
	model := scriptedmodel.Start(t, "127.0.0.1:0")
	ready := error(nil)
	run := runner.New(runner.Options{
		Env:    tools.NewEnv(tools.Options{Guest: func(context.Context) (*agentproto.Client, error) { return nil, errors.New("stopped") }, Agents: reg}),
		Agents: reg,
		Model: &inference.Client{Settings: func() (inference.Settings, error) {
			return inference.Settings{URL: model.URL, Model: "m"}, nil
		}},
		Store:  &runner.Store{Dir: filepath.Join(dir, "tasks")},
		Budget: func() runner.Budget { return runner.Budget{MaxSteps: 3, Timeout: time.Minute} },
		Ready:  func() error { return ready },
	})
	t.Cleanup(run.Close)
	s := bridge.New(bridge.Options{Dispatch: run, Rate: limit.NewRateLimiter(limit.RateOptions{Limits: map[string]int{"dispatch": 4}})})
	t.Cleanup(func() { s.Close() })
	as := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"})
	bob := relay(t, s, agentproto.BridgeRequest{UID: 1002, User: "agent-bob", Agent: "bob"})

	model.Play(scriptedmodel.Turn{Content: "did it"})
	for _, tc := range []struct {
		name, body string
		want       int
		errSub     string
	}{
		{"empty task", `{"task":" "}`, 400, "task"},
		{"no task", `{}`, 400, "task"},
		{"to bob by id", fmt.Sprintf(`{"task":"x","agent_id":%q}`, bobA.ID), 403, "may not dispatch to"},
		{"to bob by name", `{"task":"x","agent_id":"bob"}`, 403, "may not dispatch to"},
		{"to itself", fmt.Sprintf(`{"task":"do it","agent_id":%q}`, alice.ID), 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, m := do(t, as, "POST", "/api/agent/dispatch", tc.body)
			if code != tc.want || (tc.errSub != "" && !strings.Contains(fmt.Sprint(m["error"]), tc.errSub)) {
				t.Fatalf("HTTP %d %v, want %d", code, m, tc.want)
			}
			if code == 200 {
				id, _ := m["task_id"].(string)
				if !runner.ValidID(id) {
					t.Fatalf("task_id %q", id)
				}
				// bob can neither see nor wait on it.
				if code, m := do(t, bob, "GET", "/api/agent/tasks/"+id+"?wait=5", ""); code != 404 {
					t.Errorf("bob reading alice's task: %d %v", code, m)
				}
				code, m := do(t, as, "GET", "/api/agent/tasks/"+id+"?wait=60", "")
				if code != 200 || m["state"] != "done" || m["answer"] != "did it" {
					t.Errorf("waiting: %d %v", code, m)
				}
			}
		})
	}
	if code, _ := do(t, as, "GET", "/api/agent/tasks/../../x", ""); code != 400 {
		t.Errorf("bad id: %d", code)
	}
	// Not configured → 503 naming the setting.
	ready = fmt.Errorf("%w: inferenceUrl is empty", inference.ErrNotConfigured)
	if code, m := do(t, as, "POST", "/api/agent/dispatch", `{"task":"x"}`); code != 503 || !strings.Contains(m["error"].(string), "inferenceUrl") {
		t.Errorf("unconfigured: %d %v", code, m)
	}
	// Quota 4: the 400s cost nothing; to bob by id, by name, to itself
	// and the 503 did. The fifth is refused.
	code, m := do(t, as, "POST", "/api/agent/dispatch", `{"task":"x"}`)
	if code != 429 || !strings.Contains(m["error"].(string), "dispatch") {
		t.Errorf("over quota: %d %v", code, m)
	}
}
