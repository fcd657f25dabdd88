package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/remotes"
)

// ClosePorts has the owner close agents' previews, as `ports close` does.
func (c *Controlled) ClosePorts(ctx context.Context, req api.ClosePortsRequest) (api.ClosePortsResult, error) {
	pc, ok := c.ctl.(api.PortCloser)
	if !ok {
		return api.ClosePortsResult{}, errors.New("the app that owns the sandbox can't close previews; update it")
	}
	return pc.ClosePorts(ctx, req)
}

// preview is one exposed port as the owner lists it in its previews file
// (host.Preview).
type preview struct {
	Agent    string    `json:"agent"`
	Port     int       `json:"port"`
	HostPort int       `json:"hostPort"`
	URL      string    `json:"url"`
	Since    time.Time `json:"since"`
}

// previewSource is what the Ports tab lists: this machine's owner's
// previews file (previewsFile), or a remote context's owner's previews,
// asked over the link (farPreviews).
type previewSource interface {
	previews(ctx context.Context) ([]preview, error)
}

// previewsFile is the previews file of this machine's owner.
type previewsFile string

func (f previewsFile) previews(context.Context) ([]preview, error) { return readPreviews(string(f)) }

// farPreviews are a remote context's previews, as its owner lists them.
type farPreviews struct{ ctl api.Controller }

func (f farPreviews) previews(ctx context.Context) ([]preview, error) {
	l, err := f.ctl.Previews(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]preview, 0, len(l))
	for _, p := range l {
		out = append(out, preview{Agent: p.Agent, Port: p.Port, HostPort: p.HostPort, URL: p.URL, Since: p.Since})
	}
	return out, nil
}

// portsTab lists the ports agents exposed with sandbox_expose_port, each
// with Open (the default browser) and Close. A remote context's are on
// the far machine's loopback: Open first forwards one here over the
// context's ssh.
type portsTab struct {
	file   string        // this machine's previews file ("" for a remote context)
	src    previewSource // where the list is read
	remote *remotes.Context
	closer api.PortCloser // nil: the backend can't close previews
	open   func(*url.URL) error
	// forward gives this machine's port for a remote context's far
	// preview port (RemoteBackend.Forward); nil: no Open.
	forward func(farPort int) (int, error)
	win     fyne.Window
	do      func(func())

	Rows    []*portRow
	Status  *widget.Label
	Refresh *widget.Button
	rows    *fyne.Container
}

type portRow struct {
	Preview     preview
	Label       *widget.Label
	Open, Close *widget.Button // Open nil for a remote context's that can't be forwarded
}

func newPortsTab(a fyne.App, b Backend, p config.Paths, win fyne.Window, do func(func())) *portsTab {
	t := &portsTab{file: p.PreviewsFile(), open: a.OpenURL, win: win, do: do}
	t.src = previewsFile(t.file)
	t.closer, _ = b.(api.PortCloser)
	t.Status = wrapped("")
	t.rows = container.NewVBox()
	t.Refresh = widget.NewButton("Refresh", t.reload)
	t.reload()
	return t
}

// newFarPortsTab is the Ports tab of remote context rc, whose owner is
// far: it reads and closes the previews there, and Open forwards one
// (forward) before opening it here (open).
func newFarPortsTab(rc remotes.Context, far api.Controller, forward func(int) (int, error), open func(*url.URL) error, win fyne.Window, do func(func())) *portsTab {
	t := &portsTab{src: farPreviews{ctl: far}, remote: &rc, forward: forward, open: open, win: win, do: do}
	t.closer, _ = far.(api.PortCloser) // client.Client is one
	t.Status = wrapped("Asking " + rc.Name + " for its previews…")
	t.rows = container.NewVBox()
	t.Refresh = widget.NewButton("Refresh", t.reload)
	return t
}

// readPreviews reads the owner's previews file; none is an empty list.
func readPreviews(file string) ([]preview, error) {
	var list []preview
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return list, nil
}

// previewURL is where p is reached on this computer. It is built from
// the host port, never taken from the file: Open goes to loopback only.
func previewURL(p preview) (*url.URL, bool) {
	if p.HostPort < 1 || p.HostPort > 65535 {
		return nil, false
	}
	return &url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(p.HostPort), Path: "/"}, true
}

