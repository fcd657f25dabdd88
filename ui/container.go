package ui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/internal/builtinimage"
	"github.com/osaurus/osaurus-sandbox/internal/explain"
	"github.com/osaurus/osaurus-sandbox/internal/filewatch"
	"github.com/osaurus/osaurus-sandbox/remotes"
)

// What Reset and Remove delete and keep, shown before either runs.
const (
	ResetWarning  = "Reset deletes the VM's root disk (packages installed in it), kernel and init filesystem, then provisions again.\n\nKept: workspace, output, agents' homes and the download cache."
	RemoveWarning = "Remove deletes every VM file: root disk, kernel, init filesystem and downloads.\n\nKept: workspace, output and agents' homes."
)

// containerTab is the Container tab: state, lifecycle, resources,
// diagnostics, danger zone and console.
type containerTab struct {
	b   Backend
	win fyne.Window
	do  func(func()) // runs UI updates from other goroutines: fyne.Do

	Terminal  *widget.Button // Open Terminal (root): `osaurus-sandbox shell`
	State     *widget.Label
	Details   *widget.Label
	Progress  *widget.ProgressBar
	Phase     *widget.Label
	Provision *widget.Button
	Cancel    *widget.Button
	Start     *widget.Button
	Stop      *widget.Button

	// Glance is the running VM's use at the top of the tab.
	Glance     *glance
	glanceWake chan struct{}
	// First is the first-run view, shown while nothing is provisioned.
	First     *firstRun
	firstCard *widget.Card

	CPUs      *widget.Select
	Memory    *widget.Select
	Network   *widget.Select
	Accel     *widget.Select
	Image     *widget.Entry // imageManifest; empty is the built-in image
	AutoStart *widget.Check
	Save      *widget.Button
	Saved     *widget.Label
	// Reload reads a remote context's settings again (nil for this
	// machine's, whose form is read from the file at each save).
	Reload *widget.Button
	// far is the form of a remote context's settings, read and written
	// through its owner (nil: this machine's sandbox.json).
	far *farForm

	RunDiag  *widget.Button
	DiagList *fyne.Container

	Reset  *widget.Button
	Remove *widget.Button

	// Checkpoints lists the sandbox checkpoints (nil when the owner keeps
	// none): checkpoints.go.
	Checkpoints *checkpointsCard

	Console *widget.Entry
	body    *fyne.Container // the tab's column, laid out again when a part's height changes
	// vmOnly are the cards about a VM that exists: hidden before the first
	// set-up.
	vmOnly []fyne.CanvasObject

	// remote is the context whose sandbox this is (nil: this machine's).
	remote *remotes.Context

	mu     sync.Mutex
	cancel context.CancelFunc // the provision in progress
	since  time.Time
	state  control.State
	// rate is where the current download phase started, for the time
	// left; now is the clock (tests set it).
	rate rateStart
	now  func() time.Time
	// shown wakes followConsole after a status is shown, to time the
	// next change of the uptime.
	shown chan struct{}
}

func choices(lo, hi int) []string {
	var s []string
	for i := lo; i <= hi; i++ {
		s = append(s, strconv.Itoa(i))
	}
	return s
}

