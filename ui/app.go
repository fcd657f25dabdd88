// Package ui is the management window (Fyne): the container's state,
// lifecycle, resources, diagnostics and danger zone, and the agents.
package ui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/bridge/events"
	"github.com/osaurus/osaurus-sandbox/bridge/memory"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/sandbox"
)

// Window is the management window's content, separate from the app so
// tests can build it on Fyne's test driver.
type Window struct {
	Win       fyne.Window
	Container *containerTab
	Agents    *agentsTab
	Events    *eventsView
	Tabs      *container.AppTabs
	stop      func()
}

// NewWindow builds the window on a (test or real) app.
func NewWindow(a fyne.App, b Backend, reg *agents.Registry) *Window {
	return newWindow(a, b, reg, fyne.Do)
}

// newWindow takes the function that applies updates coming from other
// goroutines (fyne.Do; tests serialise it with their own reads).
func newWindow(a fyne.App, b Backend, reg *agents.Registry, do func(func())) *Window {
	w := &Window{Win: a.NewWindow("Osaurus Sandbox")}
	w.Container = newContainerTab(b, w.Win, do)
	w.Agents = newAgentsTab(reg, w.Win, do)
	w.Events = newEventsView(do)
	w.Tabs = container.NewAppTabs(
		container.NewTabItem("Container", w.Container.content()),
		container.NewTabItem("Agents", w.Agents.content()),
		container.NewTabItem("Events", w.Events.content()),
	)
	w.Win.SetContent(w.Tabs)
	cancel := b.Subscribe(func(st sandbox.Status) { do(func() { w.Container.show(st) }) })
	ctx, stopFollow := context.WithCancel(context.Background())
	go w.Container.followConsole(ctx)
	w.stop = func() { cancel(); stopFollow() }
	return w
}

// Close stops the window's background work.
func (w *Window) Close() { w.stop() }

// Options wire the real app.
type Options struct {
	Backend  Backend
	Registry *agents.Registry
	// Quit stops the VM (when this app owns it) before the app exits.
	Quit func(ctx context.Context) error
	// AutoStart starts the VM when the window opens.
	AutoStart bool
	// OnAgentRemoved cleans up a removed agent in the VM and says what it
	// did.
	OnAgentRemoved func(context.Context, agents.Agent) (string, error)
	// Memory and Events show agents' memories (Agents tab) and events
	// (Events tab); nil shows them as unavailable.
	Memory *memory.Store
	Events *events.Store
}

// Run shows the window until the user quits. With a system tray, closing
// the window hides it and the VM keeps running; Quit in the tray stops the
// VM cleanly.
func Run(o Options) error {
	a := app.NewWithID("org.osaurus.sandbox")
	w := NewWindow(a, o.Backend, o.Registry)
	defer w.Close()
	w.Agents.onRemoved = o.OnAgentRemoved
	w.Agents.Memory.store = o.Memory
	w.Agents.Memory.load()
	w.Events.start(o.Events)
	defer w.Events.close()
	prefs := a.Preferences()
	w.Win.Resize(fyne.NewSize(
		float32(prefs.FloatWithFallback("window.width", 900)),
		float32(prefs.FloatWithFallback("window.height", 760))))
	quit := func() {
		sz := w.Win.Canvas().Size()
		prefs.SetFloat("window.width", float64(sz.Width))
		prefs.SetFloat("window.height", float64(sz.Height))
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if o.Quit != nil {
				if err := o.Quit(ctx); err != nil {
					fmt.Fprintln(os.Stderr, "osaurus-sandbox: stopping the VM:", err)
				}
			}
			fyne.Do(a.Quit)
		}()
	}
	if desk, ok := a.(desktop.App); ok {
		b := o.Backend
		desk.SetSystemTrayMenu(fyne.NewMenu("Osaurus Sandbox",
			fyne.NewMenuItem("Open", func() { w.Win.Show(); w.Win.RequestFocus() }),
			fyne.NewMenuItem("Start", func() { w.Container.run("Start", b.Start) }),
			fyne.NewMenuItem("Stop", func() { w.Container.run("Stop", b.Stop) }),
			fyne.NewMenuItem("Quit", quit),
		))
		// The tray keeps the app (and the VM) alive with the window closed.
		w.Win.SetCloseIntercept(func() {
			sz := w.Win.Canvas().Size()
			prefs.SetFloat("window.width", float64(sz.Width))
			prefs.SetFloat("window.height", float64(sz.Height))
			w.Win.Hide()
		})
	} else {
		w.Win.SetCloseIntercept(quit)
	}
	if o.AutoStart {
		w.Container.run("Start", o.Backend.Start)
	}
	w.Win.ShowAndRun()
	return nil
}

// ErrNoDisplay is returned when no window can be opened.
var ErrNoDisplay = errors.New("no display to open the window on; use the command line (osaurus-sandbox help)")

// DiagEnvFunc completes diagnostics environments; re-exported for callers.
type DiagEnvFunc = func(*diagnostics.Env)
