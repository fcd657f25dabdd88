// Package ui is the management window (Fyne): the container's state,
// lifecycle, resources, diagnostics and danger zone, the agents, and the
// plugin library.
package ui

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/remotes"
	"github.com/osaurus/osaurus-sandbox/tools/secretprompt"
)

// Window is the management window's content, separate from the app so
// tests can build it on Fyne's test driver.
type Window struct {
	Win       fyne.Window
	Container *containerTab
	Agents    *agentsTab
	Network   *networkTab // nil when the backend has no refusal log
	Plugins   *pluginsTab // nil when the backend has no plugin library (a remote context's: through its owner)
	Tasks     *tasksTab   // a remote context's through its owner
	Work      *workTabs   // Projects, Changes, Ports (a remote context's: Changes only)
	// Body is the window's content: the tabs, under the context picker.
	Body      fyne.CanvasObject
	Events    *eventsView
	Tabs      *container.AppTabs
	stop      func()
	closeOnce sync.Once
}

// NewWindow builds the window on a (test or real) app.
func NewWindow(a fyne.App, b Backend, reg *agents.Registry) *Window {
	return newWindow(a, b, reg, fyne.Do)
}

// newWindow takes the function that applies updates coming from other
// goroutines (fyne.Do; tests serialise it with their own reads).
func newWindow(a fyne.App, b Backend, reg *agents.Registry, do func(func())) *Window {
	return newWindowIn(a.NewWindow(windowTitle(b, b.Status())), a, b, reg, do, nil)
}

// windowTitle names a remote context in the title (two windows, or one
// switched, must never be mistaken for each other) and ends with the
// VM's state, which a task bar shows while the window is hidden.
func windowTitle(b Backend, st control.Status) string {
	title := "Osaurus Sandbox"
	if rc, ok := remoteOf(b); ok {
		title += " — " + rc.Name + " (" + rc.URL + ")"
	}
	if s := statusText(st); s != "" {
		title += " — " + s
	}
	return title
}