func newContainerTab(b Backend, win fyne.Window, do func(func())) *containerTab {
	t := &containerTab{b: b, win: win, do: do, shown: make(chan struct{}, 1), glanceWake: make(chan struct{}, 1), now: time.Now}
	t.Glance = newGlance()
	t.State = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	t.Details = widget.NewLabel("")
	t.Details.Wrapping = fyne.TextWrapWord
	t.Progress = widget.NewProgressBar()
	t.Phase = widget.NewLabel("")
	t.Provision = widget.NewButton("Provision", t.onProvision)
	t.Cancel = widget.NewButton("Cancel", t.onCancel)
	t.Start = widget.NewButton("Start", func() { t.run("Start", b.Start) })
	t.Stop = widget.NewButton("Stop", func() { t.run("Stop", b.Stop) })
	// The owner's root shell in the VM.
	t.Terminal = widget.NewButton("Open Terminal (root)", func() {
		if err := openTerminal(b.DataDir(), t.remote, ""); err != nil {
			showError(t.win, "Opening a terminal failed", err)
		}
	})

	t.CPUs = widget.NewSelect(choices(1, 8), nil)
	t.Memory = widget.NewSelect(choices(1, 8), nil)
	t.Network = widget.NewSelect([]string{"outbound", "none"}, nil)
	t.Accel = widget.NewSelect([]string{"auto", "kvm", "tcg"}, nil)
	t.Image = widget.NewEntry()
	t.Image.SetPlaceHolder("built-in image (" + builtinimage.Default() + ")")
	t.AutoStart = widget.NewCheck("Start the VM when the app starts", nil)
	t.Save = widget.NewButton("Save", t.onSave)
	t.Saved = widget.NewLabel("")
	if fs, ok := b.(farSettings); ok {
		t.Reload = widget.NewButton("Reload", t.loadSettings)
		t.far = &farForm{src: fs, do: do, save: t.Save, reload: t.Reload, note: t.Saved, show: func(cfg config.Sandbox) {
			t.fillSettings(cfg)
			if t.First != nil {
				t.First.fill(cfg)
			}
		}}
	}
	t.loadSettings()

	t.RunDiag = widget.NewButton("Run Diagnostics", t.onDiagnostics)
	t.DiagList = container.NewVBox()

	t.Reset = widget.NewButton("Reset…", func() { t.confirm("Reset the sandbox?", ResetWarning, "Reset", b.Reset) })
	t.Remove = widget.NewButton("Remove…", func() { t.confirm("Remove the sandbox?", RemoveWarning, "Remove", b.Remove) })
	t.Reset.Importance = widget.DangerImportance
	t.Remove.Importance = widget.DangerImportance

	t.Console = widget.NewMultiLineEntry()
	t.Console.Wrapping = fyne.TextWrapOff
	t.Console.SetMinRowsVisible(8)
	if cb, ok := b.(CheckpointBackend); ok && cb.Checkpoints() != nil {
		t.Checkpoints = newCheckpointsCard(cb.Checkpoints(), win, do)
	}
	t.First = newFirstRun(t)
	t.firstCard = widget.NewCard("Set up the sandbox", "", t.First.Box)
	t.show(b.Status())
	return t
}

func (t *containerTab) content() fyne.CanvasObject {
	resources := widget.NewForm(
		widget.NewFormItem("CPUs", t.CPUs),
		widget.NewFormItem("Memory (GB)", t.Memory),
		widget.NewFormItem("Network", t.Network),
	)
	if runtime.GOOS == "linux" { // vz picks its own on macOS
		resources.Append("Accelerator", t.Accel)
	}
	resources.Append("Image manifest", t.Image)
	resources.Append("", t.AutoStart)
	save := container.NewHBox(t.Save, t.Saved)
	if t.Reload != nil {
		save = container.NewHBox(t.Save, t.Reload, t.Saved)
	}
	t.vmOnly = []fyne.CanvasObject{
		widget.NewCard("Resources", "Changes to CPUs, memory, network and the accelerator take effect after a restart; a new image after Reset.", container.NewVBox(
			resources, save,
		)),
		widget.NewCard("Diagnostics", "", container.NewVBox(t.RunDiag, t.DiagList)),
	}
	if t.Checkpoints != nil {
		t.vmOnly = append(t.vmOnly, widget.NewCard("Checkpoints", "Save the sandbox (root disk, agents' homes, views and settings) and put it back later.", t.Checkpoints.Box))
	}
	t.vmOnly = append(t.vmOnly,
		widget.NewCard("Danger Zone", "Your workspace, output and agents' homes are always kept.", container.NewHBox(t.Reset, t.Remove)),
		widget.NewCard("Console", "", t.Console),
	)
	t.body = container.NewVBox(append([]fyne.CanvasObject{
		widget.NewCard("Container", "", container.NewVBox(
			t.State, t.Details, t.Glance.VM, t.Glance.Agents,
			container.NewHBox(t.Provision, t.Cancel, t.Start, t.Stop, t.Terminal),
			t.Phase, t.Progress,
		)),
		t.firstCard,
	}, t.vmOnly...)...)
	t.show(t.b.Status())
	return container.NewVScroll(t.body)
}

