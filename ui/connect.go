package ui

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver/connect"
)

// connectView is the Agents tab's Connect: pick an MCP client, see the
// change to its config file, confirm; and whether clients are set up and
// when the agent last called a tool.
type connectView struct {
	t *agentsTab
	// home is the user's home, where the clients keep their files (tests
	// point it at a temporary folder); dataDir is named in the entries'
	// env block so a custom data folder works; activity is the owner's
	// record of last calls.
	home, dataDir, activity string
	now                     func() time.Time
	b                       Backend // settings and the owner's MCP status (nil in some tests)

	// MCP over HTTP: where it is served or why not, and its port.
	HTTP    *widget.Label
	Port    *widget.Entry
	UsePort *widget.Button

	Client  *widget.Select
	Connect *widget.Button
	// Disconnect takes the entry out again (a remote context's card
	// only: the local one is done with `agent disconnect`).
	Disconnect *widget.Button
	State      *widget.Label
	// The open confirmation, its change text and button, for tests.
	Dialog  dialog.Dialog
	Preview *widget.Entry
	Confirm *widget.Button
}

func newConnectView(t *agentsTab) *connectView {
	home, _ := os.UserHomeDir()
	v := &connectView{t: t, home: home, now: time.Now}
	var names []string
	for _, c := range connect.Clients {
		names = append(names, c.Name)
	}
	v.Client = widget.NewSelect(names, nil)
	v.Client.SetSelected(names[0])
	v.Connect = widget.NewButton("Connect…", v.onConnect)
	v.Connect.Importance = widget.HighImportance
	v.Disconnect = widget.NewButton("Disconnect…", v.onDisconnect)
	v.State = widget.NewLabel("")
	v.State.Wrapping = fyne.TextWrapWord
	v.HTTP = widget.NewLabel("")
	v.HTTP.Wrapping = fyne.TextWrapWord
	v.Port = widget.NewEntry()
	v.Port.SetPlaceHolder(strconv.Itoa(config.DefaultMCPPort))
	v.UsePort = widget.NewButton("Use this port", v.onUsePort)
	return v
}

// mcpStatus is the owner's MCP-over-HTTP state, when the backend knows it.
type mcpStatus interface {
	MCP() (url, problem string)
}

// MCP is where the owner serves MCP over HTTP, or why it doesn't.
func (c *Controlled) MCP() (url, problem string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status.MCPURL, c.status.MCPError
}

// showHTTP says where clients reach MCP over HTTP, or why they can't and
// what to do, and shows the configured port.
func (v *connectView) showHTTP() {
	if v.b == nil || v.t.remote != nil { // not shown: the CLI connects a far agent
		return
	}
	cfg, err := v.b.Settings()
	if err != nil {
		cfg = config.Defaults()
	}
	port := cfg.MCPPort
	if port == 0 {
		port = config.DefaultMCPPort
	}
	v.Port.SetPlaceHolder(strconv.Itoa(port)) // the port in use, not the default
	if v.Port.Text == "" {
		v.Port.SetText(strconv.Itoa(port))
	}
	var url, problem string
	if m, ok := v.b.(mcpStatus); ok {
		url, problem = m.MCP()
	}
	switch {
	case problem != "":
		v.HTTP.SetText(problem + " Or set another port here.")
	case url != "":
		v.HTTP.SetText("MCP over HTTP: " + url + " (loopback only; each agent's token is its password).")
	default:
		v.HTTP.SetText(fmt.Sprintf("MCP over HTTP is served on 127.0.0.1:%d while the app or `serve` owns the VM.", port))
	}
}

// onUsePort saves the MCP port setting; the owner listens on it from its
// next start.
func (v *connectView) onUsePort() {
	if v.b == nil {
		return
	}
	cfg, err := v.b.Settings()
	if err != nil {
		showError(v.t.win, "Settings", err)
		return
	}
	next, err := cfg.Set("mcpPort", strings.TrimSpace(v.Port.Text))
	if err != nil {
		v.HTTP.SetText(err.Error())
		return
	}
	if err := v.b.SaveSettings(next); err != nil {
		showError(v.t.win, "Saving settings failed", err)
		return
	}
	v.HTTP.SetText(fmt.Sprintf("Saved: MCP over HTTP uses port %d from the next start of the app (or of `serve`).", next.MCPPort))
}

