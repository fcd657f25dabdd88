package ui

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
	"github.com/osaurus/osaurus-sandbox/remotes"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver/connect"
)

// agentsTab lists agents and edits the selected one.
type agentsTab struct {
	reg *agents.Registry
	win fyne.Window
	exe string
	// exeWarning: exe is a temporary or build copy (connect.Executable).
	exeWarning string
	// Empty shows the first steps in place of the editor while there are
	// no agents.
	Empty  *widget.Card
	editor *container.Scroll

	List     *widget.List
	NewName  *widget.Entry
	Add      *widget.Button
	Terminal *widget.Button // Open Terminal: `osaurus-sandbox shell AGENT`

	Name       *widget.Label
	Enabled    *widget.Check
	MaxCmds    *widget.Entry
	Background *widget.Check
	// KeepsAwake: its running background processes keep the VM from
	// sleeping when idle (backgroundKeepsAwake).
	KeepsAwake *widget.Check
	PluginOK   *widget.Check
	Network    *widget.SelectEntry
	// Resource limits in the VM; empty means the default.
	MaxProcs   *widget.Entry
	MemoryMB   *widget.Entry
	CPUWeight  *widget.Entry
	Usage      *widget.Label
	SaveAgent  *widget.Button
	RemoveBtn  *widget.Button
	Desktop    *widget.Entry
	CodeHTTP   *widget.Entry
	CopyDesk   *widget.Button
	CopyHTTP   *widget.Button
	Regenerate *widget.Button
	Status     *widget.Label
	Memory     *memoryPanel
	Connect    *connectView

	items    []agents.Agent
	selected string // agent id
	// ops changes the agents through the owner (nil: they can't change
	// here); reg is only read.
	ops AgentOps
	// usage asks the running VM for an agent's resource use; set by the
	// app.
	usage func(context.Context, agents.Agent) (agents.Usage, error)
	do    func(func())
	// HomeDialog asks what to do with a left-over home (nil when closed),
	// with its buttons.
	HomeDialog           *dialog.CustomDialog
	AdoptHome, PurgeHome *widget.Button
	// secrets is the keychain store; nil hides the agent's secrets.
	secrets Secrets
	sec     *secretsView
	// readLog reads an agent's log buffer (bridge.LogStore.Read).
	readLog func(slug string) (string, error)
	logs    *agentLogView
	// remote is the context whose agents these are (nil: this
	// machine's): Connect writes entries that run through it.
	remote *remotes.Context
	// FarConnect, in a remote context's Connect card, says what its
	// entries run.
	FarConnect *widget.Label
	// The open secret dialogs' entries, for tests.
	SecretKey, SecretValue, PromptValue *widget.Entry
}