// show renders a status; call on the UI goroutine.
func (t *containerTab) show(st control.Status) {
	t.mu.Lock()
	t.since, t.state = st.Since, st.State
	provisioning := t.cancel != nil
	t.mu.Unlock()
	for _, c := range []chan struct{}{t.shown, t.glanceWake} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	// Always two lines, so the tab's layout is the same in every state;
	// while the VM runs followGlance fills in its use.
	if st.State != control.Running {
		t.Glance.VM.SetText(fmt.Sprintf("VM: %s CPUs, %s GB · not running", t.CPUs.Selected, t.Memory.Selected))
		t.Glance.Agents.SetText(t.Glance.agentNames())
	}
	t.State.SetText(statusText(st))
	t.Details.SetText(details(st))
	busy := st.State == control.Starting || st.State == control.Stopping || st.State == control.Provisioning
	none := st.State == control.NotProvisioned
	setEnabled(t.Provision, !busy && st.State != control.Running)
	setEnabled(t.Cancel, provisioning && st.State == control.Provisioning)
	setEnabled(t.Start, !busy && st.State != control.Running && !none)
	setEnabled(t.Stop, st.State == control.Running)
	setEnabled(t.Terminal, st.State == control.Running)
	setEnabled(t.RunDiag, st.State == control.Running)
	// Nothing to reset or remove before the first provision.
	setEnabled(t.Reset, !busy && !none)
	setEnabled(t.Remove, !busy && !none)
	if st.State == control.Stopped || st.State == control.Running {
		t.First.active = false // provisioned, here or elsewhere
	}
	if none || t.First.active {
		t.firstCard.Show()
		t.First.shown()
		setEnabled(t.First.SetUp, !busy && st.State != control.Running && !provisioning)
	} else {
		t.firstCard.Hide()
	}
	// Before there is a VM the first-run view's button is the one thing
	// to do: the other buttons and the settings of a VM that doesn't
	// exist yet are hidden (Cancel stays for a set-up under way).
	for _, o := range append([]fyne.CanvasObject{t.Provision, t.Cancel, t.Start, t.Stop}, t.vmOnly...) {
		if t.firstCard.Visible() && (o != t.Cancel || t.Cancel.Disabled()) {
			o.Hide()
		} else {
			o.Show()
		}
	}
	// The bar only means something while provisioning.
	if st.State == control.Provisioning {
		t.Progress.Show()
		t.Phase.Show()
	} else {
		t.Progress.Hide()
		t.Phase.Hide() // an empty row otherwise
	}
	if p := st.Progress; p != nil {
		t.Phase.SetText(fmt.Sprintf("%s: %s%s", p.Phase, bytesText(p.Done, p.Total), t.timeLeft(*p)))
		if p.Total > 0 {
			t.Progress.SetValue(float64(p.Done) / float64(p.Total))
		}
	} else if st.State != control.Provisioning {
		t.Phase.SetText("")
		t.Progress.SetValue(0)
	}
}

func setEnabled(b *widget.Button, on bool) {
	if on {
		b.Enable()
	} else {
		b.Disable()
	}
}

func stateText(s control.State) string {
	return map[control.State]string{
		control.NotProvisioned: "Not provisioned",
		control.Provisioning:   "Provisioning…",
		control.Stopped:        "Stopped",
		control.Starting:       "Starting…",
		control.Running:        "Running",
		control.Stopping:       "Stopping…",
		control.Error:          "Error",
	}[s]
}

