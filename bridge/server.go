package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/store/memory"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
)

// MaxBody bounds a request body; larger ones get 413.
const MaxBody = 8 << 20

// Bounds of the HTTP side: a request head over MaxHeaderBytes gets 431;
// a kept-alive connection idle for IdleTimeout is closed; an agent holds
// at most MaxConnsPerAgent connections at once.
const (
	MaxHeaderBytes   = 64 << 10
	IdleTimeout      = 30 * time.Second
	MaxConnsPerAgent = 64
)

// IdentityHeader is the header the bridge sets on every request it serves
// to the agent name it read from the kernel. A value the caller sent is
// overwritten, never trusted.
const IdentityHeader = "X-Osaurus-Agent"

// Errors a store reports; the server answers each with its class's
// status (StatusOf).
var (
	// ErrNotFound: the key does not exist for this agent (404).
	ErrNotFound = agentproto.Class(agentproto.ErrNotFound, "not found")
	// ErrUnavailable: the backing service can't be reached (503).
	ErrUnavailable = agentproto.Class(agentproto.ErrUnavailable, "service unavailable")
)

// Secrets reads an agent's secrets. Scrub replaces the agent's secret
// values in text (for log lines).
type Secrets interface {
	Get(agent, key string) (string, error)
	Scrub(agent, text string) string
}

// secretGet reads with the request's ctx when the store takes one
// (secrets.Store: with secretStore client the read is a request to the
// user's machine, given up when the guest's request goes away).
func secretGet(ctx context.Context, st Secrets, agent, key string) (string, error) {
	if cs, ok := st.(interface {
		GetContext(ctx context.Context, agent, key string) (string, error)
	}); ok {
		return cs.GetContext(ctx, agent, key)
	}
	return st.Get(agent, key)
}

// Options configure a Server.
type Options struct {
	// Secrets, when nil, makes the secrets route answer 503.
	Secrets Secrets
	// Config holds per-agent key/value config; nil → 503.
	Config *ConfigStore
	// Log receives POST /api/log lines; nil → 503.
	Log *LogStore
	// Inference answers POST /api/inference/chat; nil → 503.
	Inference Inference
	// Dispatch runs POST /api/agent/dispatch; nil → 503.
	Dispatch Dispatcher
	// Memory backs /api/agent/memory/*; nil → 503.
	Memory *memory.Store
	// Events backs /api/events/emit, /api/events and /api/events/follow;
	// nil → 503.
	Events *events.Store
	// Plugins serves POST /api/plugin/create; nil → 503.
	Plugins PluginCreator
	// PluginSecrets lists the secrets the plugin pluginID, installed for
	// agent, declares: a plugin's command gets only those from the
	// secrets route. Nil gives plugins' commands no secrets.
	PluginSecrets func(agent, pluginID string) []string
	// PluginInference reports whether the plugin pluginID, installed for
	// agent, declares permissions.inference: a plugin's command gets the
	// inference route only then. Nil gives plugins' commands none.
	PluginInference func(agent, pluginID string) bool
	// Rate is the shared limiter; bridge calls count as service "bridge".
	Rate *limit.RateLimiter
	// HostCLI returns osaurus-host for a guest architecture; Attach copies
	// it into the guest. Nil leaves the guest as it is.
	HostCLI func(arch string) ([]byte, error)
	Logf    func(format string, args ...any)
}

// Server is the host API bridge.
type Server struct {
	o    Options
	mux  *http.ServeMux
	ln   *listener
	srv  *http.Server
	once sync.Once

	connsMu sync.Mutex
	conns   map[string]int // open connections per agent
	follows map[string]int // open event follows per agent (connsMu)
}

// New returns a Server; it serves once Handle gets its first connection.
func New(o Options) *Server {
	if o.Rate == nil {
		o.Rate = limit.NewRateLimiter(limit.RateOptions{})
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	s := &Server{o: o, ln: newListener()}
	m := http.NewServeMux()
	m.HandleFunc("GET /api/ping", s.ping)
	m.HandleFunc("GET /api/secrets/{name}", s.getSecret)
	m.HandleFunc("GET /api/config/{key}", s.getConfig)
	m.HandleFunc("POST /api/config/{key}", s.setConfig)
	m.HandleFunc("POST /api/log", s.log)
	m.HandleFunc("POST /api/inference/chat", s.inferenceChat)
	m.HandleFunc("POST /api/agent/dispatch", s.dispatch)
	m.HandleFunc("GET /api/agent/tasks/{id}", s.task)
	m.HandleFunc("POST /api/agent/memory/store", s.memoryStore)
	m.HandleFunc("POST /api/agent/memory/query", s.memoryQuery)
	m.HandleFunc("POST /api/events/emit", s.emitEvent)
	m.HandleFunc("GET /api/events", s.listEvents)
	m.HandleFunc("GET /api/events/follow", s.followEvents)
	m.HandleFunc("POST /api/plugin/create", s.createPlugin)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	s.mux = m
	s.srv = &http.Server{
		Handler: s.Handler(),
		// Every relayed connection holds a descriptor in the guest's
		// PID 1: bound how long one may sit idle or dribble a head. No
		// ReadTimeout: its deadline would cancel the context of a long
		// inference call once the body is read; the per-agent caps
		// bound slow bodies instead.
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if rc, ok := c.(*relayedConn); ok {
				return context.WithValue(ctx, callerKey{}, rc.caller)
			}
			return ctx
		},
		ErrorLog: nil,
	}
	return s
}