func newAgentsTab(reg *agents.Registry, win fyne.Window, do func(func())) *agentsTab {
	// The installed binary when this one runs from a build or temporary
	// folder (`make run`): client configs must outlive the clone.
	exe, exeWarning := connect.Executable()
	t := &agentsTab{reg: reg, win: win, exe: exe, exeWarning: exeWarning, do: do}
	t.List = widget.NewList(
		func() int { return len(t.items) },
		func() fyne.CanvasObject {
			l := widget.NewLabel("agent name")
			l.Wrapping = fyne.TextWrapWord // a long name wraps, never cut
			return l
		},
		func(i widget.ListItemID, o fyne.CanvasObject) {
			o.(*widget.Label).SetText(itemText(t.items[i]))
		})
	t.List.OnSelected = func(i widget.ListItemID) { t.selectAgent(t.items[i].ID) }
	t.NewName = widget.NewEntry()
	t.NewName.SetPlaceHolder("New agent name")
	t.Add = widget.NewButton("Add", t.onAdd)

	t.Name = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	t.Name.Wrapping = fyne.TextWrapWord
	t.Enabled = widget.NewCheck("Autonomous exec (write, exec and install tools)", nil)
	t.MaxCmds = widget.NewEntry()
	t.Background = widget.NewCheck("Background processes", nil)
	t.KeepsAwake = widget.NewCheck("Its background processes keep the VM awake", nil)
	t.PluginOK = widget.NewCheck("May create plugins", nil)
	// none, outbound, or a domain list typed in (validated on Save).
	t.Network = widget.NewSelectEntry([]string{netpolicy.SettingOutbound, netpolicy.SettingNone})
	t.Network.SetPlaceHolder("none, outbound or example.com,*.example.com")
	t.MaxProcs, t.MemoryMB, t.CPUWeight = widget.NewEntry(), widget.NewEntry(), widget.NewEntry()
	for _, e := range []struct {
		w   *widget.Entry
		key string
	}{{t.MaxProcs, "maxProcesses"}, {t.MemoryMB, "memoryMB"}, {t.CPUWeight, "cpuWeight"}} {
		for _, rs := range agents.ResourceSettings {
			if rs.Key == e.key {
				e.w.SetPlaceHolder(fmt.Sprintf("default %d (%d–%d)", rs.Default, rs.Min, rs.Max))
			}
		}
	}
	t.Usage = widget.NewLabel("")
	t.Usage.Wrapping = fyne.TextWrapWord
	t.SaveAgent = widget.NewButton("Save", t.onSave)
	t.RemoveBtn = widget.NewButton("Remove…", t.onRemove)
	// A terminal as the agent, in its namespaces and under its limits.
	t.Terminal = widget.NewButton("Open Terminal", func() {
		a, err := t.reg.Get(t.selected)
		if err != nil {
			return
		}
		if err := openTerminal(t.Connect.dataDir, t.remote, a.Slug); err != nil {
			showError(t.win, "Opening a terminal failed", err)
		}
	})
	t.RemoveBtn.Importance = widget.DangerImportance
	t.Desktop = widget.NewMultiLineEntry()
	t.Desktop.SetMinRowsVisible(7)
	t.CodeHTTP = widget.NewMultiLineEntry()
	t.CodeHTTP.SetMinRowsVisible(3)
	t.CopyDesk = widget.NewButton("Copy Claude Desktop config", func() { t.copy(t.Desktop.Text) })
	t.CopyHTTP = widget.NewButton("Copy Claude Code command", func() { t.copy(t.CodeHTTP.Text) })
	t.Regenerate = widget.NewButton("Regenerate token", t.onRegenerate)
	t.Status = widget.NewLabel("")
	t.newSecretsView()
	t.newLogView()
	t.Memory = newMemoryPanel(win)
	t.Connect = newConnectView(t)
	t.refresh()
	return t
}

func (t *agentsTab) content() fyne.CanvasObject {
	// Grouped: who the agent is and how clients reach it first, then
	// what it may do, its limits, and the rest.
	snippets := widget.NewAccordion(widget.NewAccordionItem("Config snippets and token", container.NewVBox(
		widget.NewLabel("Claude Desktop (claude_desktop_config.json)"), t.Desktop,
		widget.NewLabel("Claude Code over HTTP (the app must be running)"), t.CodeHTTP,
		container.NewHBox(t.CopyDesk, t.CopyHTTP, t.Regenerate),
	)))
	if t.remote != nil {
		// The stdio entries through the context only: the far side's
		// HTTP server and its tokens are on that machine's loopback.
		snippets = widget.NewAccordion(widget.NewAccordionItem("Config snippets", container.NewVBox(
			widget.NewLabel("Claude Desktop (claude_desktop_config.json), through context "+t.remote.Name), t.Desktop,
			widget.NewLabel("Claude Code over stdio, through context "+t.remote.Name), t.CodeHTTP,
			container.NewHBox(t.CopyDesk, t.CopyHTTP),
		)))
	}
	connectPart, snippetsPart := t.Connect.content(), snippets
	editor := container.NewVBox(
		t.Name,
		connectPart,
		widget.NewCard("Permissions", "", container.NewVBox(
			t.Enabled,
			widget.NewForm(widget.NewFormItem("Commands per turn", t.MaxCmds)),
			t.Background, t.KeepsAwake, t.PluginOK,
			widget.NewForm(widget.NewFormItem("Network", t.Network)),
		)),
		widget.NewCard("Limits in the VM", "", container.NewVBox(
			widget.NewForm(
				widget.NewFormItem("Max processes", t.MaxProcs),
				widget.NewFormItem("Memory (MB)", t.MemoryMB),
				widget.NewFormItem("CPU weight", t.CPUWeight)),
			t.Usage,
		)),
		container.NewHBox(t.SaveAgent, t.RemoveBtn, t.Terminal),
		t.Status,
		snippetsPart,
		t.secretsContent(),
		t.logContent(),
		t.Memory.content(),
	)
	list := container.New(&widthWatch{onWidth: func(float32) { t.sizeRows() }}, t.List)
	left := container.NewBorder(nil, container.NewBorder(nil, nil, nil, t.Add, t.NewName), nil, nil, list)
	t.editor = container.NewVScroll(editor)
	t.Empty = widget.NewCard("Add your first agent", "", widget.NewLabel(
		"An agent is an AI assistant's own Linux user in the VM, with its own home and tools.\n\n"+
			"1. Type its name in the box at the bottom left and press Add.\n"+
			"2. Press Connect here to add it to Claude Desktop, Claude Code, Cursor or VS Code.\n"+
			"3. Restart the client (for Claude Code: start a new session) and ask it to run a command in the sandbox."))
	t.showEmpty()
	split := container.NewHSplit(left, container.NewStack(t.editor, t.Empty))
	split.Offset = 0.3
	return split
}

