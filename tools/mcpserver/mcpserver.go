// Package mcpserver serves an agent's sandbox tools over the Model Context
// Protocol, so Claude Desktop, Claude Code, Cursor or any MCP client can
// use the sandbox.
//
// Two transports: stdio (`osaurus-sandbox mcp --agent NAME`, one agent per
// process) and streamable HTTP on loopback, served by the running app at
// http://127.0.0.1:47821/mcp, where the bearer token picks the agent.
//
// The tools listed follow the agent's settings: write and exec tools appear
// only while autonomous exec is on. When the registry changes, the list is
// updated and clients are told (notifications/tools/list_changed).
package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/filewatch"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// Config is what every MCP server of a process shares.
type Config struct {
	// Invoker runs the tools; when nil, Env does.
	Invoker  tools.Invoker
	Env      *tools.Env
	Registry *agents.Registry
	// Version is reported to clients.
	Version string
	// Logger gets the SDK's messages; nil discards them.
	Logger *slog.Logger
	// Events, when set, are delivered to the agent's sessions as log
	// notifications (see startEvents): the owner's event log, or the
	// owner's through the control socket in any other process.
	Events EventLog
}

// EventLog is the event log as the sessions follow it (store/events'
// Store in the owner).
type EventLog interface {
	// LastID is the id of the newest event (0 when there is none).
	LastID(ctx context.Context) (int64, error)
	// Follow calls fn with every event f selects, then each new one,
	// until ctx ends or fn fails.
	Follow(ctx context.Context, f control.EventFilter, fn func(control.Event) error) error
}

// AgentServer is the MCP server of one agent, kept in step with the
// agent's settings in the registry.
type AgentServer struct {
	cfg   Config
	id    string
	srv   *mcp.Server
	unsub func()

	agent  atomic.Pointer[agents.Agent] // settings snapshot; nil once the agent is removed
	mu     sync.Mutex                   // serialises sync
	listed map[string]bool
	// skill: the Sandbox Plugin Creator prompt is listed (and the
	// instructions carry it); see syncSkill.
	skill atomic.Bool
	// newTurn is set by a session's start; the next tool call ends the
	// agent's turn first.
	newTurn atomic.Bool
}

// NewAgentServer returns the server of the agent ref (id, slug or name).
// Close it when done.
func NewAgentServer(cfg Config, ref string) (*AgentServer, error) {
	a, err := cfg.Registry.Get(ref)
	if err != nil {
		return nil, err
	}
	if cfg.Invoker == nil {
		cfg.Invoker = cfg.Env
	}
	s := &AgentServer{cfg: cfg, id: a.ID, listed: map[string]bool{}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "osaurus-sandbox", Title: "Osaurus Sandbox", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: instructions(a), // liveInstructions adds the skill
		Logger:       cfg.Logger,
		//lint:ignore SA1019 logging carries the agent's events (see startEvents).
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{},
			Prompts: &mcp.PromptCapabilities{ListChanged: true}},
		// A new session is a new conversation: start a new turn for the
		// exec limiter. A client of the 2025 protocol starts one with the
		// initialized notification; a stateless (SEP-2575) client has no
		// handshake and starts with server/discover (see sessionStart).
		// The turn ends before the session's next tool call, not in the
		// handler, which may still run when that call does.
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) {
			s.newTurn.Store(true)
		},
	})
	s.srv.AddReceivingMiddleware(s.unlisted, s.sessionStart, s.liveInstructions)
	s.sync()
	unsubAgents, unsubPlugins := cfg.Registry.Subscribe(s.sync), cfg.Env.SubscribePlugins(s.sync)
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.Events != nil {
		s.startEvents(ctx, cfg.Events, a.Slug)
	}
	s.unsub = func() { unsubAgents(); unsubPlugins(); cancel() }
	return s, nil
}

// unlisted answers calls of tools that aren't listed, which the SDK would
// refuse with a bare protocol error, with an envelope instead: a
// tool_not_found that says why (e.g. autonomous exec is off) and what the
// agent can use.
func (s *AgentServer) unlisted(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if r, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && r.Params != nil {
			s.mu.Lock()
			listed := s.listed[r.Params.Name]
			s.mu.Unlock()
			if !listed {
				return s.handler(r.Params.Name)(ctx, r)
			}
		}
		return next(ctx, method, req)
	}
}

// methodDiscover is how a stateless (SEP-2575) client opens a connection;
// it sends no initialize or initialized.
const methodDiscover = "server/discover"

