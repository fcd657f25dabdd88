package hostcli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

// runningOwner makes the test process the owner of a fresh data folder
// (host.OpenData: the real Host, no VM), with agent alice, as `serve` or
// the window would be.
func runningOwner(t *testing.T) (*host.Host, config.Paths) {
	t.Helper()
	home, err := os.MkdirTemp("", "ow") // short: the control socket is in it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	t.Setenv(config.HomeEnv, home)
	if _, errOut, code := run(t, "agent", "add", "alice"); code != ExitOK {
		t.Fatal(errOut)
	}
	p := config.Paths{Root: home}
	ctl, err := host.OpenData(context.Background(), p, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctl.Close)
	h := ctl.(*host.Host)
	if h.Memory() == nil || h.EventStore() == nil {
		t.Fatal("the owner opened no memory or event log")
	}
	return h, p
}

// With an owner running, the commands that read or change the memory,
// the event log, the bridge's log and config and the tasks go through its
// control socket: this process never becomes an owner of its own (its
// OpenData fails the test), and a change is in the owner's store as soon
// as the command returns. hostcli links no store package
// (internal/layers TestFrontEndsAreThin), so the socket is its only way
// to them.
func TestDataCommandsGoThroughTheOwner(t *testing.T) {
	h, _ := runningOwner(t)
	ctx := context.Background()
	noSecondOwner := Owner{OpenData: func(context.Context, config.Paths, func(string, ...any)) (api.Controller, error) {
		t.Error("the command opened the data files itself while an owner runs")
		return nil, errors.New("not while an owner runs")
	}}
	cmd := func(args ...string) (string, string, int) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Main(args, strings.NewReader(""), &out, &errOut, noSecondOwner)
		return out.String(), errOut.String(), code
	}
	e, err := h.Memory().Add(ctx, "alice", "the owner's memory", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.Memory().Add(ctx, "alice", "another", nil)
	if _, err := h.EmitEvent(ctx, control.EventEmit{Agent: "alice", Type: "build.done"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args  []string
		want  string
		after func() error // what the owner's stores show once it returned
	}{
		{[]string{"memory", "list", "--agent", "alice"}, "the owner's memory", nil},
		{[]string{"memory", "search", "--agent", "alice", "owner's"}, "the owner's memory", nil},
		{[]string{"events", "--agent", "alice"}, "build.done", nil},
		{[]string{"agent", "show", "alice"}, "memories:           2 of 5000", nil},
		{[]string{"logs", "--agent", "alice"}, "alice's log is empty", nil},
		{[]string{"memory", "remove", "--agent", "alice", strconv.FormatInt(e.ID, 10)}, "removed entry", func() error {
			if n, err := h.Memory().Count(ctx, "alice"); n != 1 || err != nil {
				return errors.New("the owner still has the entry: " + strconv.Itoa(n))
			}
			return nil
		}},
		{[]string{"memory", "remove", "--agent", "alice", "--all"}, "removed 1 entries", func() error {
			if n, err := h.Memory().Count(ctx, "alice"); n != 0 || err != nil {
				return errors.New("the owner still has entries: " + strconv.Itoa(n))
			}
			return nil
		}},
	} {
		out, errOut, code := cmd(tt.args...)
		if code != ExitOK || !strings.Contains(out, tt.want) {
			t.Errorf("%v: %d %q %q", tt.args, code, out, errOut)
			continue
		}
		if tt.after != nil {
			if err := tt.after(); err != nil {
				t.Errorf("%v: %v", tt.args, err)
			}
		}
	}
}
