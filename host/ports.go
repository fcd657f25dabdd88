package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"encoding/json"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// MaxPreviewsPerAgent bounds the ports one agent keeps exposed.
const MaxPreviewsPerAgent = 8

// Preview is an agent's port exposed on the host's loopback.
type Preview struct {
	Agent    string    `json:"agent"` // slug
	Port     int       `json:"port"`  // in the agent's network namespace
	HostPort int       `json:"hostPort"`
	URL      string    `json:"url"`
	Since    time.Time `json:"since"`
	ln       net.Listener
}

// Ports relays previews: a listener on 127.0.0.1 per exposed port, each
// connection carried by the guest agent into the agent's own network
// namespace (agentproto.OpPortDial). Only the agent itself exposes its
// ports (the tool names no agent), the relay dials only that agent's
// loopback, and every preview closes when the agent is removed or the VM
// stops.
type Ports struct {
	// Guest is the running VM's agent.
	Guest func(context.Context) (*agentproto.Client, error)
	// StateFile, when set, lists the open previews for `osaurus-sandbox
	// ports`, rewritten on every change.
	StateFile string
	Logf      func(string, ...any)

	mu   sync.Mutex
	list []*Preview
}

// Expose opens a preview of a's port, or returns the one open. It fails
// when nothing of a's answers on the port.
func (p *Ports) Expose(ctx context.Context, a agents.Agent, port int) (string, error) {
	if port < 1 || port > 65535 {
		return "", fmt.Errorf("port %d: want 1–65535", port)
	}
	p.mu.Lock()
	for _, pv := range p.list {
		if pv.Agent == a.Slug && pv.Port == port {
			p.mu.Unlock()
			return pv.URL, nil
		}
	}
	n := 0
	for _, pv := range p.list {
		if pv.Agent == a.Slug {
			n++
		}
	}
	p.mu.Unlock()
	if n >= MaxPreviewsPerAgent {
		return "", fmt.Errorf("%s already exposes %d ports, the limit; the user can close some with `osaurus-sandbox ports close %s`", a.Name, n, a.Slug)
	}
	// Something must listen there now: the same dial the relay makes,
	// into the agent's own namespace only.
	g, err := p.Guest(ctx)
	if err != nil {
		return "", err
	}
	if !g.Speaks(agentproto.MinorPortDial) {
		return "", oldGuestError(g)
	}
	c, err := g.DialPort(ctx, a.User(), port)
	if err != nil {
		return "", err
	}
	c.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	hp := ln.Addr().(*net.TCPAddr).Port
	pv := &Preview{Agent: a.Slug, Port: port, HostPort: hp, URL: "http://127.0.0.1:" + strconv.Itoa(hp) + "/", Since: time.Now().UTC(), ln: ln}
	p.mu.Lock()
	p.list = append(p.list, pv)
	p.saveLocked()
	p.mu.Unlock()
	go p.serve(pv, a.User())
	if p.Logf != nil {
		p.Logf("%s exposes its port %d at %s", a.Name, port, pv.URL)
	}
	return pv.URL, nil
}

// errOldGuest: the VM runs a guest agent from before previews; the app's
// own agent reaches the guest at the VM's next start.
var errOldGuest = agentproto.Class(agentproto.ErrUnsupported, "the VM runs an older guest agent that can't relay ports")

func oldGuestError(g *agentproto.Client) error {
	return fmt.Errorf("%w (protocol %d.%d; previews need %d.%d): ask the user to restart the VM "+
		"(osaurus-sandbox stop, then osaurus-sandbox start) so it boots this app's guest agent, or to reset it (osaurus-sandbox reset)",
		errOldGuest, g.Info.Major, g.Info.Minor, agentproto.VersionMajor, agentproto.MinorPortDial)
}

func (p *Ports) serve(pv *Preview, user string) {
	for {
		c, err := pv.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			g, err := p.Guest(ctx)
			var rc io.ReadWriteCloser
			if err == nil {
				rc, err = g.DialPort(ctx, user, pv.Port)
			}
			cancel()
			if err != nil {
				return
			}
			defer rc.Close()
			done := make(chan struct{})
			go func() {
				io.Copy(rc, c)
				if s, ok := rc.(interface{ CloseWrite() error }); ok {
					s.CloseWrite()
				}
				close(done)
			}()
			io.Copy(c, rc)
			c.Close()
			<-done
		}()
	}
}

// List returns the open previews.
func (p *Ports) List() []Preview {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []Preview{}
	for _, pv := range p.list {
		out = append(out, Preview{Agent: pv.Agent, Port: pv.Port, HostPort: pv.HostPort, URL: pv.URL, Since: pv.Since})
	}
	return out
}

// Close closes agent's previews (every agent's when agent is ""), or only
// the one of port when port is not 0. It returns how many it closed.
func (p *Ports) Close(agent string, port int) int {
	p.mu.Lock()
	var closing []*Preview
	p.list = slices.DeleteFunc(p.list, func(pv *Preview) bool {
		if (agent == "" || pv.Agent == agent) && (port == 0 || pv.Port == port) {
			closing = append(closing, pv)
			return true
		}
		return false
	})
	p.saveLocked()
	p.mu.Unlock()
	for _, pv := range closing {
		pv.ln.Close()
	}
	return len(closing)
}

func (p *Ports) saveLocked() {
	if p.StateFile == "" {
		return
	}
	list := []Preview{}
	for _, pv := range p.list {
		list = append(list, *pv)
	}
	b, _ := json.Marshal(list)
	if err := os.MkdirAll(filepath.Dir(p.StateFile), 0o755); err == nil {
		if err := atomicfile.WriteFile(p.StateFile, b, 0o644); err != nil && p.Logf != nil {
			p.Logf("previews: %v", err)
		}
	}
}

// ReadPreviews reads the list an owner keeps in file; none when it is missing.
func ReadPreviews(file string) ([]Preview, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return []Preview{}, nil
	}
	if err != nil {
		return nil, err
	}
	var list []Preview
	return list, json.Unmarshal(b, &list)
}

// ClosePorts closes previews for the control socket (`osaurus-sandbox
// ports close`).
func (h *ToolHost) ClosePorts(_ context.Context, req api.ClosePortsRequest) (api.ClosePortsResult, error) {
	if h.Ports == nil {
		return api.ClosePortsResult{}, nil
	}
	return api.ClosePortsResult{Closed: h.Ports.Close(req.Agent, req.Port)}, nil
}