// reload reads the list again: this machine's file at once, a remote
// context's off the UI goroutine. Call on the UI goroutine.
func (t *portsTab) reload() {
	if t.remote == nil {
		list, err := t.src.previews(context.Background())
		t.show(list, err)
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), farCall)
		defer cancel()
		list, err := t.src.previews(ctx)
		t.do(func() { t.show(list, err) })
	}()
}

func (t *portsTab) show(list []preview, err error) {
	t.Rows = nil
	t.rows.Objects = nil
	switch {
	case err != nil:
		t.Status.SetText("The previews can't be read: " + err.Error())
	case t.remote != nil:
		rc := t.remote
		n := "No ports exposed on " + rc.Name + "."
		if len(list) > 0 {
			n = "Ports agents exposed on " + rc.Name + "."
		}
		t.Status.SetText(fmt.Sprintf("%s Their URLs are on %s's loopback, not this computer's: Open forwards one to this computer's 127.0.0.1 over SSH while this window shows %s (an agent's relay, `osaurus-sandbox --context %s mcp --agent NAME`, forwards the previews it opens in the same way).",
			n, rc.Name, rc.Name, rc.Name))
	case len(list) == 0:
		t.Status.SetText("No ports exposed. An agent exposes a server it runs with its sandbox_expose_port tool; it shows here with a URL on this computer.")
	default:
		t.Status.SetText("Ports agents exposed, reachable from this computer only (127.0.0.1).")
	}
	for _, p := range list {
		u, ok := previewURL(p)
		if !ok {
			continue
		}
		where := u.String()
		if t.remote != nil {
			where += " on " + t.remote.Name
		}
		r := &portRow{Preview: p, Label: widget.NewLabel(fmt.Sprintf("%s  port %d  →  %s  (since %s)", p.Agent, p.Port, where, p.Since.Local().Format(time.DateTime)))}
		r.Close = widget.NewButton("Close", func() { t.close(p) })
		if t.closer == nil {
			r.Close.Disable()
		}
		buttons := container.NewHBox(r.Close)
		switch {
		case t.remote == nil:
			r.Open = widget.NewButton("Open", func() {
				if err := t.open(u); err != nil {
					t.Status.SetText("Can't open " + u.String() + ": " + err.Error())
				}
			})
		case t.forward != nil: // a far loopback URL: forwarded here first
			r.Open = widget.NewButton("Open", func() { t.openFar(p) })
		}
		if r.Open != nil {
			buttons = container.NewHBox(r.Open, r.Close)
		}
		t.Rows = append(t.Rows, r)
		t.rows.Add(container.NewBorder(nil, nil, nil, buttons, r.Label))
	}
	t.rows.Refresh()
}

// openFar forwards a remote context's preview p to this machine's
// loopback and opens the local URL. Listening here is all it does at
// once: ssh runs when the browser connects.
func (t *portsTab) openFar(p preview) {
	rc := t.remote
	lp, err := t.forward(p.HostPort)
	if err != nil {
		t.Status.SetText(fmt.Sprintf("Can't forward %s's port %d from %s: %v", p.Agent, p.Port, rc.Name, err))
		return
	}
	u := &url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(lp), Path: "/"}
	if err := t.open(u); err != nil {
		t.Status.SetText("Can't open " + u.String() + ": " + err.Error())
		return
	}
	t.Status.SetText(fmt.Sprintf("Opened %s: %s's port %d, forwarded over SSH from %s's 127.0.0.1:%d while this window shows %s.", u, p.Agent, p.Port, rc.Name, p.HostPort, rc.Name))
}

// close has the owner close one preview, then reads the list again.
func (t *portsTab) close(p preview) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), farCall)
		defer cancel()
		_, err := t.closer.ClosePorts(ctx, api.ClosePortsRequest{Agent: p.Agent, Port: p.Port})
		list, rerr := t.src.previews(ctx)
		t.do(func() {
			t.show(list, rerr)
			if err != nil {
				t.Status.SetText(fmt.Sprintf("Closing %s's port %d failed: %v", p.Agent, p.Port, err))
			}
		})
	}()
}

func (t *portsTab) content() fyne.CanvasObject {
	top := container.NewBorder(nil, nil, nil, t.Refresh, t.Status)
	return container.NewBorder(top, nil, nil, nil, container.NewVScroll(t.rows))
}