// sessionStart marks a stateless client's server/discover as the start of
// a session, as initialized is for a client of the 2025 protocol.
func (s *AgentServer) sessionStart(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == methodDiscover {
			s.newTurn.Store(true)
		}
		return next(ctx, method, req)
	}
}

// liveInstructions answers initialize and server/discover with the
// instructions as the agent's settings and plugins are now: the SDK's are
// fixed when the server is made, and one HTTP server serves an agent for
// the app's life.
func (s *AgentServer) liveInstructions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		a := s.agent.Load()
		if err != nil || a == nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.InitializeResult:
			r.Instructions = s.instructions(*a)
		case *mcp.DiscoverResult:
			r.Instructions = s.instructions(*a)
		}
		return res, err
	}
}

// instructions are the server's instructions for a, with the Sandbox
// Plugin Creator skill appended while it applies (tools.Toolset.PluginCreatorSkill).
func (s *AgentServer) instructions(a agents.Agent) string {
	text := instructions(a)
	if s.skill.Load() {
		text += "\n\n" + tools.PluginCreatorSkillText()
	}
	return text
}

func instructions(a agents.Agent) string {
	return "These tools work inside an isolated Linux VM (the Osaurus sandbox) as the Linux user " + a.User() +
		". Your home is " + a.Home() + "; /workspace/shared is shared with other agents. " +
		"Every tool returns a JSON envelope: {ok, result, warnings} or {ok: false, kind, message, retryable, field, expected}; " +
		"read the message and fix the call."
}

// MCP is the SDK server, for Run or a transport handler.
func (s *AgentServer) MCP() *mcp.Server { return s.srv }

// Close stops following the registry.
func (s *AgentServer) Close() { s.unsub() }

// sync makes the registered tools match the agent's current settings. The
// SDK announces every change to connected clients.
func (s *AgentServer) sync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	var specs []tools.Spec
	skill := false
	a, err := s.cfg.Registry.Get(s.id)
	if err == nil {
		s.agent.Store(&a)
		ts := s.cfg.Env.Toolset(a)
		specs = ts.List() // with the agent's installed plugins' tools
		skill = ts.PluginCreatorSkill()
	} else {
		s.agent.Store(nil)
	}
	s.syncSkill(skill)
	want := map[string]tools.Spec{}
	for _, sp := range specs {
		want[sp.Name] = sp
	}
	var gone []string
	for name := range s.listed {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
			delete(s.listed, name)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if !s.listed[name] {
			s.srv.AddTool(toolOf(want[name]), s.handler(name))
			s.listed[name] = true
		}
	}
}

// syncSkill lists the Sandbox Plugin Creator prompt while on is set, and
// withdraws it otherwise; the SDK announces the change
// (notifications/prompts/list_changed).
func (s *AgentServer) syncSkill(on bool) {
	if s.skill.Swap(on) == on {
		return
	}
	if !on {
		s.srv.RemovePrompts(tools.PluginCreatorSkillName)
		return
	}
	text := tools.PluginCreatorSkillText()
	s.srv.AddPrompt(&mcp.Prompt{Name: tools.PluginCreatorSkillName, Title: tools.PluginCreatorSkillTitle,
		Description: "How to author, test and register a sandbox plugin (a JSON recipe) that adds tools you keep."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: tools.PluginCreatorSkillTitle,
				Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}, nil
		})
}

func toolOf(sp tools.Spec) *mcp.Tool {
	return &mcp.Tool{
		Name:         sp.Name,
		Title:        sp.Title,
		Description:  sp.Description,
		InputSchema:  sp.InputSchema,
		OutputSchema: sp.OutputSchema,
		Annotations: &mcp.ToolAnnotations{
			Title:           sp.Title,
			ReadOnlyHint:    sp.ReadOnly,
			DestructiveHint: &sp.Destructive,
			IdempotentHint:  sp.Idempotent,
			OpenWorldHint:   &sp.OpenWorld,
		},
	}
}

// handler runs a tool with the agent's current settings. The envelope is
// the text content; failures set IsError so clients show them as such.
func (s *AgentServer) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var env envelope.Envelope
		if a := s.agent.Load(); a == nil {
			env = envelope.Fail(name, envelope.ToolNotFound, "this agent was removed; its tools are gone")
		} else {
			var args json.RawMessage
			if req.Params != nil {
				args = req.Params.Arguments
			}
			if el := urlElicitor(req.Session); el != nil {
				ctx = tools.WithURLElicitor(ctx, el)
			}
			if s.newTurn.CompareAndSwap(true, false) {
				s.cfg.Invoker.EndTurn(ctx, s.id)
			}
			env = s.cfg.Invoker.RunTool(ctx, *a, name, args)
		}
		img, env := imageOf(env)
		// The envelope is both the text (for clients that read only text)
		// and the structuredContent its outputSchema describes.
		text := env.JSON()
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}},
			StructuredContent: json.RawMessage(text), IsError: env.IsError()}
		if img != nil {
			res.Content = append(res.Content, img)
		}
		if link := artifactLink(env); link != nil {
			res.Content = append(res.Content, link)
		}
		return res, nil
	}
}

