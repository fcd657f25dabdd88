package ui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
)

// fakeBackend stands in for the sandbox so the window's flows can be
// tested quickly; the real sandbox is covered by the e2e package.
type fakeBackend struct {
	settingsFile
	mu      sync.Mutex
	st      control.Status
	subs    []func(control.Status)
	calls   []string
	provGo  chan struct{} // released by the test to finish a provision
	provErr error         // when set, Provision fails with it at once
	results []diagnostics.Result
	owner   AgentOps // a short-lived owner of the data folder (host.OpenData)
	noOwner bool     // newTestWindow opens none (an owner interrupts running tasks)
}

func (f *fakeBackend) fake() *fakeBackend { return f }

// AgentOps is the test's owner: the window's changes to agents and
// projects go through it, as they go through the app's.
func (f *fakeBackend) AgentOps() AgentOps { return f.owner }

func newFake(t *testing.T) *fakeBackend {
	return &fakeBackend{
		settingsFile: settingsFile{config.Paths{Root: t.TempDir()}},
		st:           control.Status{State: control.NotProvisioned},
		provGo:       make(chan struct{}),
	}
}

func (f *fakeBackend) set(st control.Status) {
	f.mu.Lock()
	f.st = st
	subs := append([]func(control.Status){}, f.subs...)
	f.mu.Unlock()
	for _, fn := range subs {
		fn(st)
	}
}
func (f *fakeBackend) record(c string) { f.mu.Lock(); f.calls = append(f.calls, c); f.mu.Unlock() }
func (f *fakeBackend) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.calls...)
}
func (f *fakeBackend) Status() control.Status { f.mu.Lock(); defer f.mu.Unlock(); return f.st }
func (f *fakeBackend) Subscribe(fn func(control.Status)) func() {
	f.mu.Lock()
	f.subs = append(f.subs, fn)
	f.mu.Unlock()
	return func() {}
}
func (f *fakeBackend) Provision(ctx context.Context) error {
	f.record("provision")
	if f.provErr != nil {
		f.set(control.Status{State: control.NotProvisioned, Reason: "provisioning failed"})
		return f.provErr
	}
	f.set(control.Status{State: control.Provisioning, Progress: &control.Progress{Phase: "rootfs", Done: 25 << 20, Total: 100 << 20}})
	select {
	case <-f.provGo:
		f.set(control.Status{State: control.Stopped})
		return nil
	case <-ctx.Done():
		f.set(control.Status{State: control.NotProvisioned, Reason: "provisioning cancelled"})
		return ctx.Err()
	}
}
func (f *fakeBackend) Start(context.Context) error {
	f.record("start")
	f.set(control.Status{State: control.Running, Since: time.Now(), Driver: "qemu", Accel: "tcg", Distro: "debian"})
	return nil
}
func (f *fakeBackend) Stop(context.Context) error {
	f.record("stop")
	f.set(control.Status{State: control.Stopped})
	return nil
}
func (f *fakeBackend) Reset(context.Context) error  { f.record("reset"); return nil }
func (f *fakeBackend) Remove(context.Context) error { f.record("remove"); return nil }
func (f *fakeBackend) Owner() string                { return "app" }
func (f *fakeBackend) Diagnostics(ctx context.Context, on func(diagnostics.Result)) ([]diagnostics.Result, error) {
	for _, r := range f.results {
		on(r)
	}
	return f.results, nil
}

// uiMu serialises the window's background updates with the test's reads:
// Fyne's test driver runs fyne.Do inline on the calling goroutine.
var uiMu sync.Mutex

func lockedDo(fn func()) {
	uiMu.Lock()
	defer uiMu.Unlock()
	fn()
}

func newTestWindow(t *testing.T, b Backend) (*Window, *agents.Registry) {
	t.Helper()
	a := test.NewTempApp(t)
	var reg *agents.Registry
	if f, ok := b.(interface{ fake() *fakeBackend }); ok && !f.fake().noOwner {
		// The window of the owner: it reads the owner's registry and
		// changes it through the owner; the test's own changes are the
		// owner's.
		f.fake().owner, reg = openOwner(t, f.fake().Paths())
	} else {
		var err error
		if reg, err = agents.Open(filepath.Join(t.TempDir(), "agents.json")); err != nil {
			t.Fatal(err)
		}
	}
	// Under the lock: a previous test's background update may still be
	// measuring text in Fyne's shared caches.
	var w *Window
	lockedDo(func() {
		w = newWindow(a, b, reg, lockedDo)
		w.Win.Resize(fyne.NewSize(900, 760))
		// Connect reads and writes MCP clients' files under a home of
		// the test's own, never the developer's.
		w.Agents.Connect.home = t.TempDir()
	})
	t.Cleanup(w.Close)
	return w, reg
}