// showEmpty shows the first steps instead of an editor with nothing in
// it while there are no agents.
func (t *agentsTab) showEmpty() {
	if t.Empty == nil {
		return
	}
	if len(t.items) == 0 {
		t.editor.Hide()
		t.Empty.Show()
	} else {
		t.Empty.Hide()
		t.editor.Show()
	}
}

// shown is called when the tab shows: with no agents yet, the name box
// is where to type (focused only then: an object on a hidden tab can't
// take the focus).
func (t *agentsTab) shown() {
	if len(t.items) == 0 {
		t.win.Canvas().Focus(t.NewName)
	}
}

// refresh reloads the list: the owner (another process, or this one)
// may have changed agents.json.
func (t *agentsTab) refresh() {
	t.reg.ReloadIfChanged()
	t.items = t.reg.List()
	t.sizeRows()
	t.List.Refresh()
	t.showSelected()
	t.showEmpty()
}

func itemText(a agents.Agent) string { return fmt.Sprintf("%s  (agent-%s)", a.Name, a.Slug) }

// sizeRows gives each row the height its wrapped name needs at the
// list's width.
func (t *agentsTab) sizeRows() {
	w := t.List.Size().Width - 2*theme.Padding() - theme.ScrollBarSize()
	if w <= 0 {
		return
	}
	for i, a := range t.items {
		l := widget.NewLabel(itemText(a))
		l.Wrapping = fyne.TextWrapWord
		l.Resize(fyne.NewSize(w, l.MinSize().Height))
		t.List.SetItemHeight(i, l.MinSize().Height)
	}
}

// widthWatch lays out its one object over its whole area and reports
// width changes (the agents list re-measures its wrapped names).
type widthWatch struct {
	width   float32
	onWidth func(float32)
}

func (w *widthWatch) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	for _, o := range objs {
		o.Resize(size)
		o.Move(fyne.NewPos(0, 0))
	}
	if size.Width != w.width {
		w.width = size.Width
		w.onWidth(size.Width)
	}
}

func (w *widthWatch) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var s fyne.Size
	for _, o := range objs {
		s = s.Max(o.MinSize())
	}
	return s
}

func (t *agentsTab) selectAgent(id string) {
	t.selected = id
	t.showSelected()
}

