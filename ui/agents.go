package ui

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver"
)

// agentsTab lists agents and edits the selected one.
type agentsTab struct {
	reg *agents.Registry
	win fyne.Window
	exe string

	List    *widget.List
	NewName *widget.Entry
	Add     *widget.Button

	Name       *widget.Label
	Enabled    *widget.Check
	MaxCmds    *widget.Entry
	Background *widget.Check
	PluginOK   *widget.Check
	Network    *widget.SelectEntry
	SaveAgent  *widget.Button
	RemoveBtn  *widget.Button
	Desktop    *widget.Entry
	CodeHTTP   *widget.Entry
	CopyDesk   *widget.Button
	CopyHTTP   *widget.Button
	Regenerate *widget.Button
	Status     *widget.Label
	Memory     *memoryPanel

	items    []agents.Agent
	selected string // agent id
	// onRemoved stops the removed agent's processes and deletes its Linux
	// user in the VM (when it runs); set by the app.
	onRemoved func(context.Context, agents.Agent) (string, error)
	do        func(func())
}

func newAgentsTab(reg *agents.Registry, win fyne.Window, do func(func())) *agentsTab {
	exe, _ := os.Executable()
	t := &agentsTab{reg: reg, win: win, exe: exe, do: do}
	t.List = widget.NewList(
		func() int { return len(t.items) },
		func() fyne.CanvasObject { return widget.NewLabel("agent name") },
		func(i widget.ListItemID, o fyne.CanvasObject) {
			a := t.items[i]
			o.(*widget.Label).SetText(fmt.Sprintf("%s  (agent-%s)", a.Name, a.Slug))
		})
	t.List.OnSelected = func(i widget.ListItemID) { t.selectAgent(t.items[i].ID) }
	t.NewName = widget.NewEntry()
	t.NewName.SetPlaceHolder("New agent name")
	t.Add = widget.NewButton("Add", t.onAdd)

	t.Name = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	t.Enabled = widget.NewCheck("Autonomous exec (write, exec and install tools)", nil)
	t.MaxCmds = widget.NewEntry()
	t.Background = widget.NewCheck("Background processes", nil)
	t.PluginOK = widget.NewCheck("May create plugins", nil)
	// none, outbound, or a domain list typed in (validated on Save).
	t.Network = widget.NewSelectEntry([]string{netpolicy.SettingOutbound, netpolicy.SettingNone})
	t.Network.SetPlaceHolder("none, outbound or example.com,*.example.com")
	t.SaveAgent = widget.NewButton("Save", t.onSave)
	t.RemoveBtn = widget.NewButton("Remove…", t.onRemove)
	t.RemoveBtn.Importance = widget.DangerImportance
	t.Desktop = widget.NewMultiLineEntry()
	t.Desktop.SetMinRowsVisible(7)
	t.CodeHTTP = widget.NewMultiLineEntry()
	t.CodeHTTP.SetMinRowsVisible(3)
	t.CopyDesk = widget.NewButton("Copy Claude Desktop config", func() { t.copy(t.Desktop.Text) })
	t.CopyHTTP = widget.NewButton("Copy Claude Code command", func() { t.copy(t.CodeHTTP.Text) })
	t.Regenerate = widget.NewButton("Regenerate token", t.onRegenerate)
	t.Status = widget.NewLabel("")
	t.Memory = newMemoryPanel(win)
	t.refresh()
	return t
}

func (t *agentsTab) content() fyne.CanvasObject {
	editor := container.NewVBox(
		t.Name, t.Enabled,
		widget.NewForm(widget.NewFormItem("Commands per turn", t.MaxCmds)),
		t.Background, t.PluginOK,
		widget.NewForm(widget.NewFormItem("Network", t.Network)),
		container.NewHBox(t.SaveAgent, t.RemoveBtn),
		widget.NewLabel("MCP: Claude Desktop (claude_desktop_config.json)"), t.Desktop,
		widget.NewLabel("MCP: Claude Code over HTTP (the app must be running)"), t.CodeHTTP,
		container.NewHBox(t.CopyDesk, t.CopyHTTP, t.Regenerate),
		t.Status,
		t.Memory.content(),
	)
	left := container.NewBorder(nil, container.NewBorder(nil, nil, nil, t.Add, t.NewName), nil, nil, t.List)
	split := container.NewHSplit(left, container.NewVScroll(editor))
	split.Offset = 0.3
	return split
}