// eventually polls cond, letting fyne.Do callbacks run. The bound is
// generous: the window polls files, and CI runs packages side by side on
// two cores.
// lockedTitle is the window's title, read as eventually reads.
func lockedTitle(w *Window) (s string) {
	lockedDo(func() { s = w.Win.Title() })
	return s
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, what, 30*time.Second, 10*time.Millisecond, func() (ok bool) {
		lockedDo(func() { ok = cond() })
		return ok
	})
}

// tapInOverlay taps the button labelled text in the top overlay (a dialog).
func tapInOverlay(t *testing.T, w fyne.Window, text string) {
	t.Helper()
	var top fyne.CanvasObject
	lockedDo(func() { top = w.Canvas().Overlays().Top() })
	if top == nil {
		t.Fatalf("no dialog open")
	}
	var found *widget.Button
	var walk func(o fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		if b, ok := o.(*widget.Button); ok && b.Text == text {
			found = b
		}
		if c, ok := o.(*fyne.Container); ok {
			for _, ch := range c.Objects {
				walk(ch)
			}
		}
		if wd, ok := o.(fyne.Widget); ok {
			if r := test.WidgetRenderer(wd); r != nil {
				for _, ch := range r.Objects() {
					walk(ch)
				}
			}
		}
	}
	lockedDo(func() { walk(top) })
	if found == nil {
		t.Fatalf("no %q button in the dialog", text)
	}
	tap(found)
}

// tap and typeIn act as the user would, under uiMu: the callbacks they run
// change widgets that the window's background updates change too.
func tap(o fyne.Tappable) { lockedDo(func() { test.Tap(o) }) }

func typeIn(e fyne.Focusable, s string) { lockedDo(func() { test.Type(e, s) }) }

func TestProvisionShowsProgressAndCancels(t *testing.T) {
	f := newFake(t)
	w, _ := newTestWindow(t, f)
	c := w.Container
	if c.State.Text != "Not provisioned" || c.Stop.Disabled() == false {
		t.Fatalf("initial: %q, stop enabled=%v", c.State.Text, !c.Stop.Disabled())
	}
	tap(c.Provision)
	eventually(t, "progress", func() bool { return strings.Contains(c.Phase.Text, "rootfs: 25.0 / 100.0 MiB") })
	if c.Progress.Value != 0.25 || c.State.Text != "Provisioning…" || c.Cancel.Disabled() {
		t.Fatalf("during provision: value %v state %q cancel disabled %v", c.Progress.Value, c.State.Text, c.Cancel.Disabled())
	}
	tap(c.Cancel)
	eventually(t, "cancelled", func() bool { return c.State.Text == "Not provisioned" })
	if !strings.Contains(c.Details.Text, "cancelled") {
		t.Fatalf("details after cancel: %q", c.Details.Text)
	}
	// Again, to the end this time.
	tap(c.Provision)
	eventually(t, "provisioning", func() bool { return c.State.Text == "Provisioning…" })
	close(f.provGo)
	eventually(t, "stopped", func() bool { return c.State.Text == "Stopped" })
}

func TestStartAndStop(t *testing.T) {
	f := newFake(t)
	f.st = control.Status{State: control.Stopped}
	w, _ := newTestWindow(t, f)
	c := w.Container
	// The title says the state the window shows (a task bar shows it;
	// the window's e2e test waits on it before each click).
	title := w.Win.Title // under uiMu, which eventually holds
	if got := lockedTitle(w); got != "Osaurus Sandbox — Stopped" {
		t.Fatalf("title %q, want Osaurus Sandbox — Stopped", got)
	}
	tap(c.Start)
	eventually(t, "running", func() bool { return c.State.Text == "Running" })
	eventually(t, "the title to say running", func() bool { return title() == "Osaurus Sandbox — Running" })
	if !strings.Contains(c.Details.Text, "qemu (TCG) · debian guest") || c.Stop.Disabled() || !c.Start.Disabled() {
		t.Fatalf("running: %q stop disabled %v", c.Details.Text, c.Stop.Disabled())
	}
	tap(c.Stop)
	eventually(t, "stopped", func() bool { return c.State.Text == "Stopped" })
	eventually(t, "the title to say stopped", func() bool { return title() == "Osaurus Sandbox — Stopped" })
	if got := f.called(); strings.Join(got, ",") != "start,stop" {
		t.Fatalf("calls %v", got)
	}
}

