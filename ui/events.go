package ui

import (
	"context"
	"fmt"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/internal/termsafe"
)

// eventsShown bounds the Events view; older ones stay in the log
// (`osaurus-sandbox events`).
const eventsShown = 500

// eventsView is the Events tab: what agents emit with `osaurus-host
// events emit`, live, newest at the bottom.
type eventsView struct {
	do     func(func())
	cancel context.CancelFunc

	List   *widget.List
	Agent  *widget.Entry
	Status *widget.Label

	all []control.Event
	// shown is all filtered by Agent.
	shown []control.Event
}

func newEventsView(do func(func())) *eventsView {
	v := &eventsView{do: do}
	v.List = widget.NewList(
		func() int { return len(v.shown) },
		func() fyne.CanvasObject { return widget.NewLabel("event") },
		func(i widget.ListItemID, o fyne.CanvasObject) {
			e := v.shown[i]
			o.(*widget.Label).SetText(fmt.Sprintf("%s  %s  %s  %s", e.Time.Local().Format(time.DateTime), e.Agent, termsafe.Line(e.Type), oneLine(string(e.Payload), 160)))
		})
	v.Agent = widget.NewEntry()
	v.Agent.SetPlaceHolder("Only this agent (slug); empty for all")
	v.Agent.OnChanged = func(string) { v.filter() }
	v.Status = widget.NewLabel("The event log is not available in this app.")
	return v
}

func (v *eventsView) content() fyne.CanvasObject {
	return container.NewBorder(container.NewVBox(v.Agent, v.Status), nil, nil, nil, v.List)
}

// start follows the owner's event log (this process's Host, or the
// owner's over the control socket) until close; nil shows it as
// unavailable.
func (v *eventsView) start(store api.DataOps) {
	if store == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	v.cancel = cancel
	v.Status.SetText("Events agents emit with `osaurus-host events emit TYPE [PAYLOAD]` appear here as they happen.")
	go func() {
		err := store.FollowEvents(ctx, control.EventFilter{Last: eventsShown}, func(e control.Event) error {
			v.do(func() { v.add(e) })
			return nil
		})
		if err != nil && ctx.Err() == nil {
			v.do(func() { v.Status.SetText("Following the event log stopped: " + err.Error()) })
		}
	}()
}

func (v *eventsView) close() {
	if v.cancel != nil {
		v.cancel()
	}
}

func (v *eventsView) add(e control.Event) {
	v.all = append(v.all, e)
	if len(v.all) > eventsShown {
		v.all = v.all[len(v.all)-eventsShown:]
	}
	if v.Agent.Text == "" || v.Agent.Text == e.Agent {
		v.shown = append(v.shown, e)
		if len(v.shown) > eventsShown {
			v.shown = v.shown[len(v.shown)-eventsShown:]
		}
		v.List.Refresh()
		v.List.ScrollToBottom()
	}
}

func (v *eventsView) filter() {
	v.shown = v.shown[:0]
	for _, e := range v.all {
		if v.Agent.Text == "" || v.Agent.Text == e.Agent {
			v.shown = append(v.shown, e)
		}
	}
	v.List.Refresh()
}