// statusText is the state in a word or two, for the window and the tray.
func statusText(st control.Status) string {
	if st.State == control.Running && st.Unresponsive != nil {
		return "Not responding"
	}
	if st.State == control.Running && st.SleepingSince != nil {
		return "Sleeping"
	}
	return stateText(st.State)
}

func details(st control.Status) string {
	switch {
	case st.State == control.Running && st.Unresponsive != nil:
		return fmt.Sprintf("The guest has not answered since %s; it is restarted if it stays so. %s", st.Unresponsive.Format(time.TimeOnly), st.Reason)
	case st.State == control.Running && st.SleepingSince != nil:
		return fmt.Sprintf("Sleeping since %s (paused when idle: no CPU) · the next call wakes it · %s (%s) · %s guest",
			st.SleepingSince.Format(time.TimeOnly), st.Driver, accelName(st.Accel), st.Distro)
	case st.State == control.Running:
		return fmt.Sprintf("Up %s · %s (%s) · %s guest", uptime(time.Since(st.Since)), st.Driver, accelName(st.Accel), st.Distro)
	case st.State == control.NotProvisioned && st.Reason != "":
		return reasonText(st.Reason) + " " + notProvisionedHint
	case st.State == control.NotProvisioned:
		return notProvisionedHint
	case st.Reason != "":
		return reasonText(st.Reason)
	}
	return ""
}

