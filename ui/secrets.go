package ui

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// Secrets is the agents' secret store in the OS keychain, as the window
// uses it (secrets.Store). Values go in; only names come out.
type Secrets interface {
	List(agent string) ([]string, error)
	Set(agent, key, value string) error
	Remove(agent, key string) error
	RemoveAll(agent string) ([]string, error)
}

// secretsView is the Agents tab's list of the selected agent's secret
// names, with Set and Remove.
type secretsView struct {
	List      *widget.List
	SetBtn    *widget.Button
	RemoveSec *widget.Button
	Note      *widget.Label

	names    []string
	selected int // index into names, -1 for none
}

func (t *agentsTab) newSecretsView() {
	v := &secretsView{selected: -1}
	v.List = widget.NewList(
		func() int { return len(v.names) },
		func() fyne.CanvasObject { return widget.NewLabel("SECRET_NAME") },
		func(i widget.ListItemID, o fyne.CanvasObject) { o.(*widget.Label).SetText(v.names[i]) })
	v.List.OnSelected = func(i widget.ListItemID) { v.selected = i; v.RemoveSec.Enable() }
	v.List.OnUnselected = func(widget.ListItemID) { v.selected = -1; v.RemoveSec.Disable() }
	v.SetBtn = widget.NewButton("Set…", func() { t.onSetSecret("", "") })
	v.RemoveSec = widget.NewButton("Remove", t.onRemoveSecret)
	v.Note = widget.NewLabel("")
	v.Note.Wrapping = fyne.TextWrapWord
	t.sec = v
}

// secretsWhere names the store the secrets go to (the OS keychain, or the
// file the secretStore setting chose), for labels.
func (t *agentsTab) secretsWhere() string {
	if w, ok := t.secrets.(interface{ Where() string }); ok {
		return w.Where()
	}
	return "the OS keychain"
}

func (t *agentsTab) secretsContent() fyne.CanvasObject {
	v := t.sec
	return container.NewBorder(
		widget.NewLabel("Secrets (the agent's commands read them with osaurus-host, models never see them)"),
		container.NewVBox(container.NewHBox(v.SetBtn, v.RemoveSec), v.Note),
		nil, nil,
		container.NewGridWrap(fyne.NewSize(420, 110), v.List))
}

// showSecrets reloads the selected agent's secret names.
func (t *agentsTab) showSecrets(a *agents.Agent) {
	v := t.sec
	v.names, v.selected = nil, -1
	v.List.UnselectAll()
	v.RemoveSec.Disable()
	var why error
	if a != nil && t.secrets != nil {
		why = unavailable(t.secrets)
	}
	switch {
	case a == nil:
		v.SetBtn.Disable()
		v.Note.SetText("")
	case t.secrets == nil:
		v.SetBtn.Disable()
		v.Note.SetText("No secret store is connected to this window.")
	case why != nil:
		// A remote context's owner that keeps its own secrets: nothing
		// set here would be read.
		v.SetBtn.Disable()
		v.Note.SetText(why.Error() + ".")
	default:
		v.SetBtn.Enable()
		names, err := t.secrets.List(a.Slug)
		switch {
		case err != nil:
			v.Note.SetText("The secrets can't be read: " + err.Error())
		case len(names) == 0:
			v.Note.SetText(a.Name + " has no secrets.")
		default:
			v.Note.SetText("")
		}
		v.names = names
	}
	v.List.Refresh()
}

func (t *agentsTab) onSetSecret(key, description string) {
	a, err := t.reg.Get(t.selected)
	if err != nil || t.secrets == nil {
		return
	}
	name := widget.NewEntry()
	name.SetPlaceHolder("OPENAI_API_KEY")
	name.SetText(key)
	name.Validator = func(s string) error {
		if s == "" {
			return errors.New("a name such as OPENAI_API_KEY")
		}
		return nil
	}
	value := widget.NewPasswordEntry()
	value.Validator = nonEmpty
	t.SecretKey, t.SecretValue = name, value
	items := []*widget.FormItem{widget.NewFormItem("Name", name), widget.NewFormItem("Value", value)}
	items[1].HintText = "Stored in " + t.secretsWhere()
	dialog.ShowForm("Set a secret of "+a.Name, "Save", "Cancel", items, func(ok bool) {
		t.SecretKey, t.SecretValue = nil, nil
		if !ok {
			return
		}
		if err := t.secrets.Set(a.Slug, name.Text, value.Text); err != nil {
			showError(t.win, "Storing the secret failed", err)
			return
		}
		t.showSecrets(&a)
		t.Status.SetText("Stored " + name.Text + " for " + a.Name + ".")
	}, t.win)
}

