package hostcli

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/internal/scriptedmodel"
	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
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

// `run` works its task in the owner: its runner calls the owner's tools
// (so every call counts against the limits every transport shares) and
// the owner keeps the task's record. The owner here is the real Host of
// a data folder with nothing provisioned, so the tool's answer is the
// owner's own: the VM can't start.
func TestRunWorksTheTaskInTheOwner(t *testing.T) {
	testkeyring.Start(t)
	h, _ := runningOwner(t)
	model := scriptedmodel.Start(t, "127.0.0.1:0",
		scriptedmodel.Turn{Calls: []scriptedmodel.Call{{Name: "sandbox_list_directory", Args: `{}`}}},
		scriptedmodel.Turn{Content: "all done"})
	for _, kv := range [][2]string{{"inferenceUrl", model.URL}, {"inferenceModel", "scripted"}} {
		if _, errOut, code := run(t, "config", "set", kv[0], kv[1]); code != ExitOK {
			t.Fatalf("config set %s: %s", kv[0], errOut)
		}
	}
	out, errOut, code := run(t, "run", "--agent", "alice", "look around")
	if code != ExitOK || !strings.Contains(out, "not provisioned") || !strings.Contains(out, "answer: all done") {
		t.Fatalf("run: %d %q %q", code, out, errOut)
	}
	ts, err := h.Tasks(context.Background(), control.TaskQuery{Agent: "alice"})
	if err != nil || len(ts) != 1 || ts[0].State != runner.Done || ts[0].PID != os.Getpid() {
		t.Errorf("the owner's task records: %+v %v", ts, err)
	}
}