func (t *agentsTab) showSelected() {
	a, err := t.reg.Get(t.selected)
	editing := []fyne.Disableable{t.Enabled, t.MaxCmds, t.Background, t.KeepsAwake, t.PluginOK, t.Network, t.MaxProcs, t.MemoryMB, t.CPUWeight, t.SaveAgent, t.RemoveBtn, t.CopyDesk, t.CopyHTTP, t.Regenerate}
	if t.selected == "" || err != nil {
		t.Name.SetText("Select or add an agent")
		for _, w := range editing {
			w.Disable()
		}
		t.Desktop.SetText("")
		t.CodeHTTP.SetText("")
		t.Usage.SetText("")
		t.Connect.show(nil)
		t.showSecrets(nil)
		t.showLog(nil)
		t.Memory.show("")
		return
	}
	for _, w := range editing {
		w.Enable()
	}
	ae := a.AutonomousExec
	t.Name.SetText(fmt.Sprintf("%s — Linux user agent-%s, home %s", a.Name, a.Slug, a.Home()))
	t.Enabled.SetChecked(ae.Enabled)
	t.MaxCmds.SetText(strconv.Itoa(ae.MaxCommandsPerTurn))
	t.Background.SetChecked(ae.BackgroundProcesses)
	t.KeepsAwake.SetChecked(a.BackgroundKeepsAwake())
	t.PluginOK.SetChecked(ae.PluginCreate)
	t.Network.SetText(string(ae.Network))
	for _, f := range []struct {
		w *widget.Entry
		v int
	}{{t.MaxProcs, a.Resources.MaxProcesses}, {t.MemoryMB, a.Resources.MemoryMB}, {t.CPUWeight, a.Resources.CPUWeight}} {
		if f.v == 0 {
			f.w.SetText("")
		} else {
			f.w.SetText(strconv.Itoa(f.v))
		}
	}
	t.showUsage(a)
	// With the env block naming the data folder, as `agent show` prints.
	c := t.Connect.server(a)
	t.Desktop.SetText(c.ClaudeDesktop())
	t.Connect.show(&a)
	if t.remote != nil {
		t.CodeHTTP.SetText(c.ClaudeCodeStdio())
	} else {
		t.CodeHTTP.SetText(c.ClaudeCodeHTTP())
	}
	t.showSecrets(&a)
	t.showLog(&a)
	t.Memory.show(a.Slug)
}

func (t *agentsTab) onAdd() { t.add(agents.HomeRefuse) }

// add adds the agent named in NewName. A home left by a removed agent is
// never taken silently: the user chooses to adopt or delete it.
func (t *agentsTab) add(choice agents.HomeChoice) {
	if t.ops == nil {
		showError(t.win, "Adding the agent failed", errNoOps)
		return
	}
	req := control.AgentAddRequest{Name: t.NewName.Text}
	switch choice {
	case agents.HomeAdopt:
		req.Home = control.HomeAdopt
	case agents.HomePurge:
		req.Home = control.HomePurge
	}
	a, err := t.ops.AddAgent(context.Background(), req)
	if errors.Is(err, agents.ErrHomeExists) {
		t.askHome(err)
		return
	}
	if err != nil {
		showError(t.win, "Adding the agent failed", err)
		return
	}
	t.NewName.SetText("")
	t.selected = a.ID
	t.refresh()
	t.Status.SetText("Added " + a.Name + ".")
}

// askHome shows why the home is in the way and the two ways forward.
func (t *agentsTab) askHome(err error) {
	msg := widget.NewLabel(err.Error() + "\n\nAdopt gives the old files to the new agent; Delete removes them for good.")
	msg.Wrapping = fyne.TextWrapWord
	var d *dialog.CustomDialog
	choose := func(c agents.HomeChoice) func() {
		return func() {
			d.Hide()
			t.HomeDialog = nil
			if c != agents.HomeRefuse {
				t.add(c)
			}
		}
	}
	t.AdoptHome = widget.NewButton("Adopt home", choose(agents.HomeAdopt))
	t.PurgeHome = widget.NewButton("Delete home", choose(agents.HomePurge))
	buttons := container.NewHBox(t.AdoptHome, t.PurgeHome, widget.NewButton("Cancel", choose(agents.HomeRefuse)))
	d = dialog.NewCustomWithoutButtons("The agent's home already exists", container.NewVBox(msg, buttons), t.win)
	d.Resize(fyne.NewSize(520, 240))
	t.HomeDialog = d
	d.Show()
}