func (t *agentsTab) onRemoveSecret() {
	a, err := t.reg.Get(t.selected)
	v := t.sec
	if err != nil || t.secrets == nil || v.selected < 0 || v.selected >= len(v.names) {
		return
	}
	key := v.names[v.selected]
	dialog.ShowConfirm("Remove secret", fmt.Sprintf("Remove %s from %s's secrets?\nIts commands can no longer read it.", key, a.Name), func(ok bool) {
		if !ok {
			return
		}
		if err := t.secrets.Remove(a.Slug, key); err != nil {
			showError(t.win, "Removing the secret failed", err)
			return
		}
		t.showSecrets(&a)
		t.Status.SetText("Removed " + key + " from " + a.Name + ".")
	}, t.win)
}

// unavailable is why s can't be used now (farSecrets), nil when it can.
func unavailable(s Secrets) error {
	if a, ok := s.(interface{ Available() error }); ok {
		return a.Available()
	}
	return nil
}

func nonEmpty(s string) error {
	if s == "" {
		return errors.New("type the value")
	}
	return nil
}

// promptSecret asks the user for a secret an agent wants
// (sandbox_secret_set without a value), in a password dialog naming the
// agent and the key, until the user answers or ctx ends. It is the
// window's channel of secretprompt.Broker and runs on any goroutine.
func (t *agentsTab) promptSecret(ctx context.Context, req tools.SecretRequest) (string, bool) {
	type answer struct {
		v  string
		ok bool
	}
	ch := make(chan answer, 1)
	var d dialog.Dialog
	t.do(func() {
		value := widget.NewPasswordEntry()
		value.Validator = nonEmpty
		t.PromptValue = value
		items := []*widget.FormItem{
			widget.NewFormItem("Agent", widget.NewLabel(req.Agent.Name+" (agent-"+req.Agent.Slug+")")),
			widget.NewFormItem("Secret", widget.NewLabelWithStyle(req.Key, fyne.TextAlignLeading, fyne.TextStyle{Monospace: true})),
		}
		if s := strings.TrimSpace(req.Description); s != "" {
			// The model's words, so labelled as the agent's.
			l := widget.NewLabel("“" + s + "”")
			l.Wrapping = fyne.TextWrapWord
			items = append(items, widget.NewFormItem("The agent says", l))
		}
		vi := widget.NewFormItem("Value", value)
		vi.HintText = "Goes to " + t.secretsWhere() + "; the agent's model never sees it"
		items = append(items, vi)
		fd := dialog.NewForm("Secret requested by "+req.Agent.Name, "Save", "Deny", items, func(ok bool) {
			t.PromptValue = nil
			select {
			case ch <- answer{value.Text, ok && value.Text != ""}:
			default:
			}
		}, t.win)
		fd.Resize(fyne.NewSize(520, 300))
		d = fd
		t.win.Show()
		t.win.RequestFocus()
		fd.Show()
		t.win.Canvas().Focus(value)
	})
	select {
	case a := <-ch:
		return a.v, a.ok
	case <-ctx.Done():
		// Answered elsewhere, timed out or cancelled: withdraw the dialog.
		t.do(func() {
			if d != nil {
				d.Hide()
			}
		})
		return "", false
	}
}

// removeSecrets deletes a removed agent's secrets, so a later agent of
// the same name starts without them. Called off the UI goroutine.
func (t *agentsTab) removeSecrets(a agents.Agent) {
	if t.secrets == nil {
		return
	}
	gone, err := t.secrets.RemoveAll(a.Slug)
	t.do(func() {
		switch {
		case err != nil:
			showError(t.win, "Deleting "+a.Name+"'s secrets from the keychain failed", err)
		case len(gone) > 0:
			t.Status.SetText(fmt.Sprintf("Removed %s and its secrets %s.", a.Name, strings.Join(gone, ", ")))
		}
	})
}