// refresh reloads the list (the CLI may have changed agents.json).
func (t *agentsTab) refresh() {
	t.reg.Reload()
	t.items = t.reg.List()
	t.List.Refresh()
	t.showSelected()
}

func (t *agentsTab) selectAgent(id string) {
	t.selected = id
	t.showSelected()
}

func (t *agentsTab) showSelected() {
	a, err := t.reg.Get(t.selected)
	editing := []fyne.Disableable{t.Enabled, t.MaxCmds, t.Background, t.PluginOK, t.Network, t.SaveAgent, t.RemoveBtn, t.CopyDesk, t.CopyHTTP, t.Regenerate}
	if t.selected == "" || err != nil {
		t.Name.SetText("Select or add an agent")
		for _, w := range editing {
			w.Disable()
		}
		t.Desktop.SetText("")
		t.CodeHTTP.SetText("")
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
	t.PluginOK.SetChecked(ae.PluginCreate)
	t.Network.SetText(string(ae.Network))
	token, _ := t.reg.Token(a.ID)
	c := mcpserver.Client{Exe: t.exe, Agent: a, Token: token}
	t.Desktop.SetText(c.ClaudeDesktop())
	t.CodeHTTP.SetText(c.ClaudeCodeHTTP())
	t.Memory.show(a.Slug)
}

func (t *agentsTab) onAdd() {
	a, err := t.reg.Add(t.NewName.Text)
	if err != nil {
		showError(t.win, "Adding the agent failed", err)
		return
	}
	t.NewName.SetText("")
	t.selected = a.ID
	t.refresh()
	t.Status.SetText("Added " + a.Name + ".")
}

func (t *agentsTab) onSave() {
	n, err := strconv.Atoi(t.MaxCmds.Text)
	if err != nil {
		showError(t.win, "Invalid setting", fmt.Errorf("commands per turn: %q is not a whole number (1–%d)", t.MaxCmds.Text, agents.MaxCommandsPerTurn))
		return
	}
	_, err = t.reg.Update(t.selected, func(a *agents.Agent) error {
		a.AutonomousExec = agents.AutonomousExec{
			Enabled: t.Enabled.Checked, MaxCommandsPerTurn: n,
			BackgroundProcesses: t.Background.Checked, PluginCreate: t.PluginOK.Checked,
		}
		return a.AutonomousExec.SetNetwork(t.Network.Text)
	})
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
	msg := fmt.Sprintf("Remove %s? Its token stops working at once.\n\nIts home folder %s is kept; remove it with\nosaurus-sandbox agent remove %s --purge.", a.Name, a.Home(), a.Slug)
	dialog.ShowConfirm("Remove agent", msg, func(ok bool) {
		if !ok {
			return
		}
		if _, err := t.reg.Remove(a.ID); err != nil {
			showError(t.win, "Removing the agent failed", err)
			return
		}
		t.selected = ""
		t.refresh()
		t.Status.SetText("Removed " + a.Name + ".")
		if t.onRemoved != nil {
			go func() {
				msg, err := t.onRemoved(context.Background(), a)
				t.do(func() {
					if err != nil {
						showError(t.win, "Removing "+a.User()+" in the VM failed", err)
						return
					}
					t.Status.SetText("Removed " + a.Name + ": " + msg)
				})
			}()
		}
	}, t.win)
}

func (t *agentsTab) onRegenerate() {
	if _, err := t.reg.RegenerateToken(t.selected); err != nil {
		showError(t.win, "Regenerating the token failed", err)
		return
	}
	t.showSelected()
	t.Status.SetText("New token: update your MCP client's configuration.")
}

func (t *agentsTab) copy(s string) {
	fyne.CurrentApp().Clipboard().SetContent(s)
	t.Status.SetText("Copied.")
}