// Mux returns the agentproto routes the host serves to the guest: the
// bridge call. The owner of the VM serves it on the guest session.
func (s *Server) Mux() *agentproto.Mux {
	m := agentproto.NewMux()
	m.Handle(agentproto.OpBridge, s.Handle)
	return m
}

// Handle serves one relayed guest connection until the HTTP server is
// done with it.
func (s *Server) Handle(ctx context.Context, c *agentproto.Call) error {
	var req agentproto.BridgeRequest
	if err := c.Decode(&req); err != nil {
		return err
	}
	if !s.admit(req.Agent) {
		return fmt.Errorf("%w: agent %q already has %d connections open to the host API bridge, the limit per agent; close some and retry",
			agentproto.ErrUnavailable, req.Agent, MaxConnsPerAgent)
	}
	defer s.leave(req.Agent)
	s.once.Do(func() { go s.srv.Serve(s.ln) })
	conn, err := c.Accept()
	if err != nil {
		return err
	}
	rc := &relayedConn{Conn: conn, caller: req, done: make(chan struct{})}
	if !s.ln.offer(ctx, rc) {
		rc.Close()
		return agentproto.ErrHijacked
	}
	select {
	case <-rc.done:
	case <-ctx.Done():
		rc.Close()
	}
	return agentproto.ErrHijacked
}

// admit counts one more connection of agent, if it is under the cap.
func (s *Server) admit(agent string) bool {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	if s.conns == nil {
		s.conns = map[string]int{}
	}
	if s.conns[agent] >= MaxConnsPerAgent {
		return false
	}
	s.conns[agent]++
	return true
}

func (s *Server) leave(agent string) {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	if s.conns[agent]--; s.conns[agent] <= 0 {
		delete(s.conns, agent)
	}
}

// Close stops serving.
func (s *Server) Close() error {
	s.ln.Close()
	return s.srv.Close()
}

// Handler is the HTTP side: identity, limits and routes. Tests may serve
// it directly with a caller in the request context.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, _ := CallerOf(r.Context())
		r.Header.Del(IdentityHeader)
		if caller.Agent == "" {
			who := caller.User
			if who == "" {
				who = "uid " + strconv.Itoa(caller.UID)
			}
			writeError(w, http.StatusForbidden, fmt.Sprintf("%s is not an agent user; the bridge serves only agent users (agent-<name>)", who))
			return
		}
		r.Header.Set(IdentityHeader, caller.Agent)
		if err := s.o.Rate.Allow(caller.Agent, "bridge"); err != nil {
			var rej *limit.Rejected
			if errors.As(err, &rej) {
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(rej.RetryAfter.Seconds()))))
			}
			writeError(w, http.StatusTooManyRequests, err.Error())
			return
		}
		if r.ContentLength > MaxBody {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes is over the limit of %d", r.ContentLength, MaxBody))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		if !strings.HasPrefix(r.URL.Path, "/") {
			// "GET * HTTP/1.1" and the like: ServeMux would answer 400
			// with no body, which osaurus-host can't show (found by
			// FuzzBridgeRequest).
			writeError(w, http.StatusBadRequest, fmt.Sprintf("request target %q is not a path; use one such as /api/ping", r.RequestURI))
			return
		}
		if clean := cleanPath(r.URL.Path); clean != r.URL.Path {
			// ServeMux would redirect "/api/./ping" or "//x" with an HTML
			// body; a client inside the VM has no use for a redirect
			// (found by FuzzBridgeRequest).
			writeError(w, http.StatusBadRequest, fmt.Sprintf("path %q is not clean; use %q", r.URL.Path, clean))
			return
		}
		s.mux.ServeHTTP(w, r)
	})
}

// cleanPath is path.Clean that keeps a trailing slash, the form ServeMux
// routes without a redirect.
func cleanPath(p string) string {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

func agentOf(r *http.Request) string { return r.Header.Get(IdentityHeader) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// storeError answers a store's error with the status of its class.
func storeError(w http.ResponseWriter, what string, err error) {
	switch code := StatusOf(err); code {
	case http.StatusNotFound:
		writeError(w, code, what+" not found")
	case http.StatusServiceUnavailable:
		writeError(w, code, err.Error())
	default:
		writeError(w, code, what+": "+err.Error())
	}
}

// decodeBody reads a JSON body, answering 413 or 400 itself.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(r.Body).Decode(v)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is over the limit of %d bytes", MaxBody))
	case err != nil:
		writeError(w, http.StatusBadRequest, "request body: "+err.Error())
	default:
		return true
	}
	return false
}