func (v *connectView) content() fyne.CanvasObject {
	if rc := v.t.remote; rc != nil {
		// No HTTP port: the far side's owner serves MCP over HTTP on its
		// own loopback, with its own tokens.
		v.t.FarConnect = wrapped(fmt.Sprintf("The entry runs `osaurus-sandbox --context %s mcp --agent NAME` (as `osaurus-sandbox --context %s agent connect` writes it): the client runs the agent's tools on %s over ssh, whichever context is current later.", rc.Name, rc.Name, rc.URL))
		return widget.NewCard("Connect an MCP client", "Adds this agent of "+rc.Name+" to a client's config file on this machine, after showing the change.",
			container.NewVBox(container.NewBorder(nil, nil, nil, container.NewHBox(v.Connect, v.Disconnect), v.Client), v.State, v.t.FarConnect))
	}
	return widget.NewCard("Connect an MCP client", "Adds this agent to the client's own config file, after showing the change.",
		container.NewVBox(container.NewBorder(nil, nil, nil, v.Connect, v.Client), v.State,
			container.NewBorder(nil, nil, widget.NewLabel("HTTP port"), v.UsePort, v.Port), v.HTTP))
}

// server is how a client reaches agent a: the stdio server, with the
// data folder in its env block. A remote context's agent is reached
// through the context, as `--context NAME agent connect` writes it, with
// no token: that is the far side's HTTP server's, on its loopback.
func (v *connectView) server(a agents.Agent) mcpserver.Client {
	s := mcpserver.Client{Exe: v.t.exe, Agent: a}
	if v.t.remote != nil {
		s.Context = v.t.remote.Name
	} else {
		s.Token, _ = v.t.reg.Token(a.ID)
	}
	if v.dataDir != "" {
		s.Env = map[string]string{config.HomeEnv: v.dataDir}
	}
	return s
}

func (v *connectView) client() connect.Client {
	for _, c := range connect.Clients {
		if c.Name == v.Client.Selected {
			return c
		}
	}
	return connect.Clients[0]
}

// show fills the state line for agent a (nil: none selected).
func (v *connectView) show(a *agents.Agent) {
	v.showHTTP()
	if a == nil {
		v.State.SetText("")
		v.Connect.Disable()
		v.Disconnect.Disable()
		return
	}
	v.Connect.Enable()
	v.Disconnect.Enable()
	name := v.server(*a).ServerName()
	var set []string
	for _, c := range connect.Clients {
		if connect.Connected(c, v.home, name) {
			set = append(set, c.Name)
		}
	}
	s := "Set up in: none yet."
	if len(set) > 0 {
		s = "Set up in: " + strings.Join(set, ", ") + "."
	}
	act, err := api.ReadActivity(v.activity)
	switch last, ok := act[a.ID]; {
	case v.activity == "" || err != nil:
	case !ok:
		s += " No client has called a tool yet."
	default:
		s += fmt.Sprintf(" Last tool call: %s, %s (over %s).", last.Tool, ago(v.now().Sub(last.LastCall)), last.Via)
	}
	if v.t.exeWarning != "" {
		s += "\nNote: " + v.t.exeWarning + "."
	}
	v.State.SetText(s)
}

// ago is d in words: "just now", "5 minutes ago", "3 hours ago".
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < 2*time.Minute:
		return "a minute ago"
	case d < time.Hour:
		return fmt.Sprintf("%d minutes ago", int(d/time.Minute))
	case d < 2*time.Hour:
		return "an hour ago"
	case d < 48*time.Hour:
		return fmt.Sprintf("%d hours ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%d days ago", int(d/(24*time.Hour)))
}

