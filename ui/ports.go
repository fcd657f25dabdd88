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

// portsTab lists the ports agents exposed with sandbox_expose_port, each
// with Open (the default browser) and Close.
type portsTab struct {
	file   string
	closer api.PortCloser // nil: the backend can't close previews
	open   func(*url.URL) error
	win    fyne.Window
	do     func(func())

	Rows    []*portRow
	Status  *widget.Label
	Refresh *widget.Button
	rows    *fyne.Container
}

type portRow struct {
	Preview     preview
	Label       *widget.Label
	Open, Close *widget.Button
}

func newPortsTab(a fyne.App, b Backend, p config.Paths, win fyne.Window, do func(func())) *portsTab {
	t := &portsTab{file: p.PreviewsFile(), open: a.OpenURL, win: win, do: do}
	t.closer, _ = b.(api.PortCloser)
	t.Status = wrapped("")
	t.rows = container.NewVBox()
	t.Refresh = widget.NewButton("Refresh", t.reload)
	t.reload()
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

func (t *portsTab) reload() { list, err := readPreviews(t.file); t.show(list, err) }

func (t *portsTab) show(list []preview, err error) {
	t.Rows = nil
	t.rows.Objects = nil
	switch {
	case err != nil:
		t.Status.SetText("The previews can't be read: " + err.Error())
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
		r := &portRow{Preview: p, Label: widget.NewLabel(fmt.Sprintf("%s  port %d  →  %s  (since %s)", p.Agent, p.Port, u, p.Since.Local().Format(time.DateTime)))}
		r.Open = widget.NewButton("Open", func() {
			if err := t.open(u); err != nil {
				t.Status.SetText("Can't open " + u.String() + ": " + err.Error())
			}
		})
		r.Close = widget.NewButton("Close", func() { t.close(p) })
		if t.closer == nil {
			r.Close.Disable()
		}
		t.Rows = append(t.Rows, r)
		t.rows.Add(container.NewBorder(nil, nil, nil, container.NewHBox(r.Open, r.Close), r.Label))
	}
	t.rows.Refresh()
}

// close has the owner close one preview; the list follows its file.
func (t *portsTab) close(p preview) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := t.closer.ClosePorts(ctx, api.ClosePortsRequest{Agent: p.Agent, Port: p.Port})
		list, rerr := readPreviews(t.file)
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