func (s *Server) ping(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "agent": agentOf(r)})
}

func (s *Server) getSecret(w http.ResponseWriter, r *http.Request) {
	if s.o.Secrets == nil {
		writeError(w, http.StatusServiceUnavailable, "secrets are not available in this app; set them with `osaurus-sandbox secret set AGENT KEY` in an app that has a keychain")
		return
	}
	name := r.PathValue("name")
	// A plugin runs as its agent, so the uid alone would hand it every
	// secret of the agent: the guest names the plugin from the network
	// namespace the caller runs in.
	caller, _ := CallerOf(r.Context())
	switch {
	case caller.Unattributed:
		writeError(w, http.StatusForbidden, unattributed("secrets"))
		return
	case caller.Plugin != "":
		var declared []string
		if s.o.PluginSecrets != nil {
			declared = s.o.PluginSecrets(agentOf(r), caller.Plugin)
		}
		if !slices.Contains(declared, name) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("the plugin %s does not declare the secret %q: a plugin's commands get only the secrets its recipe lists in \"secrets\" (in their environment)", caller.Plugin, name))
			return
		}
	}
	v, err := secretGet(r.Context(), s.o.Secrets, agentOf(r), name)
	if err != nil {
		storeError(w, "secret "+strconv.Quote(name), err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"value": v})
}

// unattributed is the refusal of a route to a caller the guest could not
// attribute to the agent's commands or to one of its plugins.
func unattributed(what string) string {
	return what + " are not given to a process in a network namespace it made itself (unshare): the bridge can't tell the agent's commands from a plugin's there; use them from a command the sandbox started"
}

// configScope is the plugin whose config scope the caller gets ("" for
// the agent's own); false (answered) for a caller the guest could not
// attribute. Like secrets: a plugin's commands run as their agent, so
// only the guest's attribution keeps the agent's commands out of what a
// plugin keeps (and a plugin out of its agent's).
func configScope(w http.ResponseWriter, r *http.Request) (string, bool) {
	caller, _ := CallerOf(r.Context())
	if caller.Unattributed {
		writeError(w, http.StatusForbidden, unattributed("config values"))
		return "", false
	}
	return caller.Plugin, true
}

func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) {
	if s.o.Config == nil {
		writeError(w, http.StatusServiceUnavailable, "config storage is not available in this app")
		return
	}
	scope, ok := configScope(w, r)
	if !ok {
		return
	}
	v, ok, err := s.o.Config.GetIn(agentOf(r), scope, r.PathValue("key"))
	switch {
	case err != nil:
		storeError(w, "config", err)
	case !ok:
		writeJSON(w, http.StatusOK, map[string]string{})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"value": v})
	}
}

func (s *Server) setConfig(w http.ResponseWriter, r *http.Request) {
	if s.o.Config == nil {
		writeError(w, http.StatusServiceUnavailable, "config storage is not available in this app")
		return
	}
	scope, ok := configScope(w, r)
	if !ok {
		return
	}
	var body struct {
		Value *string `json:"value"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if body.Value == nil {
		writeError(w, http.StatusBadRequest, `request body needs "value" (a string)`)
		return
	}
	agent, key, value := agentOf(r), r.PathValue("key"), *body.Value
	// The config file lies in the data folder in clear: the agent's
	// secret values are kept out of it as out of its logs. A key is
	// refused rather than rewritten, since it names what the agent reads.
	if s.o.Secrets != nil {
		if s.o.Secrets.Scrub(agent, key) != key {
			writeError(w, http.StatusBadRequest, "config key: it contains the value of one of your secrets, and config keys are stored in clear; name the key otherwise")
			return
		}
		value = s.o.Secrets.Scrub(agent, value)
	}
	if err := s.o.Config.SetIn(agent, scope, key, value); err != nil {
		var bad *BadKeyError
		if errors.As(err, &bad) {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		storeError(w, "config", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{})
}

func (s *Server) log(w http.ResponseWriter, r *http.Request) {
	if s.o.Log == nil {
		writeError(w, http.StatusServiceUnavailable, "the log buffer is not available in this app")
		return
	}
	var body struct {
		Level   string `json:"level"`
		Message string `json:"message"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if strings.TrimSpace(body.Message) == "" {
		writeError(w, http.StatusBadRequest, `request body needs a non-empty "message"`)
		return
	}
	agent := agentOf(r)
	msg := body.Message
	if s.o.Secrets != nil {
		msg = s.o.Secrets.Scrub(agent, msg)
	}
	if err := s.o.Log.Append(agent, body.Level, msg); err != nil {
		var bad *BadKeyError
		if errors.As(err, &bad) {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		storeError(w, "log", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{})
}