// reasonText is the owner's reason for a state as a sentence: a known
// error with its fix, else the reason capitalised and ended.
func reasonText(r string) string {
	s := explain.Error(errors.New(r)).Short()
	if s == "" {
		return ""
	}
	r0, n := utf8.DecodeRuneInString(s)
	s = string(unicode.ToUpper(r0)) + s[n:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// notProvisionedHint says what to do next when nothing is provisioned.
const notProvisionedHint = "Nothing is set up yet: press Download and Start below (or run `osaurus-sandbox start`)."

// uptime is d in whole minutes: the window redraws it once a minute, not
// every second (an idle window should cost nothing).
func uptime(d time.Duration) string {
	if d < time.Minute {
		return "less than a minute"
	}
	return strings.TrimSuffix(d.Truncate(time.Minute).String(), "0s") // 1h5m
}

func accelName(a string) string {
	return map[string]string{"kvm": "KVM", "tcg": "TCG", "vz": "vz"}[a]
}

func bytesText(done, total int64) string {
	if total > 0 {
		return fmt.Sprintf("%.1f / %.1f MiB", float64(done)/(1<<20), float64(total)/(1<<20))
	}
	return fmt.Sprintf("%.1f MiB", float64(done)/(1<<20))
}

// run does a lifecycle step off the UI goroutine, reporting failure in a
// dialog.
func (t *containerTab) run(what string, op func(context.Context) error) {
	go func() {
		if err := op(context.Background()); err != nil {
			t.do(func() { showError(t.win, what+" failed", err) })
		}
	}()
}

func (t *containerTab) onProvision() {
	t.provision(func(err error) {
		if err != nil {
			showError(t.win, "Provisioning failed", err)
		}
	})
}

// provision runs a cancellable provision and calls done on the UI
// goroutine with its error (nil when it was cancelled). Call on the UI
// goroutine.
func (t *containerTab) provision(done func(error)) {
	ctx, cancel := context.WithCancel(context.Background())
	t.mu.Lock()
	t.cancel = cancel
	t.rate = rateStart{}
	t.mu.Unlock()
	t.show(t.b.Status())
	go func() {
		err := t.b.Provision(ctx)
		t.mu.Lock()
		t.cancel = nil
		t.mu.Unlock()
		if ctx.Err() != nil {
			err = nil
		}
		t.do(func() {
			t.show(t.b.Status())
			done(err)
		})
		cancel()
	}()
}

// rateStart is where a download phase's measurement began.
type rateStart struct {
	phase string
	at    time.Time
	done  int64
}

// timeLeft is " · about 2m left" from the phase's rate so far, or ""
// before a rate can be told (the first two seconds, or no total).
func (t *containerTab) timeLeft(p control.Progress) string {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rate.phase != p.Phase || p.Done < t.rate.done {
		t.rate = rateStart{phase: p.Phase, at: now, done: p.Done}
		return ""
	}
	el := now.Sub(t.rate.at)
	if p.Total <= 0 || el < 2*time.Second || p.Done <= t.rate.done {
		return ""
	}
	perSec := float64(p.Done-t.rate.done) / el.Seconds()
	left := time.Duration(float64(p.Total-p.Done)/perSec) * time.Second
	switch {
	case left < 10*time.Second:
		return " · a few seconds left"
	case left < time.Minute:
		return fmt.Sprintf(" · about %ds left", int(left.Round(10*time.Second)/time.Second))
	}
	return " · about " + strings.TrimSuffix(left.Round(time.Minute).String(), "0s") + " left"
}

func (t *containerTab) onCancel() {
	t.mu.Lock()
	cancel := t.cancel
	t.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// farSettings are a remote context's settings (RemoteBackend): its
// sandbox.json, asked of its owner, each save based on the revision read.
type farSettings interface {
	ReadSettings(ctx context.Context) (api.SettingsFile, error)
	WriteSettings(ctx context.Context, cfg config.Sandbox, ifRevision string) (api.SettingsFile, error)
}

func (t *containerTab) loadSettings() {
	if t.far != nil {
		t.far.load()
		return
	}
	cfg, err := t.b.Settings()
	if err != nil {
		t.Saved.SetText(err.Error())
		cfg = config.Defaults()
	}
	t.fillSettings(cfg)
}

// fillSettings shows cfg in the form.
func (t *containerTab) fillSettings(cfg config.Sandbox) {
	t.CPUs.SetSelected(strconv.Itoa(cfg.CPUs))
	t.Memory.SetSelected(strconv.Itoa(cfg.MemoryGB))
	t.Network.SetSelected(cfg.Network)
	t.Accel.SetSelected(cfg.Accel)
	t.Image.SetText(cfg.ImageManifest)
	t.AutoStart.SetChecked(cfg.AutoStart)
}

// formSettings are base with the form's values.
func (t *containerTab) formSettings(base config.Sandbox) (config.Sandbox, error) {
	next := base
	var err error
	for _, kv := range [][2]string{{"cpus", t.CPUs.Selected}, {"memoryGB", t.Memory.Selected}, {"network", t.Network.Selected}, {"accel", t.Accel.Selected}, {"imageManifest", strings.TrimSpace(t.Image.Text)}, {"autoStart", strconv.FormatBool(t.AutoStart.Checked)}} {
		if next, err = next.Set(kv[0], kv[1]); err != nil {
			return base, err
		}
	}
	return next, nil
}

func (t *containerTab) onSave() {
	if t.far != nil {
		t.saveFar()
		return
	}
	old, err := t.b.Settings()
	if err != nil {
		showError(t.win, "Settings", err)
		return
	}
	next, err := t.formSettings(old)
	if err != nil {
		t.Saved.SetText(err.Error())
		showError(t.win, "Invalid setting", err)
		return
	}
	if err := t.b.SaveSettings(next); err != nil {
		showError(t.win, "Saving settings failed", err)
		return
	}
	if next.NeedsRestart(old) && t.b.Status().State == control.Running {
		t.Saved.SetText("Saved. Restart required: stop and start the VM for this to take effect.")
	} else {
		t.Saved.SetText("Saved.")
	}
}

// farSettingsNote is what is wrong with a remote context's sandbox.json
// as its owner read it ("" when nothing).
func farSettingsNote(f api.SettingsFile) string {
	if f.Damaged != "" {
		return f.Damaged + " (shown: the defaults, which that machine uses until then)"
	}
	var lines []string
	for _, p := range f.Problems {
		lines = append(lines, p.Text)
	}
	if len(lines) > 0 {
		return f.Path + " has problems; until they are fixed its owner won't start the VM:\n" + strings.Join(lines, "\n")
	}
	return ""
}

// saveFar writes the form into a remote context's sandbox.json, based
// on what the form was filled from. Call on the UI goroutine.
func (t *containerTab) saveFar() {
	old, rev, read := t.far.based()
	if !read {
		t.Saved.SetText("The settings have not been read yet: press Reload.")
		return
	}
	next, err := t.formSettings(old)
	if err != nil {
		t.Saved.SetText(err.Error())
		showError(t.win, "Invalid setting", err)
		return
	}
	t.far.write(next, rev, func(err error) {
		if !errors.Is(err, errFarSettingsChanged) {
			showError(t.win, "Saving settings failed", err)
		}
	}, func(f api.SettingsFile) string {
		if f.Settings.NeedsRestart(old) && t.b.Status().State == control.Running {
			return "Saved. Restart required: stop and start the VM for this to take effect."
		}
		return "Saved."
	})
}

// glanceSettings are the settings the glance shows the VM's size from: a
// remote context's as its form was filled (never asked of the far side
// at each sample), else this machine's file.
func (t *containerTab) glanceSettings() config.Sandbox {
	if t.far != nil {
		cfg, _, _ := t.far.based()
		return cfg
	}
	cfg, _ := t.b.Settings()
	return cfg
}

func (t *containerTab) onDiagnostics() {
	t.DiagList.RemoveAll()
	t.RunDiag.Disable()
	rows := map[string]*widget.Label{}
	for _, c := range diagnostics.Checks() {
		l := widget.NewLabel(c.Name + ": running…")
		l.Wrapping = fyne.TextWrapWord
		rows[c.Name] = l
		t.DiagList.Add(l)
	}
	go func() {
		_, err := t.b.Diagnostics(context.Background(), func(r diagnostics.Result) {
			t.do(func() {
				l := rows[r.Name]
				if l == nil { // one agent-user check per agent
					if old := rows["agent-user"]; old != nil {
						t.DiagList.Remove(old)
						delete(rows, "agent-user")
					}
					l = widget.NewLabel("")
					l.Wrapping = fyne.TextWrapWord
					rows[r.Name] = l
					t.DiagList.Add(l)
				}
				l.SetText(resultText(r))
			})
		})
		t.do(func() {
			t.RunDiag.Enable()
			if err != nil {
				showError(t.win, "Diagnostics failed", err)
			}
		})
	}()
}

func resultText(r diagnostics.Result) string {
	mark := map[diagnostics.Outcome]string{diagnostics.Pass: "✓ pass", diagnostics.Fail: "✗ FAIL", diagnostics.NotAvailable: "– not available"}[r.Outcome]
	s := fmt.Sprintf("%s: %s (%s) — %s", r.Name, mark, r.Duration.Round(10*time.Millisecond), r.Detail)
	if r.Outcome != diagnostics.Pass && r.Hint != "" {
		s += "\n    Hint: " + r.Hint
	}
	return s
}

// confirm asks before a destructive step; cancelling changes nothing.
func (t *containerTab) confirm(title, warning, verb string, op func(context.Context) error) {
	d := dialog.NewConfirm(title, warning, func(ok bool) {
		if ok {
			t.run(verb, op)
		}
	}, t.win)
	d.SetConfirmText(verb)
	d.SetDismissText("Cancel")
	d.Show()
}

// consoleMinGap is the least time between two console redraws: a booting
// guest writes its log in a stream of small writes.
const consoleMinGap = 250 * time.Millisecond

// followConsole shows the end of the console log as it grows, and the
// running VM's uptime as it changes, until ctx ends.
func (t *containerTab) followConsole(ctx context.Context) {
	var files []filewatch.Target
	if t.remote == nil { // the far side's log is there, not here
		files = append(files, filewatch.File(t.b.ConsoleLog()))
	}
	w := filewatch.Watch(ctx, time.Second, files...)
	defer w.Close()
	var last int64 = -1
	var lastDetails string
	for {
		if st, err := os.Stat(t.b.ConsoleLog()); t.remote == nil && err == nil && st.Size() != last {
			last = st.Size()
			text := tail(t.b.ConsoleLog(), 16<<10)
			t.do(func() {
				t.Console.SetText(text)
				t.Console.CursorRow = len(t.Console.Text)
			})
			select {
			case <-ctx.Done():
				return
			case <-time.After(consoleMinGap):
			}
		}
		// The only timer: the uptime's next whole minute.
		t.mu.Lock()
		state, since := t.state, t.since
		t.mu.Unlock()
		var minute <-chan time.Time
		if state == control.Running && !since.IsZero() {
			minute = time.After(time.Minute - time.Since(since)%time.Minute)
		}
		select {
		case <-ctx.Done():
			return
		case <-w.C():
			continue
		case <-t.shown:
			continue
		case <-minute:
		}
		if d := details(t.b.Status()); d != lastDetails {
			lastDetails = d
			t.do(func() {
				t.mu.Lock()
				running := t.state == control.Running
				t.mu.Unlock()
				if running { // else show has written the new state's
					t.Details.SetText(d)
				}
			})
		}
	}
}

// consoleKeep is how much of the console log's end the tab shows.
const consoleKeep = 16 << 10

// followFarConsole shows the end of a remote context's console log as
// the far side's owner streams it (the log is a file there), until ctx
// ends. A stream that breaks is opened again after poll: the link may
// come back (watchLink shows it lost when it doesn't).
func (t *containerTab) followFarConsole(ctx context.Context, far api.DataOps, poll time.Duration) {
	for {
		r, err := far.ConsoleLog(ctx, control.ConsoleLogRequest{Follow: true})
		if ctx.Err() != nil {
			if r != nil {
				r.Close()
			}
			return
		}
		if err != nil {
			t.do(func() { t.Console.SetText("The console log can't be read: " + err.Error()) })
			if errors.Is(err, agentproto.ErrUnsupported) {
				return // an older osaurus-sandbox there: asking again won't help
			}
		} else {
			t.streamConsole(ctx, r)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(poll):
		}
	}
}

// streamConsole shows what r carries, its last consoleKeep bytes at
// most every consoleMinGap, until r ends or ctx does (which closes it).
func (t *containerTab) streamConsole(ctx context.Context, r io.ReadCloser) {
	defer r.Close()
	stop := context.AfterFunc(ctx, func() { r.Close() })
	defer stop()
	chunks := make(chan []byte)
	go func() {
		defer close(chunks)
		for {
			b := make([]byte, 8<<10)
			n, err := r.Read(b)
			if n > 0 {
				select {
				case chunks <- b[:n]:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	var buf []byte
	var redraw <-chan time.Time // armed while text waits to be shown
	draw := func() {
		text := string(buf)
		t.do(func() {
			t.Console.SetText(text)
			t.Console.CursorRow = len(t.Console.Text)
		})
	}
	for {
		select {
		case <-ctx.Done():
			return
		case b, ok := <-chunks:
			if !ok {
				if redraw != nil {
					draw()
				}
				return
			}
			buf = append(buf, b...)
			if len(buf) > consoleKeep {
				// From a line's start: a cut line would read as a
				// line of its own.
				cut := buf[len(buf)-consoleKeep:]
				if i := bytes.IndexByte(cut, '\n'); i >= 0 {
					cut = cut[i+1:]
				}
				buf = append([]byte(nil), cut...)
			}
			if redraw == nil {
				redraw = time.After(consoleMinGap)
			}
		case <-redraw:
			redraw = nil
			draw()
		}
	}
}

func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		f.Seek(-n, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// showError shows err as a sentence with the fix when it is a known one
// (internal/explain), the raw error below it.
func showError(win fyne.Window, title string, err error) {
	dialog.ShowError(fmt.Errorf("%s: %s", title, explain.Text(err)), win)
}
