package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"encoding/json"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// MaxPreviewsPerAgent bounds the ports one agent keeps exposed.
const MaxPreviewsPerAgent = 8

// MaxPreviewConns bounds one preview's open connections: more wait in the
// listener's queue until one closes. PreviewIdle is how long a connection
// may stay silent (no request begun, or idle between requests) before the
// preview closes it.
const (
	MaxPreviewConns = 32
	PreviewIdle     = 2 * time.Minute
)

// Preview is an agent's port exposed on the host's loopback: what front
// ends see of it, and the relay that serves it.
type Preview struct {
	api.Preview
	ln  net.Listener
	srv *http.Server // nil until it serves
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
	// MaxConns and Idle override MaxPreviewConns and PreviewIdle (tests).
	MaxConns int
	Idle     time.Duration

	// dial, when set, replaces the guest's relay (tests).
	dial func(ctx context.Context, user string, port int) (io.ReadWriteCloser, error)

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
	c, err := p.dialPort(ctx, a.User(), port)
	if err != nil {
		return "", err
	}
	c.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	hp := ln.Addr().(*net.TCPAddr).Port
	pv := &Preview{Preview: api.Preview{Agent: a.Slug, Port: port, HostPort: hp, URL: "http://127.0.0.1:" + strconv.Itoa(hp) + "/", Since: time.Now().UTC()}, ln: ln}
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

// dialPort opens a connection to user's port in its own network
// namespace, through the guest agent.
func (p *Ports) dialPort(ctx context.Context, user string, port int) (io.ReadWriteCloser, error) {
	if p.dial != nil {
		return p.dial(ctx, user, port)
	}
	g, err := p.Guest(ctx)
	if err != nil {
		return nil, err
	}
	if !g.Speaks(agentproto.MinorPortDial) {
		return nil, oldGuestError(g)
	}
	return g.DialPort(ctx, user, port)
}

// serve answers the preview's HTTP requests by relaying each to the
// agent's port. Only requests addressed to the preview itself (Host
// 127.0.0.1:PORT or localhost:PORT) pass: a web page that rebinds its own
// name to 127.0.0.1 sends its name as Host, and gets 403, so it can't
// read what the agent serves. Connections are bounded in number
// (MaxPreviewConns, the rest queue) and in idle time (PreviewIdle).
func (p *Ports) serve(pv *Preview, user string) {
	idle, maxConns := p.Idle, p.MaxConns
	if idle <= 0 {
		idle = PreviewIdle
	}
	if maxConns <= 0 {
		maxConns = MaxPreviewConns
	}
	allowed := map[string]bool{
		"127.0.0.1:" + strconv.Itoa(pv.HostPort): true,
		"localhost:" + strconv.Itoa(pv.HostPort): true,
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := p.dialPort(ctx, user, pv.Port)
			if err != nil {
				return nil, err
			}
			return relayConn{c}, nil
		},
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     idle,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "preview"
			r.Out.Host = r.In.Host // as the browser addressed it
		},
		Transport: tr,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, fmt.Sprintf("preview of port %d: the agent's server did not answer: %v", pv.Port, err), http.StatusBadGateway)
		},
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !allowed[strings.ToLower(r.Host)] {
				http.Error(w, fmt.Sprintf("this preview answers only requests to %s (Host %q refused: a page on another name can't read it)", pv.URL, r.Host), http.StatusForbidden)
				return
			}
			proxy.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: idle,
		IdleTimeout:       idle,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	p.mu.Lock()
	pv.srv = srv
	p.mu.Unlock()
	srv.Serve(netutil.LimitListener(pv.ln, maxConns))
}

// relayConn is a relayed stream as the net.Conn http.Transport wants:
// its deadlines are not the transport's to set (it times out by closing).
type relayConn struct{ io.ReadWriteCloser }

func (relayConn) LocalAddr() net.Addr              { return relayAddr{} }
func (relayConn) RemoteAddr() net.Addr             { return relayAddr{} }
func (relayConn) SetDeadline(time.Time) error      { return nil }
func (relayConn) SetReadDeadline(time.Time) error  { return nil }
func (relayConn) SetWriteDeadline(time.Time) error { return nil }

type relayAddr struct{}

func (relayAddr) Network() string { return "relay" }
func (relayAddr) String() string  { return "agent port" }

// List returns the open previews.
func (p *Ports) List() []api.Preview {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []api.Preview{}
	for _, pv := range p.list {
		out = append(out, pv.Preview)
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
		p.mu.Lock()
		srv := pv.srv
		p.mu.Unlock()
		pv.ln.Close()
		if srv != nil {
			srv.Close() // its open connections too
		}
	}
	return len(closing)
}

func (p *Ports) saveLocked() {
	if p.StateFile == "" {
		return
	}
	list := []api.Preview{}
	for _, pv := range p.list {
		list = append(list, pv.Preview)
	}
	b, _ := json.Marshal(list)
	if err := os.MkdirAll(filepath.Dir(p.StateFile), 0o755); err == nil {
		if err := atomicfile.WriteFile(p.StateFile, b, 0o644); err != nil && p.Logf != nil {
			p.Logf("previews: %v", err)
		}
	}
}

// ReadPreviews reads the list an owner keeps in file; none when it is missing.
func ReadPreviews(file string) ([]api.Preview, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return []api.Preview{}, nil
	}
	if err != nil {
		return nil, err
	}
	var list []api.Preview
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