func TestResourcesSaveAndRestartNote(t *testing.T) {
	f := newFake(t)
	f.st = control.Status{State: control.Running, Since: time.Now()}
	w, _ := newTestWindow(t, f)
	c := w.Container
	if c.CPUs.Selected != "2" || c.Memory.Selected != "2" || c.Network.Selected != "outbound" || !c.AutoStart.Checked {
		t.Fatalf("defaults not shown: %s %s %s %v", c.CPUs.Selected, c.Memory.Selected, c.Network.Selected, c.AutoStart.Checked)
	}
	c.CPUs.SetSelected("4")
	tap(c.Save)
	if !strings.Contains(c.Saved.Text, "Restart required") {
		t.Fatalf("after a CPU change while running: %q", c.Saved.Text)
	}
	cfg, _ := f.Settings()
	if cfg.CPUs != 4 {
		t.Fatalf("saved cpus %d", cfg.CPUs)
	}
	c.AutoStart.SetChecked(false)
	tap(c.Save)
	if c.Saved.Text != "Saved." {
		t.Fatalf("autoStart change: %q", c.Saved.Text)
	}
}

func TestResourceValidationError(t *testing.T) {
	f := newFake(t)
	w, _ := newTestWindow(t, f)
	c := w.Container
	// A value the selects never offer, as a corrupt or hand-edited state
	// might produce: the error names the key and the range.
	c.CPUs.Options = append(c.CPUs.Options, "12")
	c.CPUs.SetSelected("12")
	tap(c.Save)
	if !strings.Contains(c.Saved.Text, "cpus: 12, allowed 1–8") {
		t.Fatalf("validation message %q", c.Saved.Text)
	}
	if cfg, _ := f.Settings(); cfg.CPUs != 2 {
		t.Fatalf("an invalid value was saved: %d", cfg.CPUs)
	}
}

func TestDiagnosticsListUpdates(t *testing.T) {
	f := newFake(t)
	f.st = control.Status{State: control.Running, Since: time.Now()}
	f.results = []diagnostics.Result{
		{Name: "exec", Outcome: diagnostics.Pass, Duration: 250 * time.Millisecond, Detail: "echo round trip ok"},
		{Name: "nat", Outcome: diagnostics.Fail, Duration: time.Second, Detail: "exit 6", Hint: "Check that Network is \"outbound\""},
		{Name: "bridge", Outcome: diagnostics.NotAvailable, Detail: "not available yet", Hint: "not part of this version"},
	}
	w, _ := newTestWindow(t, f)
	c := w.Container
	tap(c.RunDiag)
	text := func() string {
		var s []string
		for _, o := range c.DiagList.Objects {
			s = append(s, o.(*widget.Label).Text)
		}
		return strings.Join(s, "\n")
	}
	eventually(t, "results", func() bool { return strings.Contains(text(), "bridge: – not available") })
	// The run ends by enabling the button again; wait for that too, so no
	// update of this window runs into the next test's.
	eventually(t, "the run's end", func() bool { return !c.RunDiag.Disabled() })
	got := text()
	for _, want := range []string{"exec: ✓ pass (250ms)", "nat: ✗ FAIL (1s) — exit 6", `Hint: Check that Network is "outbound"`, "agent-user: running…"} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnostics list lacks %q:\n%s", want, got)
		}
	}
}

func TestResetConfirmationCancelKeepsEverything(t *testing.T) {
	f := newFake(t)
	f.st = control.Status{State: control.Stopped}
	w, _ := newTestWindow(t, f)
	tap(w.Container.Reset)
	tapInOverlay(t, w.Win, "Cancel")
	if got := f.called(); len(got) != 0 {
		t.Fatalf("cancelled reset still ran: %v", got)
	}
	tap(w.Container.Reset)
	tapInOverlay(t, w.Win, "Reset")
	eventually(t, "reset", func() bool { return len(f.called()) == 1 && f.called()[0] == "reset" })
	if !strings.Contains(ResetWarning, "Kept: workspace, output, agents' homes") {
		t.Fatal("the warning no longer says what is kept")
	}
}

