package hostcli

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/server"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/internal/scriptedmodel"
	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

func TestTaskCommands(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	if _, _, code := run(t, "agent", "add", "alice"); code != ExitOK {
		t.Fatal("agent add")
	}
	if out, _, code := run(t, "task", "list"); code != ExitOK || !strings.Contains(out, "no tasks yet") {
		t.Errorf("empty list: %d %q", code, out)
	}
	if out, _, code := run(t, "task", "list", "--json"); code != ExitOK || strings.TrimSpace(out) != "[]" {
		t.Errorf("empty list --json: %d %q", code, out)
	}
	st := datadir.TaskStore(config.Paths{Root: home})
	now := time.Now().UTC()
	done := runner.Task{ID: "00000000000000aa", Agent: "alice", Task: "make hello.py", Source: "dispatch", State: runner.Done, Answer: "made it",
		Created: now, Updated: now, Steps: []runner.Step{{N: 1, ToolCalls: []runner.ToolCall{{Name: "sandbox_write_file", Arguments: `{"path":"hello.py"}`, Result: `{"ok":true}`, OK: true, Done: true}}}, {N: 2, Content: "made it"}}}
	// Left running by a process that is gone (pid 0 never exists).
	stale := runner.Task{ID: "00000000000000bb", Agent: "alice", Task: "long one", Source: "cli", State: runner.Running, PID: 0, Created: now.Add(time.Second), Updated: now}
	// Running in a live process (this test): cancel asks it through the store.
	live := runner.Task{ID: "00000000000000cc", Agent: "bob", Task: "bob's", Source: "cli", State: runner.Running, PID: os.Getpid(), Created: now.Add(2 * time.Second), Updated: now}
	for _, tk := range []runner.Task{done, stale, live} {
		if err := st.Save(tk); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code := run(t, "task", "list", "--agent", "alice")
	if code != ExitOK || !strings.Contains(out, "00000000000000aa  done") || !strings.Contains(out, "00000000000000bb  interrupted") || strings.Contains(out, "bob's") {
		t.Errorf("list --agent alice: %d %q", code, out)
	}
	out, _, code = run(t, "task", "show", "00000000000000aa")
	if code != ExitOK || !strings.Contains(out, "sandbox_write_file") || !strings.Contains(out, "answer: made it") {
		t.Errorf("show: %d %q", code, out)
	}
	out, _, code = run(t, "task", "show", "00000000000000aa", "--json")
	var got runner.Task
	if code != ExitOK || json.Unmarshal([]byte(out), &got) != nil || got.Answer != "made it" || len(got.Steps) != 2 {
		t.Errorf("show --json: %d %q", code, out)
	}
	if _, errOut, code := run(t, "task", "show", "../../config/agents"); code != ExitError || !strings.Contains(errOut, "no such task") {
		t.Errorf("show bad id: %d %q", code, errOut)
	}
	if out, _, code := run(t, "task", "cancel", "00000000000000aa"); code != ExitOK || !strings.Contains(out, "already ended: done") {
		t.Errorf("cancel finished: %d %q", code, out)
	}
	if _, _, code := run(t, "task"); code != ExitUsage {
		t.Errorf("task without a subcommand: %d", code)
	}
	if _, _, code := run(t, "run", "no task"); code != ExitUsage {
		t.Errorf("run without --agent: %d", code)
	}
	// run with inference not configured says which setting to change.
	if _, errOut, code := run(t, "run", "--agent", "alice", "do it"); code != ExitError || !strings.Contains(errOut, "inferenceUrl") {
		t.Errorf("run unconfigured: %d %q", code, errOut)
	}
}

// toolOwner stands in for the VM's owner process: it answers tool calls
// and turn ends itself, over the real control protocol.
type toolOwner struct {
	api.Controller // other methods are not called
	mu             sync.Mutex
	calls, turns   []string
}

func (o *toolOwner) Status(context.Context) (api.Status, error) {
	return api.Status{Status: control.Status{State: control.Running}, Owner: "test"}, nil
}

func (o *toolOwner) RunTool(_ context.Context, agentID, tool string, _ json.RawMessage) envelope.Envelope {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, agentID+" "+tool)
	return envelope.OK(tool, map[string]any{"ran": "in the owner"})
}

func (o *toolOwner) EndTurn(_ context.Context, agentID string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.turns = append(o.turns, agentID)
	return nil
}

// `run` works its task with the owner's tools: every call and the turn
// it starts count against the limits every transport shares, not against
// fresh ones of its own.
func TestRunUsesTheOwnersTools(t *testing.T) {
	testkeyring.Start(t)
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	paths := config.Paths{Root: home}
	if _, _, code := run(t, "agent", "add", "alice"); code != ExitOK {
		t.Fatal("agent add")
	}
	reg, err := agents.Open(paths.AgentsJSON())
	if err != nil {
		t.Fatal(err)
	}
	alice, err := reg.Get("alice")
	if err != nil {
		t.Fatal(err)
	}
	model := scriptedmodel.Start(t, "127.0.0.1:0",
		scriptedmodel.Turn{Calls: []scriptedmodel.Call{{Name: "sandbox_list_directory", Args: `{}`}}},
		scriptedmodel.Turn{Content: "all done"})
	for _, kv := range [][2]string{{"inferenceUrl", model.URL}, {"inferenceModel", "scripted"}} {
		if _, errOut, code := run(t, "config", "set", kv[0], kv[1]); code != ExitOK {
			t.Fatalf("config set %s: %s", kv[0], errOut)
		}
	}
	ln, err := server.Listen(paths)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	o := &toolOwner{}
	go (&server.Server{Ctl: o}).Serve(ctx, ln)

	out, errOut, code := run(t, "run", "--agent", "alice", "look around")
	if code != ExitOK || !strings.Contains(out, "in the owner") {
		t.Fatalf("run: %d %q %q", code, out, errOut)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !slices.Equal(o.calls, []string{alice.ID + " sandbox_list_directory"}) || !slices.Equal(o.turns, []string{alice.ID}) {
		t.Errorf("the owner ran %q and ended turns %q", o.calls, o.turns)
	}
}