// Watch re-reads the registry when its file changes, until ctx ends, so
// changes the owner made reach the servers of a process that only reads
// the registry (the stdio server of `osaurus-sandbox mcp`). The owner, the
// file's one writer, needs no watch: its servers hear its own changes.
// interval is the polling fallback's (see filewatch).
func Watch(ctx context.Context, reg *agents.Registry, interval time.Duration, logf func(string, ...any)) {
	w := filewatch.Watch(ctx, interval, filewatch.File(reg.Path()))
	defer w.Close()
	var last string
	for {
		// The file is read only when it was replaced: a signal is also
		// sent for this process's own writes. The first check covers what
		// changed before the watch started.
		if err := reg.ReloadIfChanged(); err != nil {
			if msg := err.Error(); msg != last && logf != nil {
				logf("agents registry: %v", err)
				last = msg
			}
		} else {
			last = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-w.C():
		}
	}
}

// WatchPlugins has the servers re-read the installed plugins when an
// agent's install record changes, until ctx ends, so installs made by
// another process reach this one's servers. interval is the polling
// fallback's, and the period for a store that keeps no files.
func WatchPlugins(ctx context.Context, env *tools.Env, interval time.Duration) {
	ts, ok := env.PluginWatchTargets()
	if !ok {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				env.RefreshPlugins()
			}
		}
	}
	w := filewatch.Watch(ctx, interval, ts...)
	defer w.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.C():
		}
		ts, _ = env.PluginWatchTargets()
		w.Reset(ts...) // before the read, so that nothing after it is missed
		env.RefreshPlugins()
	}
}

// ServeStdio serves agent ref over a stream pair (os.Stdin and os.Stdout
// for `osaurus-sandbox mcp`) until the client disconnects or ctx ends.
func ServeStdio(ctx context.Context, cfg Config, ref string, t mcp.Transport) error {
	s, err := NewAgentServer(cfg, ref)
	if err != nil {
		return err
	}
	defer s.Close()
	// The stream is one client's one session, whatever its protocol
	// (a stateless client may skip server/discover): its first tool call
	// starts a new turn.
	s.newTurn.Store(true)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go Watch(ctx, cfg.Registry, 2*time.Second, nil)
	go WatchPlugins(ctx, cfg.Env, 2*time.Second)
	err = s.srv.Run(ctx, t)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// imageOf takes an image result's bytes out of env (sandbox_read_file of
// an image, tools.ImageResult) and returns them as image content, so the
// model sees the picture and the text stays small. The result may be the
// struct (this process ran the tool) or its JSON decoding (the owner ran
// it).
func imageOf(env envelope.Envelope) (*mcp.ImageContent, envelope.Envelope) {
	if !env.OK || env.Tool != "sandbox_read_file" {
		return nil, env
	}
	b, err := json.Marshal(env.Result)
	if err != nil {
		return nil, env
	}
	var r tools.ImageResult
	if json.Unmarshal(b, &r) != nil || r.Kind != "image" || r.Data == "" {
		return nil, env
	}
	data, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		return nil, env
	}
	r.Data = ""
	env.Result = r
	return &mcp.ImageContent{Data: data, MIMEType: r.MIMEType}, env
}

// artifactLink is the resource link to the host file a successful
// sandbox_share_artifact made (tools.ArtifactResult), so clients can show
// or open it; nil without a host path.
func artifactLink(env envelope.Envelope) *mcp.ResourceLink {
	if !env.OK || env.Tool != "sandbox_share_artifact" {
		return nil
	}
	b, err := json.Marshal(env.Result)
	if err != nil {
		return nil
	}
	var r tools.ArtifactResult
	if json.Unmarshal(b, &r) != nil || r.Kind != "artifact" || !filepath.IsAbs(r.HostPath) {
		return nil
	}
	size := r.Size
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(r.HostPath)}
	return &mcp.ResourceLink{URI: u.String(), Name: r.Name, Title: r.Name, Description: "Shared by the agent at " + r.Path,
		MIMEType: r.MIMEType, Size: &size}
}