func TestAgentAddEditRemove(t *testing.T) {
	f := newFake(t)
	w, reg := newTestWindow(t, f)
	at := w.Agents
	typeIn(at.NewName, "Data Analyst")
	tap(at.Add)
	list := reg.List()
	if len(list) != 1 || list[0].Slug != "data-analyst" {
		t.Fatalf("agents after add: %+v", list)
	}
	if !strings.Contains(at.Desktop.Text, `"mcp"`) || !strings.Contains(at.CodeHTTP.Text, "Authorization: Bearer ") {
		t.Fatalf("MCP snippets: %q / %q", at.Desktop.Text, at.CodeHTTP.Text)
	}
	oldToken, _ := reg.Token(list[0].ID)
	tap(at.Regenerate)
	if tok, _ := reg.Token(list[0].ID); tok == oldToken || !strings.Contains(at.CodeHTTP.Text, tok) {
		t.Fatal("regenerate did not change the token shown")
	}
	// A bad setting is refused with the field and range.
	at.MaxCmds.SetText("0")
	tap(at.SaveAgent)
	if a, _ := reg.Get(list[0].ID); a.AutonomousExec.MaxCommandsPerTurn != 10 {
		t.Fatalf("invalid value saved: %d", a.AutonomousExec.MaxCommandsPerTurn)
	}
	at.MaxCmds.SetText("25")
	at.Enabled.SetChecked(true)
	if !at.KeepsAwake.Checked {
		t.Fatal("a new agent's background processes keep the VM awake, but the box is clear")
	}
	at.KeepsAwake.SetChecked(false)
	tap(at.SaveAgent)
	if a, _ := reg.Get(list[0].ID); !a.AutonomousExec.Enabled || a.AutonomousExec.MaxCommandsPerTurn != 25 || a.BackgroundKeepsAwake() {
		t.Fatalf("edit not saved: %+v", a.AutonomousExec)
	}
	// The network policy: the field shows the setting; a domain list is
	// stored in canonical form, an address is refused.
	if at.Network.Text != "outbound" {
		t.Fatalf("network shown as %q", at.Network.Text)
	}
	at.Network.SetText("10.0.2.2")
	tap(at.SaveAgent)
	if a, _ := reg.Get(list[0].ID); a.AutonomousExec.Network != "outbound" {
		t.Fatalf("invalid network saved: %q", a.AutonomousExec.Network)
	}
	at.Network.SetText("B.example.com, *.example.org")
	tap(at.SaveAgent)
	if a, _ := reg.Get(list[0].ID); a.AutonomousExec.Network != "*.example.org,b.example.com" || at.Network.Text != "*.example.org,b.example.com" {
		t.Fatalf("network saved as %q, shown as %q", a.AutonomousExec.Network, at.Network.Text)
	}
	// The owner removes it altogether (no VM here: the Linux user waits).
	tap(at.RemoveBtn)
	tapInOverlay(t, w.Win, "Yes")
	eventually(t, "the owner's removal", func() bool {
		return strings.HasPrefix(at.Status.Text, "Removed Data Analyst: the VM is not running")
	})
	if n := len(reg.List()); n != 0 {
		t.Fatalf("%d agents after remove", n)
	}
}

// A home left by a removed agent is never taken silently: adding asks,
// and Adopt home adds the agent with the home given to it.
func TestAgentAddAsksAboutLeftOverHome(t *testing.T) {
	f := newFake(t)
	w, reg := newTestWindow(t, f)
	at := w.Agents
	if err := os.MkdirAll(filepath.Join(f.Paths().Workspace(), "agents", "alice"), 0o700); err != nil {
		t.Fatal(err)
	}
	typeIn(at.NewName, "alice")
	tap(at.Add)
	if at.HomeDialog == nil || len(reg.List()) != 0 {
		t.Fatalf("add over a left-over home: dialog %v, agents %+v", at.HomeDialog, reg.List())
	}
	tap(at.AdoptHome)
	list := reg.List()
	if len(list) != 1 || !list[0].AdoptHome || at.HomeDialog != nil {
		t.Fatalf("after Adopt home: %+v", list)
	}
}

func TestContainerTabRendering(t *testing.T) {
	f := newFake(t)
	f.st = control.Status{State: control.Stopped}
	w, _ := newTestWindow(t, f)
	test.AssertObjectRendersToMarkup(t, "container_stopped.xml", w.Tabs)
}