func (v *connectView) onConnect() {
	a, err := v.t.reg.Get(v.t.selected)
	if err != nil {
		return
	}
	c, s := v.client(), v.server(a)
	v.Preview = widget.NewMultiLineEntry()
	v.Preview.Wrapping = fyne.TextWrapWord
	v.Preview.SetMinRowsVisible(12)
	if !c.HasFile() {
		v.Preview.SetText(connect.Snippets(s))
		copyBtn := widget.NewButton("Copy", func() { v.t.copy(v.Preview.Text) })
		d := dialog.NewCustom("Connect "+a.Name, "Close", container.NewBorder(nil, copyBtn, nil, nil, v.Preview), v.t.win)
		d.Resize(fyne.NewSize(640, 480))
		v.Dialog, v.Confirm = d, copyBtn
		d.Show()
		return
	}
	ch, err := connect.Plan(c, v.home, s)
	if err != nil {
		showError(v.t.win, "Connecting "+c.Name, err)
		return
	}
	v.Preview.SetText(ch.Describe())
	if ch.Unchanged {
		d := dialog.NewCustom("Connect "+a.Name+" to "+c.Name, "Close", v.Preview, v.t.win)
		d.Resize(fyne.NewSize(640, 360))
		v.Dialog, v.Confirm = d, nil
		d.Show()
		return
	}
	v.confirmWrite("Connect "+a.Name+" to "+c.Name, "Connecting "+c.Name, ch, func(backup string) {
		msg := fmt.Sprintf("Connected %s to %s: wrote %s", a.Name, c.Name, ch.Path)
		if v.t.remote != nil {
			msg = fmt.Sprintf("Connected %s of %s to %s: wrote %s", a.Name, v.t.remote.Name, c.Name, ch.Path)
		}
		if backup != "" {
			msg += " (the old file is in " + backup + ")"
		}
		v.t.Status.SetText(msg + ".")
		v.show(&a)
	})
}

// confirmWrite shows the change ch in a dialog titled title and applies
// it when the user presses Write, then done hears where the old file was
// kept ("" none); a failure is shown under errTitle.
func (v *connectView) confirmWrite(title, errTitle string, ch connect.Change, done func(backup string)) {
	var d *dialog.CustomDialog
	v.Confirm = widget.NewButton("Write", func() {
		d.Hide()
		v.Dialog = nil
		backup, err := connect.Apply(ch)
		if err != nil {
			showError(v.t.win, errTitle, err)
			return
		}
		done(backup)
	})
	v.Confirm.Importance = widget.HighImportance
	cancel := widget.NewButton("Cancel", func() { d.Hide(); v.Dialog = nil })
	d = dialog.NewCustomWithoutButtons(title, container.NewBorder(nil, container.NewHBox(cancel, v.Confirm), nil, nil, v.Preview), v.t.win)
	d.Resize(fyne.NewSize(640, 420))
	v.Dialog = d
	d.Show()
}

// onDisconnect takes the agent's entry out of the chosen client's file,
// after showing the change, as `agent disconnect NAME --client ID` does:
// the entry is the one its name (the agent's slug) names.
func (v *connectView) onDisconnect() {
	a, err := v.t.reg.Get(v.t.selected)
	if err != nil {
		return
	}
	c, name := v.client(), v.server(a).ServerName()
	if !c.HasFile() {
		v.t.Status.SetText(c.Name + " keeps no file here: remove " + name + " where you pasted it.")
		return
	}
	ch, err := connect.PlanRemove(c, v.home, name)
	if err != nil {
		showError(v.t.win, "Disconnecting "+c.Name, err)
		return
	}
	if ch.Unchanged {
		v.t.Status.SetText(fmt.Sprintf("%s has no %s in %s: nothing to change.", c.Name, name, ch.Path))
		return
	}
	v.Preview = widget.NewMultiLineEntry()
	v.Preview.Wrapping = fyne.TextWrapWord
	v.Preview.SetMinRowsVisible(12)
	v.Preview.SetText(ch.Describe())
	v.confirmWrite("Disconnect "+a.Name+" from "+c.Name, "Disconnecting "+c.Name, ch, func(backup string) {
		msg := fmt.Sprintf("Disconnected %s from %s: wrote %s", a.Name, c.Name, ch.Path)
		if backup != "" {
			msg += " (the old file is in " + backup + ")"
		}
		v.t.Status.SetText(msg + ".")
		v.show(&a)
	})
}
