package ui

import (
	"context"
	"fmt"
	"slices"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/remotes"
)

// linkPoll is how often the window of a remote context asks the far
// side's owner whether the link still works; a variable for tests.
var linkPoll = 5 * time.Second

// switcher is the window's context picker: which sandbox the window
// drives, this machine's or a remote context's (contexts.json). Choosing
// one builds the window's tabs again over that context's session, in the
// same window. It never changes the command line's current context,
// unless Make current is pressed.
type switcher struct {
	app   fyne.App
	win   fyne.Window
	do    func(func())
	store remotes.Store
	open  func(ctx context.Context, name string) (*Session, error)
	// attach wires a session's extras (secrets, logs, events, the tray)
	// into its window, returning what undoes it; nil: nothing to wire.
	attach func(w *Window, s *Session) (detach func())

	Picker      *widget.Select
	Label       *widget.Label // "box — ssh://me@box"
	MakeCurrent *widget.Button
	Note        *widget.Label // connecting, a failed switch, make current's answer
	// The lost state: why, and Reconnect.
	Lost      *fyne.Container
	LostText  *widget.Label
	Reconnect *widget.Button
	header    fyne.CanvasObject

	// On the UI's goroutine only.
	name     string   // the context shown
	sess     *Session // its session
	local    *Session // this machine's, kept open once opened (the app may own the VM)
	w        *Window
	detach   func()
	stopLink context.CancelFunc
	setting  bool // the picker is being set, not chosen
}

func newSwitcher(a fyne.App, win fyne.Window, do func(func()), store remotes.Store, open func(context.Context, string) (*Session, error)) *switcher {
	sw := &switcher{app: a, win: win, do: do, store: store, open: open}
	sw.Picker = widget.NewSelect(nil, func(name string) {
		if !sw.setting {
			sw.choose(name)
		}
	})
	sw.Label = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	sw.Label.Wrapping = fyne.TextWrapWord
	sw.Note = widget.NewLabel("")
	sw.Note.Wrapping = fyne.TextWrapWord
	sw.MakeCurrent = widget.NewButton("Make current for commands", sw.onMakeCurrent)
	sw.LostText = widget.NewLabel("")
	sw.LostText.Wrapping = fyne.TextWrapWord
	sw.Reconnect = widget.NewButton("Reconnect", func() { sw.reopen(sw.name) })
	sw.Reconnect.Importance = widget.HighImportance
	sw.Lost = container.NewVBox(widget.NewCard("Connection lost", "", container.NewVBox(sw.LostText, container.NewHBox(sw.Reconnect))))
	sw.header = container.NewVBox(
		container.NewBorder(nil, nil, container.NewHBox(widget.NewLabel("Context"), sw.Picker), sw.MakeCurrent, sw.Label),
		sw.Note)
	return sw
}

// names are the picker's choices: this machine, then contexts.json's.
func (sw *switcher) names() (names []string, current string) {
	f, err := sw.store.Load()
	names = []string{remotes.Local}
	if err != nil {
		sw.Note.SetText("contexts.json can't be read: " + err.Error())
		return names, ""
	}
	for _, c := range f.Contexts {
		names = append(names, c.Name)
	}
	return names, f.Current
}

// setPicker shows name as chosen without choosing it.
func (sw *switcher) setPicker(name string) {
	names, cur := sw.names()
	if !slices.Contains(names, name) {
		names = append(names, name) // removed from contexts.json meanwhile
	}
	sw.setting = true
	sw.Picker.Options = names
	sw.Picker.SetSelected(name)
	sw.setting = false
	sw.Picker.Enable()
	if cur == "" {
		cur = remotes.Local
	}
	if cur == name {
		sw.MakeCurrent.Disable()
	} else {
		sw.MakeCurrent.Enable()
	}
}

