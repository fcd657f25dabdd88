package ui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

func TestTasksTab(t *testing.T) {
	b := newFake(t)
	b.noOwner = true // its task runner would take the task as its own, interrupted
	store := &runner.Store{Dir: filepath.Join(b.paths.Root, "tasks")}
	now := time.Now()
	// A task of a live process (this one): it shows as running.
	task := runner.Task{ID: "0123456789abcdef", Agent: "alice", Task: "create hello.py", Source: "dispatch", State: runner.Running,
		Created: now, Updated: now, PID: os.Getpid(), Steps: []runner.Step{{N: 1, Content: "writing it", ToolCalls: []runner.ToolCall{
			{ID: "c1", Name: "sandbox_write_file", Arguments: `{"path":"hello.py"}`, Result: `{"ok":true}`, OK: true, Done: true}}}}}
	if err := store.Save(task); err != nil {
		t.Fatal(err)
	}
	w, _ := newTestWindow(t, b)
	tt := w.Tasks
	lockedDo(func() {
		if len(tt.tasks) != 1 {
			t.Fatalf("tasks listed: %d", len(tt.tasks))
		}
		tt.List.Select(0)
		if !strings.Contains(tt.Detail.Text, "sandbox_write_file") || !strings.Contains(tt.Detail.Text, "step 1: writing it") || tt.Cancel.Disabled() {
			t.Errorf("detail %q, cancel disabled %v", tt.Detail.Text, tt.Cancel.Disabled())
		}
	})
	// A new step arrives: it shows on the next refresh.
	task.Steps = append(task.Steps, runner.Step{N: 2, Content: "done"})
	task.State, task.Answer, task.Updated = runner.Done, "Created hello.py.", now.Add(time.Second)
	if err := store.Save(task); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the answer to show", func() bool { return strings.Contains(tt.Detail.Text, "answer: Created hello.py.") })
	lockedDo(func() {
		if !tt.Cancel.Disabled() {
			t.Error("Cancel enabled for a finished task")
		}
	})

	// Settings: an invalid URL is refused with the setting named; a valid
	// one is saved.
	lockedDo(func() {
		tt.URL.SetText("ftp://nope")
		test.Tap(tt.Save)
		if !strings.Contains(tt.Saved.Text, "inferenceUrl") {
			t.Errorf("bad URL: %q", tt.Saved.Text)
		}
		tt.URL.SetText("http://127.0.0.1:11434/v1")
		tt.Model.SetText("llama3.2")
		test.Tap(tt.Save)
	})
	cfg, err := config.LoadSandbox(b.paths.SandboxJSON())
	if err != nil || cfg.InferenceURL != "http://127.0.0.1:11434/v1" || cfg.InferenceModel != "llama3.2" {
		t.Errorf("saved settings: %+v %v", cfg, err)
	}
}
