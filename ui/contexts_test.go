package ui

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/remotes"
)

// shortDir is a temporary folder short enough for a control socket.
func shortDir(t *testing.T, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// farBox is a context "box" whose ssh runs this test binary's real
// dial-stdio (TestMain's standin-far) on data folder dir: the far side is
// this machine with a data folder of its own. The stand-in ssh writes
// each far process's pid to the pids file (it execs it: killing the pid
// cuts the link), and fails as ssh does when the cut file exists.
func farBox(t *testing.T, dir string) (st remotes.Store, pids, cut string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	pids, cut = filepath.Join(bin, "pids"), filepath.Join(bin, "cut")
	script := "#!/bin/sh\nfor a; do last=$a; done\n" +
		"if [ -e " + cut + " ]; then echo 'ssh: connect to host box port 22: Connection refused' >&2; exit 255; fi\n" +
		"echo $$ >> " + pids + "\neval \"set -- $last\"\nexec \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "ssh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	st = remotes.Store{Path: filepath.Join(t.TempDir(), "contexts.json")}
	rc := remotes.Context{Name: "box", URL: "ssh://me@box", DataDir: dir, Command: remotes.ShellQuote(self) + " standin-far"}
	if err := st.Add(rc); err != nil {
		t.Fatal(err)
	}
	return st, pids, cut
}

// addAgent adds name through the owner ctl.
func addAgent(t *testing.T, ops AgentOps, name string) {
	t.Helper()
	if _, err := ops.AddAgent(context.Background(), control.AgentAddRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
}

// The window's context picker: it lists this machine and contexts.json's
// contexts; choosing the remote one shows the far side's agents (never
// this machine's) with its name in the label and title, its settings,
// projects and ports are the far side's, and the command line's
// current context is not changed. A cut link shows the lost state, and
// Reconnect brings the window back; choosing local again shows this
// machine's agents.
func TestWindowContextPicker(t *testing.T) {
	old := linkPoll
	linkPoll = 100 * time.Millisecond
	t.Cleanup(func() { linkPoll = old })
	local, far := shortDir(t, "loc"), shortDir(t, "far")
	st, pids, cut := farBox(t, far)

	farCtl, err := host.OpenData(context.Background(), config.Paths{Root: far}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(farCtl.Close)
	addAgent(t, farCtl, "alice")
	localCtl, err := host.OpenData(context.Background(), config.Paths{Root: local}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(localCtl.Close)
	addAgent(t, localCtl, "carol")
	lb, err := NewBackend(context.Background(), localCtl, config.Paths{Root: local})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lb.Close)
	localSess := &Session{Backend: lb, Registry: localCtl.(interface{ Registry() *agents.Registry }).Registry()}
	opened := 0
	open := func(ctx context.Context, name string) (*Session, error) {
		if name == remotes.Local {
			return localSess, nil
		}
		rc, err := st.Get(name)
		if err != nil {
			return nil, err
		}
		opened++
		return OpenRemote(ctx, rc, config.Paths{Root: local})
	}

	a := test.NewTempApp(t)
	win := a.NewWindow("")
	var sw *switcher
	lockedDo(func() {
		sw = newSwitcher(a, win, lockedDo, st, open)
		sw.show(remotes.Local, localSess)
	})
	t.Cleanup(func() { lockedDo(func() { sw.close() }) })
	agentNames := func() []string {
		var out []string
		lockedDo(func() {
			if sw.w == nil {
				return
			}
			sw.w.Agents.refresh()
			for _, a := range sw.w.Agents.items {
				out = append(out, a.Name)
			}
		})
		return out
	}
	lockedDo(func() {
		if !slices.Equal(sw.Picker.Options, []string{"local", "box"}) || sw.Picker.Selected != "local" {
			t.Errorf("picker: %v, %q selected; want local and box, local", sw.Picker.Options, sw.Picker.Selected)
		}
		if !strings.HasPrefix(sw.Label.Text, "local — this machine") {
			t.Errorf("label %q", sw.Label.Text)
		}
	})
	if got := agentNames(); !slices.Equal(got, []string{"carol"}) {
		t.Fatalf("local agents %v, want carol", got)
	}

	lockedDo(func() { sw.Picker.SetSelected("box") })
	eventually(t, "the window of box", func() bool {
		return sw.name == "box" && sw.w != nil
	})
	lockedDo(func() {
		if sw.Label.Text != "box — ssh://me@box" {
			t.Errorf("label %q, want box — ssh://me@box", sw.Label.Text)
		}
		if title := win.Title(); !strings.Contains(title, "box (ssh://me@box)") {
			t.Errorf("title %q names no context", title)
		}
	})
	if got := agentNames(); !slices.Equal(got, []string{"alice"}) {
		t.Fatalf("the window of box lists %v, want the far side's alice only", got)
	}
	lockedDo(func() {
		if sw.w.Work.Projects.far == nil || sw.w.Work.Ports.remote == nil {
			t.Error("the Projects and Ports tabs of box are not the far side's")
		}
		if sw.w.Agents.FarConnect == nil {
			t.Error("the Connect card of box does not say its entries run through the context")
		}
	})
	// The settings are the far side's, read through its owner.
	eventually(t, "the settings of box", func() bool {
		c := sw.w.Container
		return !c.Save.Disabled() && c.Saved.Text == "" && c.Reload != nil
	})
	if f, err := st.Load(); err != nil || f.Current != "" {
		t.Errorf("the picker changed the current context: %q, %v", f.Current, err)
	}

	// The link is cut, and ssh can't reach box again.
	if err := os.WriteFile(cut, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			syscall.Kill(pid, syscall.SIGKILL) // the far dial-stdio this test started
		}
	}
	eventually(t, "the lost state", func() bool {
		return strings.Contains(sw.LostText.Text, "was lost") && sw.w == nil
	})
	lockedDo(func() {
		if !strings.Contains(sw.LostText.Text, "Connection refused") || !strings.Contains(sw.Label.Text, "disconnected") {
			t.Errorf("lost state: %q, label %q", sw.LostText.Text, sw.Label.Text)
		}
	})
	os.Remove(cut)
	tap(sw.Reconnect)
	eventually(t, "the window of box again", func() bool {
		return sw.w != nil && sw.name == "box"
	})
	if got := agentNames(); !slices.Equal(got, []string{"alice"}) || opened != 2 {
		t.Fatalf("after Reconnect: %v (%d opens)", got, opened)
	}

	lockedDo(func() { sw.Picker.SetSelected("local") })
	eventually(t, "the local window", func() bool {
		return sw.name == "local" && sw.w != nil
	})
	if got := agentNames(); !slices.Equal(got, []string{"carol"}) {
		t.Fatalf("back on local: %v, want carol", got)
	}
}