// show makes s, the session of context name, the window's: the old one's
// window stops, and its session ends unless it is this machine's.
func (sw *switcher) show(name string, s *Session) {
	if name == "" {
		name = remotes.Local
	}
	sw.teardown()
	if name == remotes.Local {
		sw.local = s
	}
	sw.name, sw.sess = name, s
	// Until a context exists the picker could only offer this machine:
	// the window stays as it was without one.
	header := sw.header
	if names, _ := sw.names(); len(names) == 1 && name == remotes.Local {
		header = nil
	}
	sw.w = newWindowIn(sw.win, sw.app, s.Backend, s.Registry, sw.do, header)
	if sw.attach != nil {
		sw.detach = sw.attach(sw.w, s)
	}
	sw.Label.SetText(ContextLabel(s.Backend))
	sw.setPicker(name)
	if rb, ok := s.Backend.(*RemoteBackend); ok {
		ctx, cancel := context.WithCancel(context.Background())
		sw.stopLink = cancel
		go sw.watchLink(ctx, rb)
	}
}

// teardown stops the shown window and ends its session (a remote one).
func (sw *switcher) teardown() {
	if sw.stopLink != nil {
		sw.stopLink()
		sw.stopLink = nil
	}
	if sw.detach != nil {
		sw.detach()
		sw.detach = nil
	}
	if sw.w != nil {
		sw.w.Close()
		sw.w = nil
	}
	if sw.sess != nil && sw.sess != sw.local && sw.sess.Close != nil {
		sw.sess.Close()
	}
	sw.sess = nil
}

// choose switches to the context name, unless it is the one shown.
func (sw *switcher) choose(name string) {
	if name == sw.name && sw.sess != nil {
		return
	}
	sw.reopen(name)
}

// reopen opens the context name (again, after a lost link) off the UI's
// goroutine: ssh may take a while, or ask for a passphrase.
func (sw *switcher) reopen(name string) {
	sw.Picker.Disable()
	sw.Reconnect.Disable()
	sw.Note.SetText("Connecting to " + name + "…")
	if name == remotes.Local && sw.local != nil {
		sw.Note.SetText("")
		sw.show(name, sw.local)
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s, err := sw.open(ctx, name)
		sw.do(func() {
			sw.Reconnect.Enable()
			if err != nil {
				sw.Note.SetText(fmt.Sprintf("Can't open context %s: %s", name, err))
				if sw.sess != nil {
					sw.Note.SetText(sw.Note.Text + " (still showing " + sw.name + ")")
				}
				sw.setPicker(sw.name)
				return
			}
			sw.Note.SetText("")
			sw.show(name, s)
		})
	}()
}

// watchLink asks the far side's owner every linkPoll whether it can be
// reached; when it can't (ssh can't reconnect either), the window shows
// the lost state rather than tabs that would each fail or hang.
func (sw *switcher) watchLink(ctx context.Context, rb *RemoteBackend) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(linkPoll):
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := rb.Ping(pctx)
		cancel()
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		sw.do(func() {
			if sw.sess != nil && sw.sess.Backend == rb {
				sw.showLost(rb, err)
			}
		})
		return
	}
}

// showLost replaces the tabs with why the link is gone and Reconnect.
// The session ends: Reconnect opens a new one.
func (sw *switcher) showLost(rb *RemoteBackend, err error) {
	rc := rb.Remote()
	sw.teardown()
	sw.LostText.SetText(fmt.Sprintf("The connection to %s (%s) was lost: %v\n\n"+
		"The sandbox there, its VM and its agents may well still be running: nothing was stopped. "+
		"Reconnect when the machine can be reached again, or choose another context above.", rc.Name, rc.URL, err))
	sw.Note.SetText("")
	sw.Label.SetText(rc.Name + " — " + rc.URL + " (disconnected)")
	sw.win.SetContent(container.NewBorder(sw.header, nil, nil, nil, sw.Lost))
}

// onMakeCurrent makes the shown context the command line's current one
// (`context use`): the picker alone never does.
func (sw *switcher) onMakeCurrent() {
	if err := sw.store.Use(sw.name); err != nil {
		sw.Note.SetText("Making " + sw.name + " current failed: " + err.Error())
		return
	}
	sw.Note.SetText("Commands now drive context " + sw.name + " (osaurus-sandbox context use " + sw.name + ").")
	sw.MakeCurrent.Disable()
}

// close ends the shown session, returning this machine's (nil when it
// was never opened) for the app to stop and close last.
func (sw *switcher) close() *Session {
	sw.teardown()
	return sw.local
}