// newWindowIn builds the window's content for b in win, under header (the
// context picker; nil: none). Switching contexts builds it again in the
// same window.
func newWindowIn(win fyne.Window, a fyne.App, b Backend, reg *agents.Registry, do func(func()), header fyne.CanvasObject) *Window {
	w := &Window{Win: win}
	win.SetTitle(windowTitle(b, b.Status()))
	rc, remote := remoteOf(b)
	w.Container = newContainerTab(b, w.Win, do)
	w.Agents = newAgentsTab(reg, w.Win, do)
	w.Agents.ops = opsOf(b)
	w.Agents.Connect.b = b
	w.Container.Glance.names = func() map[string]string {
		m := map[string]string{}
		for _, a := range reg.List() {
			m[a.User()] = a.Name
		}
		return m
	}
	w.Container.show(b.Status()) // with the agents' names
	if remote {
		// The far side's files are not here: the terminal goes through
		// the context, the console log is streamed by its owner, and the
		// parts the owner can't give yet say where they are.
		w.Agents.remote = &rc
		w.Container.remote = &rc
		// followFarConsole replaces it with the far side's log.
		w.Container.Console.SetText("The console log of " + rc.Name + " shows here once its VM has booted.")
		// Client entries name this machine's data folder, whose
		// contexts.json has the context, as the CLI's do.
		if h, ok := b.(interface{ Here() config.Paths }); ok {
			w.Agents.Connect.dataDir = h.Here().Root
		}
	} else {
		w.Agents.Connect.dataDir = b.DataDir()
		w.Agents.Connect.activity = config.Paths{Root: b.DataDir()}.AgentActivity()
	}
	w.Events = newEventsView(do)
	items := []*container.TabItem{
		container.NewTabItem("Container", w.Container.content()),
		container.NewTabItem("Agents", w.Agents.content()),
	}
	if remote {
		w.Plugins = newFarPluginsTab(b, farOf(b), reg, w.Win, do)
		items = append(items, container.NewTabItem("Plugins", w.Plugins.content()))
		w.Work = newWorkTabs(a, b, reg, w.Win, do)
		items = append(items, w.Work.items()...)
		w.Tasks = newTasksTab(b, w.Win, do)
		items = append(items, container.NewTabItem("Tasks", w.Tasks.content()))
	} else {
		if ph, ok := b.(PluginHost); ok {
			if src, err := ph.Plugins(); err != nil {
				items = append(items, container.NewTabItem("Plugins", wrapped("The plugin library can't be opened: "+err.Error())))
			} else {
				w.Plugins = newPluginsTab(b, src, reg, w.Win, do)
				items = append(items, container.NewTabItem("Plugins", w.Plugins.content()))
			}
		}
		w.Work = newWorkTabs(a, b, reg, w.Win, do)
		w.Tasks = newTasksTab(b, w.Win, do)
		items = append(items, w.Work.items()...)
		items = append(items, container.NewTabItem("Tasks", w.Tasks.content()))
	}
	items = append(items, container.NewTabItem("Events", w.Events.content()))
	w.Tabs = container.NewAppTabs(items...)
	// The Agents tab's connection state and last call are read when it
	// shows, not polled (and not the editor: unsaved edits stay).
	w.Tabs.OnSelected = func(ti *container.TabItem) {
		if ti.Text == "Container" {
			w.Container.show(b.Status()) // agents added meanwhile
		}
		if ti.Text == "Agents" {
			w.Agents.shown()
			if a, err := reg.Get(w.Agents.selected); err == nil {
				w.Agents.Connect.show(&a)
			}
		}
	}
	ctx, stopFollow := context.WithCancel(context.Background())
	if w.Plugins != nil {
		go w.Plugins.follow(ctx)
	}
	if nl, ok := b.(NetLogger); ok {
		w.Network = newNetworkTab(nl, reg, do)
		w.Tabs.Append(container.NewTabItem("Network", w.Network.content()))
		go w.Network.follow(ctx)
	}
	// Each tab scrolls rather than holding the window open at its widest
	// or tallest content: the window fits a small screen at any tab.
	for _, ti := range w.Tabs.Items {
		ti.Content = container.NewScroll(ti.Content)
	}
	if header == nil && remote {
		header = widget.NewLabelWithStyle(ContextLabel(b), fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	}
	w.Body = w.Tabs
	if header != nil {
		w.Body = container.NewBorder(header, nil, nil, nil, w.Tabs)
	}
	w.Win.SetContent(w.Body)
	w.gateTabs(b.Status().State)
	cancel := b.Subscribe(func(st control.Status) {
		do(func() {
			w.Container.show(st)
			w.gateTabs(st.State)
			// Last: the title says the state once the window shows it.
			win.SetTitle(windowTitle(b, st))
		})
	})
	go w.Container.followConsole(ctx)
	if far := farOf(b); far != nil {
		go w.Container.followFarConsole(ctx, far, farPoll)
	}
	go w.Container.followGlance(ctx)
	if w.Tasks != nil {
		go w.Tasks.follow(ctx)
	}
	if w.Work != nil {
		go w.Work.follow(ctx)
	}
	w.stop = func() { cancel(); stopFollow() }
	return w
}

// gateTabs disables the tabs about a VM's work (plugins, projects, tasks,
// events, the network log) until there is a VM: on a first run the
// Container tab's set-up and the Agents tab are what there is to do.
func (w *Window) gateTabs(s control.State) {
	for _, ti := range w.Tabs.Items {
		switch {
		case ti.Text == "Container" || ti.Text == "Agents":
		case s == control.NotProvisioned:
			w.Tabs.DisableItem(ti)
		default:
			w.Tabs.EnableItem(ti)
		}
	}
}

// Close stops the window's background work. It may be called again.
func (w *Window) Close() { w.closeOnce.Do(w.stop) }

// Session is one context's owner as the window drives it: this
// machine's (the app's own Host, or another process's over the control
// socket) or a remote context's (OpenRemote).
type Session struct {
	// Backend drives the owner; it changes agents and projects when it
	// is an AgentChanger (NewBackend's is).
	Backend Backend
	// Registry is read only (the owner's own, agents.OpenReadOnly's, or
	// a remote owner's mirror): changes go through the Backend's owner.
	Registry *agents.Registry
	// Quit stops the VM (when this app owns it) before the app exits.
	Quit func(ctx context.Context) error
	// AutoStart starts the VM when the window opens.
	AutoStart bool
	// AgentUsage reports an agent's resource use in the running VM.
	AgentUsage func(context.Context, agents.Agent) (agents.Usage, error)
	// Secrets is the agents' keychain store (nil hides them).
	Secrets Secrets
	// Prompts gets the window's secret dialog while the window runs.
	Prompts *secretprompt.Broker
	// AgentLog reads an agent's log buffer.
	AgentLog func(slug string) (string, error)
	// Memory and Events show agents' memories (Agents tab) and events
	// (Events tab); nil shows them as unavailable.
	// Both are the owner's, through its Controller.
	Memory api.DataOps
	Events api.DataOps
	// Close ends the session (its connection, or this process's
	// ownership); nil: nothing to end.
	Close func()
}

// Options wire the real app.
type Options struct {
	// Session is the context the window opens on.
	Session
	// Context names it: "" or remotes.Local for this machine.
	Context string
	// Contexts is contexts.json, and Open opens a context's session, for
	// the window's context picker (Open nil: no picker).
	Contexts remotes.Store
	Open     func(ctx context.Context, name string) (*Session, error)
}

// The window opens at defaultSize the first time: it fits a 1024×600
// netbook or a 1366×768 laptop with its panels and title bar. After that
// it opens at the size the user left it, which is resizable as any
// window; a remembered size below minSize or above maxSize (a damaged
// preference) is not trusted.
var (
	defaultSize = fyne.NewSize(860, 540)
	minSize     = fyne.NewSize(480, 360)
	maxSize     = fyne.NewSize(7680, 4320)
)

// initialSize is the size the window opens at, from the remembered one
// (0 when none).
func initialSize(w, h float32) fyne.Size {
	if w < minSize.Width || h < minSize.Height || w > maxSize.Width || h > maxSize.Height {
		return defaultSize
	}
	return fyne.NewSize(w, h)
}

// Run shows the window until the user quits. With a tray host, closing
// the window hides it and the VM keeps running, and Quit in the tray stops
// the VM cleanly. Without one (a desktop with no tray, plain Xvfb),
// closing the window quits as Quit does: a hidden window with a running VM
// and no way back would be worse. SIGINT and SIGTERM quit as Quit does.
func Run(o Options) error {
	a := app.NewWithID("org.osaurus.sandbox")
	win := a.NewWindow(windowTitle(o.Backend, o.Backend.Status()))
	sw := newSwitcher(a, win, fyne.Do, o.Contexts, o.Open)
	prefs := a.Preferences()
	win.Resize(initialSize(
		float32(prefs.FloatWithFallback("window.width", 0)),
		float32(prefs.FloatWithFallback("window.height", 0))))
	saveSize := func() {
		sz := win.Canvas().Size()
		prefs.SetFloat("window.width", float64(sz.Width))
		prefs.SetFloat("window.height", float64(sz.Height))
	}
	// quit ends the loop; the VM stops after it, below. Called on Fyne's
	// thread only: once the loop has ended, a.Quit would reach a GLFW
	// that is gone. SIGINT and SIGTERM need no handler of ours: Fyne
	// catches them and ends the loop the same way.
	quit := func() {
		saveSize()
		a.Quit()
	}
	// The tray's state line follows the context shown.
	var trayState0 *fyne.MenuItem
	var trayMenu *fyne.Menu
	desk, ok := a.(desktop.App)
	tray := ok && hasTrayHost()
	sw.attach = func(w *Window, s *Session) func() {
		w.Agents.usage = s.AgentUsage
		w.Agents.secrets = s.Secrets
		w.Agents.readLog = s.AgentLog
		undo := []func(){}
		if s.Prompts != nil {
			// While the window shows this session, secret prompts also
			// show here.
			undo = append(undo, s.Prompts.SetDialog(w.Agents.promptSecret))
		}
		w.Agents.Memory.store = s.Memory
		w.Agents.Memory.load()
		w.Events.start(s.Events)
		undo = append(undo, w.Events.close)
		if tray {
			trayState0.Label = trayState(s.Backend.Status())
			trayMenu.Refresh()
			undo = append(undo, s.Backend.Subscribe(func(st control.Status) {
				fyne.Do(func() {
					trayState0.Label = trayState(st)
					trayMenu.Refresh()
				})
			}))
		}
		return func() {
			for _, f := range undo {
				f()
			}
		}
	}
	if tray {
		// Start and Stop act on the context shown.
		run := func(verb string, op func(Backend) func(context.Context) error) func() {
			return func() {
				if sw.w != nil && sw.sess != nil {
					sw.w.Container.run(verb, op(sw.sess.Backend))
				}
			}
		}
		trayState0 = fyne.NewMenuItem(trayState(o.Backend.Status()), nil)
		trayState0.Disabled = true
		trayMenu = fyne.NewMenu("Osaurus Sandbox",
			trayState0,
			fyne.NewMenuItemSeparator(),
			fyne.NewMenuItem("Open", func() { win.Show(); win.RequestFocus() }),
			fyne.NewMenuItem("Start", run("Start", func(b Backend) func(context.Context) error { return b.Start })),
			fyne.NewMenuItem("Stop", run("Stop", func(b Backend) func(context.Context) error { return b.Stop })),
			fyne.NewMenuItem("Quit", quit),
		)
		desk.SetSystemTrayMenu(trayMenu)
		// The tray keeps the app (and the VM) alive with the window closed.
		win.SetCloseIntercept(func() {
			saveSize()
			win.Hide()
		})
	} else {
		win.SetCloseIntercept(quit)
	}
	if o.Open == nil {
		sw.header = nil // no picker: the window as it was
	}
	sw.show(o.Context, &o.Session)
	if autoStart(o.AutoStart, o.Backend.Status()) {
		sw.w.Container.run("Start", o.Backend.Start)
	}
	win.ShowAndRun()
	// The loop can end without quit: Fyne itself quits on SIGINT and
	// SIGTERM. However it ended, the VM this app owns stops as Quit stops
	// it; only a crash leaves it running (for the next owner to adopt).
	// The UI is gone by now: stop updating it first. A remote context's
	// VM is the far side's owner's, and keeps running.
	if local := sw.close(); local != nil {
		if local.Quit != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := local.Quit(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "osaurus-sandbox: stopping the VM:", err)
			}
			cancel()
		}
		if local.Close != nil {
			local.Close()
		}
	}
	return nil
}

// autoStart says whether opening the window starts the VM: never on a
// first run, which waits for the first-run view's button.
func autoStart(setting bool, st control.Status) bool {
	return setting && st.State != control.NotProvisioned
}

// trayState is the tray menu's first line.
func trayState(st control.Status) string { return "Sandbox: " + statusText(st) }

// ErrNoDisplay is returned when no window can be opened.
var ErrNoDisplay = agentproto.Class(agentproto.ErrUnsupported, "no display to open the window on; use the command line (osaurus-sandbox help)")

// DiagEnvFunc completes diagnostics environments; re-exported for callers.
type DiagEnvFunc = func(*diagnostics.Env)
