package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
)

// DefaultAddr is where the app serves MCP over HTTP. Loopback only: the
// tools run code, so nothing off this machine may reach them.
const DefaultAddr = "127.0.0.1:47821"

// Path is the one HTTP endpoint.
const Path = "/mcp"

// ErrNotLoopback: the address would expose the server beyond this machine.
var ErrNotLoopback = agentproto.Class(agentproto.ErrInvalid, "the MCP HTTP server only listens on a loopback address")

// HTTPHandler serves every agent at Path. The request's bearer token picks
// the agent; each agent has its own SDK handler, so a session of one
// agent can't be used with another agent's token.
type HTTPHandler struct {
	cfg   Config
	unsub func()

	mu     sync.Mutex
	agents map[string]*httpAgent // by agent id
}

type httpAgent struct {
	srv *AgentServer
	h   *mcp.StreamableHTTPHandler
}

// NewHTTPHandler returns the handler. Close it when done.
func NewHTTPHandler(cfg Config) *HTTPHandler {
	h := &HTTPHandler{cfg: cfg, agents: map[string]*httpAgent{}}
	h.unsub = cfg.Registry.Subscribe(h.prune)
	return h
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		httpError(w, http.StatusNotFound, "not found; the MCP endpoint is "+Path)
		return
	}
	tok, ok := bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="osaurus-sandbox"`)
		httpError(w, http.StatusUnauthorized, "missing bearer token; `osaurus-sandbox agent show NAME` prints the header to use")
		return
	}
	a, ok := h.cfg.Registry.ByToken(tok)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="osaurus-sandbox", error="invalid_token"`)
		httpError(w, http.StatusUnauthorized, "unknown bearer token")
		return
	}
	ha, err := h.forAgent(a)
	if err != nil {
		httpError(w, http.StatusUnauthorized, err.Error())
		return
	}
	ha.h.ServeHTTP(&scrubResponse{ResponseWriter: w}, r)
}

// scrubResponse takes Go type names out of the JSON-RPC errors the SDK
// writes, as the stdio transport does: each Write is one JSON message or
// one server-sent event.
type scrubResponse struct{ http.ResponseWriter }

func (s *scrubResponse) Write(p []byte) (int, error) {
	if !goTypeRE.Match(p) {
		return s.ResponseWriter.Write(p)
	}
	out := p
	if len(p) > 0 && p[0] == '{' {
		out = ScrubGoTypes(p)
	} else {
		lines := bytes.Split(p, []byte("\n"))
		for i, l := range lines {
			if d, ok := bytes.CutPrefix(l, []byte("data: ")); ok {
				lines[i] = append([]byte("data: "), ScrubGoTypes(d)...)
			}
		}
		out = bytes.Join(lines, []byte("\n"))
	}
	if _, err := s.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap lets http.ResponseController flush the stream.
func (s *scrubResponse) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func (h *HTTPHandler) forAgent(a agents.Agent) (*httpAgent, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ha := h.agents[a.ID]; ha != nil {
		return ha, nil
	}
	s, err := NewAgentServer(h.cfg, a.ID)
	if err != nil {
		return nil, err
	}
	ha := &httpAgent{srv: s, h: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.MCP() },
		&mcp.StreamableHTTPOptions{Logger: h.cfg.Logger, SessionTimeout: time.Hour})}
	h.agents[a.ID] = ha
	return ha, nil
}

// prune drops the servers of removed agents.
func (h *HTTPHandler) prune() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, ha := range h.agents {
		if _, err := h.cfg.Registry.Get(id); errors.Is(err, agents.ErrNotFound) {
			ha.srv.Close()
			delete(h.agents, id)
			if h.cfg.Env != nil {
				h.cfg.Env.Forget(id)
			}
		}
	}
}

// Close stops following the registry.
func (h *HTTPHandler) Close() {
	h.unsub()
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, ha := range h.agents {
		ha.srv.Close()
		delete(h.agents, id)
	}
}

// Listen opens addr after checking it is a loopback IP address.
func Listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("MCP address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%w: %q", ErrNotLoopback, addr)
	}
	return net.Listen("tcp", addr)
}

// Serve serves h on ln until ctx ends, then shuts down gracefully.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return err
}