func (t *agentsTab) onSave() {
	n, err := strconv.Atoi(t.MaxCmds.Text)
	if err != nil {
		showError(t.win, "Invalid setting", fmt.Errorf("commands per turn: %q is not a whole number (1–%d)", t.MaxCmds.Text, agents.MaxCommandsPerTurn))
		return
	}
	set := []control.Setting{
		{Key: "enabled", Value: strconv.FormatBool(t.Enabled.Checked)},
		{Key: "maxCommandsPerTurn", Value: strconv.Itoa(n)},
		{Key: "backgroundProcesses", Value: strconv.FormatBool(t.Background.Checked)},
		{Key: "backgroundKeepsAwake", Value: strconv.FormatBool(t.KeepsAwake.Checked)},
		{Key: "pluginCreate", Value: strconv.FormatBool(t.PluginOK.Checked)},
		{Key: "network", Value: t.Network.Text},
	}
	for _, f := range []struct {
		w         *widget.Entry
		name, key string
	}{{t.MaxProcs, "max processes", "maxProcesses"}, {t.MemoryMB, "memory (MB)", "memoryMB"}, {t.CPUWeight, "CPU weight", "cpuWeight"}} {
		v := 0 // the default
		if s := strings.TrimSpace(f.w.Text); s != "" {
			if v, err = strconv.Atoi(s); err != nil {
				showError(t.win, "Invalid setting", fmt.Errorf("%s: %q is not a whole number; leave it empty for the default", f.name, f.w.Text))
				return
			}
		}
		set = append(set, control.Setting{Key: f.key, Value: strconv.Itoa(v)})
	}
	if t.ops == nil {
		showError(t.win, "Invalid setting", errNoOps)
		return
	}
	// One change, all settings or none, validated by the owner.
	_, err = t.ops.UpdateAgent(context.Background(), control.AgentUpdateRequest{Agent: t.selected, Settings: set})
	if err != nil {
		showError(t.win, "Invalid setting", err)
		return
	}
	t.refresh()
	t.Status.SetText("Saved.")
}

func (t *agentsTab) onRemove() {
	a, err := t.reg.Get(t.selected)
	if err != nil {
		return
	}
	msg := fmt.Sprintf("Remove %s? Its token stops working at once, and its checkpoints are deleted.\n\nIts home folder %s is kept; remove it with\nosaurus-sandbox agent remove %s --purge.", a.Name, a.Home(), a.Slug)
	dialog.ShowConfirm("Remove agent", msg, func(ok bool) {
		if !ok {
			return
		}
		if t.ops == nil {
			showError(t.win, "Removing the agent failed", errNoOps)
			return
		}
		t.Status.SetText("Removing " + a.Name + "…")
		// The owner's removal reaches into the VM, and the keychain may
		// take a while: off the UI goroutine.
		go func() {
			r, err := t.ops.RemoveAgent(context.Background(), api.RemoveAgentRequest{Agent: a.ID})
			if err == nil {
				// After the status below: its line about the secrets
				// is the last word.
				defer t.removeSecrets(a)
			}
			t.do(func() {
				if t.selected == a.ID && err == nil {
					t.selected = ""
				}
				t.refresh()
				if err != nil {
					showError(t.win, "Removing "+a.Name+" failed", err)
					return
				}
				t.Status.SetText("Removed " + a.Name + ": " + removedText(a, r))
			})
		}()
	}, t.win)
}

func (t *agentsTab) onRegenerate() {
	if t.ops == nil {
		showError(t.win, "Regenerating the token failed", errNoOps)
		return
	}
	if _, err := t.ops.RegenerateToken(context.Background(), t.selected); err != nil {
		showError(t.win, "Regenerating the token failed", err)
		return
	}
	t.reg.ReloadIfChanged() // the owner's new token
	t.showSelected()
	t.Status.SetText("New token: update your MCP client's configuration.")
}

func (t *agentsTab) copy(s string) {
	fyne.CurrentApp().Clipboard().SetContent(s)
	t.Status.SetText("Copied.")
}

// showUsage fills the usage line from the VM, off the UI thread.
func (t *agentsTab) showUsage(a agents.Agent) {
	l := a.Resources.Limits()
	limits := fmt.Sprintf("Limits: %d processes, %d MB memory, CPU weight %d.", l.MaxProcesses, l.MemoryMB, l.CPUWeight)
	if t.usage == nil {
		t.Usage.SetText(limits)
		return
	}
	t.Usage.SetText(limits + " Usage: asking the VM…")
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u, err := t.usage(ctx, a)
		text := limits + " Usage: " + u.Summary(l) + "."
		if err != nil {
			text = limits + " Usage: unknown (" + err.Error() + ")."
		}
		t.do(func() {
			if t.selected == a.ID {
				t.Usage.SetText(text)
			}
		})
	}()
}
