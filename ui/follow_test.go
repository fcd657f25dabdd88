package ui

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// The console view shows the guest's log as it grows, with no timer: the
// log (and its folder) may not exist when the window opens.
func TestConsoleFollowsLog(t *testing.T) {
	b := newFake(t)
	w, _ := newTestWindow(t, b)
	log := b.ConsoleLog()
	if err := os.MkdirAll(filepath.Dir(log), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"[    0.000000] Linux version 6.12\n", "Welcome to Debian\n", "login: \n"} {
		f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(line)
		f.Close()
		eventually(t, "the console to show "+line, func() bool { return strings.HasSuffix(w.Container.Console.Text, line) })
	}
}

// A plugin registered, or installed for an agent, by another process (the
// CLI, the owner) appears in the tab: the files are replaced by atomic
// rename, as every write of ours does.
func TestPluginsTabFollowsOtherProcesses(t *testing.T) {
	w, reg, b := newPluginWindow(t)
	pt := w.Plugins
	alice, err := reg.Add("Alice")
	if err != nil {
		t.Fatal(err)
	}
	// Another process's view of the same data dir.
	lib, err := plugins.OpenLibrary(b.paths.PluginsDir())
	if err != nil {
		t.Fatal(err)
	}
	inst := plugins.NewInstalled(b.paths.AgentStateDir())
	ctx := context.Background()
	hello := recipe(t, helloJSON)
	if _, _, err := lib.Save(ctx, hello, plugins.Origin{Kind: plugins.OriginURL, Location: "https://plugins.example.org/hello.json"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the plugin to be listed", func() bool { return pt.index("hello-tools") >= 0 })
	// The agent's folder doesn't exist yet: the tab notices it appear.
	if err := inst.Record(ctx, alice.ID, hello, 1); err != nil {
		t.Fatal(err)
	}
	installed := func() bool {
		i := pt.index("hello-tools")
		if i < 0 {
			return false
		}
		_, sub := pt.row(pt.entries[i])
		return strings.HasSuffix(sub, "installed for Alice")
	}
	eventually(t, "the install to show", installed)
	if err := inst.Forget(ctx, alice.ID, "hello-tools"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the uninstall to show", func() bool { return !installed() })
	if err := lib.Remove(ctx, "hello-tools"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the plugin to go", func() bool { return pt.index("hello-tools") < 0 })
}

// A task whose worker process dies shows as interrupted, though nothing
// writes its file: while a task runs, the tab re-reads now and then.
func TestTasksTabNoticesDeadWorker(t *testing.T) {
	b := newFake(t)
	worker := exec.Command("sleep", "600")
	if err := worker.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	store := &runner.Store{Dir: filepath.Join(b.paths.Root, "tasks")}
	now := time.Now()
	task := runner.Task{ID: "0123456789abcdef", Agent: "alice", Task: "loop", Source: "dispatch", State: runner.Running,
		Created: now, Updated: now, PID: worker.Process.Pid}
	if err := store.Save(task); err != nil {
		t.Fatal(err)
	}
	w, _ := newTestWindow(t, b)
	tt := w.Tasks
	lockedDo(func() {
		if len(tt.tasks) != 1 || tt.tasks[0].State != runner.Running {
			t.Fatalf("tasks listed: %+v", tt.tasks)
		}
	})
	worker.Process.Kill()
	worker.Wait()
	eventually(t, "the task to show as interrupted", func() bool {
		return len(tt.tasks) == 1 && tt.tasks[0].State == runner.Interrupted
	})
}

// The uptime is shown in whole minutes, so a running VM's window redraws
// it once a minute.
func TestUptime(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "less than a minute"},
		{59 * time.Second, "less than a minute"},
		{time.Minute, "1m"},
		{5*time.Minute + 59*time.Second, "5m"},
		{time.Hour, "1h0m"},
		{26*time.Hour + 3*time.Minute + 4*time.Second, "26h3m"},
	} {
		if got := uptime(tt.d); got != tt.want {
			t.Errorf("uptime(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// A running VM's uptime moves on to the next minute by itself.
func TestUptimeTicks(t *testing.T) {
	b := newFake(t)
	w, _ := newTestWindow(t, b)
	b.set(control.Status{State: control.Running, Since: time.Now().Add(-58 * time.Second), Driver: "qemu", Accel: "tcg", Distro: "debian"})
	eventually(t, "the uptime to reach a minute", func() bool { return strings.HasPrefix(w.Container.Details.Text, "Up 1m ·") })
}
