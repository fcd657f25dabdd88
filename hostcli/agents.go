package hostcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/control"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/sandbox"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver"
)

const agentUsage = `usage:
  osaurus-sandbox agent add NAME
  osaurus-sandbox agent list [--json]
  osaurus-sandbox agent show NAME        settings and MCP client configuration
  osaurus-sandbox agent set NAME KEY VALUE
  osaurus-sandbox agent remove NAME [--purge]
keys: name, enabled, maxCommandsPerTurn, pluginCreate, backgroundProcesses, network
network: none | outbound | a comma-separated domain list, e.g. "example.com,*.example.com";
  it applies to the agent's next command`

func (c *cli) openAgents() (*agents.Registry, error) { return agents.Open(c.paths.AgentsJSON()) }

func (c *cli) agent(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(c.err, agentUsage)
		return ExitUsage
	}
	reg, err := c.openAgents()
	if err != nil {
		return c.fail(err)
	}
	sub, args := args[0], args[1:]
	switch {
	case sub == "add" && len(args) == 1:
		a, err := reg.Add(args[0])
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "added %s: Linux user %s, home %s\nautonomous exec is off; turn it on with `osaurus-sandbox agent set %s enabled true`\n",
			a.Name, a.User(), a.Home(), a.Slug)
		return ExitOK
	case sub == "list" && (len(args) == 0 || len(args) == 1 && args[0] == "--json"):
		list := reg.List()
		if len(args) == 1 {
			json.NewEncoder(c.out).Encode(list)
			return ExitOK
		}
		if len(list) == 0 {
			fmt.Fprintln(c.out, "no agents; add one with `osaurus-sandbox agent add NAME`")
			return ExitOK
		}
		w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tSLUG\tUSER\tAUTONOMOUS EXEC\tCOMMANDS/TURN\tBACKGROUND")
		for _, a := range list {
			ae := a.AutonomousExec
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", a.Name, a.Slug, a.User(), onOff(ae.Enabled), ae.MaxCommandsPerTurn, onOff(ae.BackgroundProcesses))
		}
		w.Flush()
		return ExitOK
	case sub == "show" && len(args) == 1:
		return c.agentShow(reg, args[0])
	case sub == "set" && len(args) == 3:
		a, err := reg.Update(args[0], func(a *agents.Agent) error { return setAgent(a, args[1], args[2]) })
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "saved %s; connected MCP clients see the change\n", a.Name)
		return ExitOK
	case sub == "remove" && len(args) >= 1:
		fs := c.flags("agent remove")
		purge := fs.Bool("purge", false, "also delete the agent's home directory and everything in it")
		if fs.Parse(args[1:]) != nil || fs.NArg() > 0 {
			fmt.Fprintln(c.err, agentUsage)
			return ExitUsage
		}
		return c.agentRemove(ctx, reg, args[0], *purge)
	}
	fmt.Fprintln(c.err, agentUsage)
	return ExitUsage
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// setAgent changes one setting; the registry validates the result.
func setAgent(a *agents.Agent, key, value string) error {
	ae := &a.AutonomousExec
	flag := map[string]*bool{
		"enabled": &ae.Enabled, "pluginCreate": &ae.PluginCreate,
		"backgroundProcesses": &ae.BackgroundProcesses,
	}
	key = strings.TrimPrefix(key, "autonomousExec.")
	switch {
	case key == "name":
		a.Name = value
	case key == "network":
		// The old boolean spellings still work: on means outbound.
		if b, ok := map[string]bool{"true": true, "on": true, "false": false, "off": false}[strings.ToLower(value)]; ok {
			value = netpolicy.Migrate(b)
		}
		return ae.SetNetwork(value)
	case key == "maxCommandsPerTurn":
		n, err := strconv.Atoi(value)
		if err != nil {
			return &agents.ValidationError{Field: key, Got: strconv.Quote(value), Want: "a whole number"}
		}
		ae.MaxCommandsPerTurn = n
	case flag[key] != nil:
		b, ok := map[string]bool{"true": true, "on": true, "yes": true, "1": true, "false": false, "off": false, "no": false, "0": false}[strings.ToLower(value)]
		if !ok {
			return &agents.ValidationError{Field: key, Got: strconv.Quote(value), Want: "true or false"}
		}
		*flag[key] = b
	default:
		return &agents.ValidationError{Field: "key", Got: strconv.Quote(key),
			Want: "one of name, enabled, maxCommandsPerTurn, pluginCreate, backgroundProcesses, network"}
	}
	return nil
}

func (c *cli) agentShow(reg *agents.Registry, ref string) int {
	a, err := reg.Get(ref)
	if err != nil {
		return c.fail(err)
	}
	tok, err := reg.Token(a.ID)
	if err != nil {
		return c.fail(err)
	}
	ae := a.AutonomousExec
	fmt.Fprintf(c.out, "%s (id %s)\n  Linux user:           %s\n  home:                 %s\n", a.Name, a.ID, a.User(), a.Home())
	fmt.Fprintf(c.out, "  autonomous exec:      %s (enabled)\n  commands per turn:    %d (maxCommandsPerTurn)\n", onOff(ae.Enabled), ae.MaxCommandsPerTurn)
	fmt.Fprintf(c.out, "  background processes: %s (backgroundProcesses)\n  plugin create:        %s (pluginCreate)\n  network:              %s (network)\n",
		onOff(ae.BackgroundProcesses), onOff(ae.PluginCreate), ae.Network)
	if p, err := a.NetworkPolicy(); err == nil {
		fmt.Fprintf(c.out, "  network in force:     %s\n", p.Describe())
	}
	cl := c.mcpClient(a, tok)
	fmt.Fprintf(c.out, "\nClaude Desktop (claude_desktop_config.json):\n%s\n", cl.ClaudeDesktop())
	fmt.Fprintf(c.out, "\nClaude Code, stdio:\n  %s\n", cl.ClaudeCodeStdio())
	fmt.Fprintf(c.out, "\nClaude Code, HTTP (needs the app or `osaurus-sandbox serve` running):\n  %s\n", cl.ClaudeCodeHTTP())
	fmt.Fprintln(c.out, "\nThe bearer token is this agent's password: keep it private.")
	return ExitOK
}

func (c *cli) mcpClient(a agents.Agent, tok string) mcpserver.Client {
	exe, err := os.Executable()
	if err != nil {
		exe = "osaurus-sandbox"
	}
	cl := mcpserver.Client{Exe: exe, Agent: a, Token: tok}
	if os.Getenv(config.HomeEnv) != "" {
		cl.Env = map[string]string{config.HomeEnv: c.paths.Root}
	}
	return cl
}

func (c *cli) agentRemove(ctx context.Context, reg *agents.Registry, ref string, purge bool) int {
	a, err := reg.Remove(ref)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "removed %s from the registry; its token no longer works\n", a.Name)
	g, err := c.runningGuest(ctx)
	if err != nil {
		if purge {
			// The workspace is a host folder: the home can go without the VM.
			if err := os.RemoveAll(filepath.Join(c.paths.Workspace(), "agents", a.Slug)); err != nil {
				return c.fail(err)
			}
			fmt.Fprintf(c.out, "deleted its home %s\n", a.Home())
		}
		fmt.Fprintf(c.out, "the VM is not running, so the Linux user %s stays in it until the VM is reset\n", a.User())
		return ExitOK
	}
	if err := tools.RemoveUser(ctx, g, a, purge); err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "stopped its processes and deleted the Linux user %s\n", a.User())
	if purge {
		fmt.Fprintf(c.out, "deleted its home %s\n", a.Home())
	} else {
		fmt.Fprintf(c.out, "kept its home %s (use --purge to delete it)\n", a.Home())
	}
	return ExitOK
}

// runningGuest returns the guest through the owner when the VM runs.
func (c *cli) runningGuest(ctx context.Context) (*agentproto.Client, error) {
	cl, err := control.Dial(ctx, c.paths)
	if err != nil {
		return nil, err
	}
	st, err := cl.Status(ctx)
	if err == nil && st.State != sandbox.Running {
		err = sandbox.ErrNotRunning
	}
	if err != nil {
		cl.Close()
		return nil, err
	}
	return cl.Guest(ctx)
}

// mcp serves an agent's tools over stdin and stdout. Nothing else may be
// written to stdout: it carries the protocol.
func (c *cli) mcp(ctx context.Context, args []string) int {
	fs := c.flags("mcp")
	ref := fs.String("agent", "", "the agent whose tools to serve (name, slug or id)")
	if fs.Parse(args) != nil || fs.NArg() > 0 || *ref == "" {
		fmt.Fprintln(c.err, "usage: osaurus-sandbox mcp --agent NAME")
		return ExitUsage
	}
	reg, err := c.openAgents()
	if err != nil {
		return c.fail(err)
	}
	guest := &relayGuest{paths: c.paths}
	defer guest.close()
	cfg := mcpserver.Config{
		Env:      tools.NewEnv(tools.Options{Guest: guest.get, Agents: reg, Redactor: secretStore, Plugins: c.installedPlugins(), Registry: pluginRegistry(c.paths)}),
		Registry: reg,
		Version:  Version,
		Logger:   slog.New(slog.NewTextHandler(c.err, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Events:   eventsOrNil(ctx, c.paths, nil),
	}
	in, out := c.in, c.out
	t := &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}
	if err := mcpserver.ServeStdio(ctx, cfg, *ref, t); err != nil {
		return c.fail(err)
	}
	return ExitOK
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// relayGuest reaches the guest through the owner process, starting the
// owner and the VM when needed, on the first tool call rather than at
// startup: an MCP client starts its servers eagerly.
type relayGuest struct {
	paths config.Paths

	mu sync.Mutex
	cl *control.Client
	g  *agentproto.Client
}

func (r *relayGuest) get(ctx context.Context) (*agentproto.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.g != nil && r.g.Peer.Err() != nil {
		r.close() // the owner went away
	}
	if r.cl == nil {
		cl, err := connect(ctx, r.paths)
		if err != nil {
			return nil, err
		}
		r.cl = cl
	}
	st, err := r.cl.Status(ctx)
	if err != nil {
		r.close()
		return nil, err
	}
	switch st.State {
	case sandbox.Running:
	case sandbox.NotProvisioned, sandbox.Provisioning:
		return nil, fmt.Errorf("%w: the sandbox is not provisioned yet; run `osaurus-sandbox start` once", sandbox.ErrNotRunning)
	default:
		sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		if _, err := r.cl.Lifecycle(sctx, control.OpStart, nil); err != nil {
			return nil, fmt.Errorf("starting the sandbox VM: %w", err)
		}
	}
	if r.g == nil {
		g, err := r.cl.Guest(ctx)
		if err != nil {
			return nil, err
		}
		r.g = g
	}
	return r.g, nil
}

func (r *relayGuest) close() {
	if r.cl != nil {
		r.cl.Close()
	}
	r.cl, r.g = nil, nil
}

// serveMCP starts the MCP HTTP server of the owner process on
// mcpserver.DefaultAddr. Tool calls start the VM when it is stopped. A
// busy port is logged, not fatal: the VM works without MCP over HTTP.
func serveMCP(p config.Paths, m *sandbox.Manager, logf func(string, ...any)) (stop func()) {
	reg, err := agents.Open(p.AgentsJSON())
	if err != nil {
		logf("mcp: %v", err)
		return func() {}
	}
	ln, err := mcpserver.Listen(mcpserver.DefaultAddr)
	if err != nil {
		logf("mcp: not serving HTTP: %v", err)
		return func() {}
	}
	cfg := mcpserver.Config{
		Env:      tools.NewEnv(tools.Options{Guest: managerGuest(m), Agents: reg, Redactor: secretStore, Plugins: plugins.NewInstalled(p.AgentStateDir()), Registry: pluginRegistry(p)}),
		Registry: reg,
		Version:  Version,
		Events:   eventsOrNil(context.Background(), p, logf),
	}
	h := mcpserver.NewHTTPHandler(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	go mcpserver.Watch(ctx, reg, 2*time.Second, logf)
	go mcpserver.WatchPlugins(ctx, cfg.Env, 2*time.Second)
	go func() {
		if err := mcpserver.Serve(ctx, ln, h); err != nil {
			logf("mcp: %v", err)
		}
	}()
	logf("mcp: serving agents at http://%s%s", mcpserver.DefaultAddr, mcpserver.Path)
	return func() { cancel(); h.Close() }
}

// managerGuest is the owner's guest: the running VM's agent, starting the
// VM first when it is stopped (not when it needs provisioning, which
// downloads hundreds of megabytes).
func managerGuest(m *sandbox.Manager) tools.GuestFunc {
	return func(ctx context.Context) (*agentproto.Client, error) {
		if g, err := m.Agent(); err == nil {
			return g, nil
		}
		if st := m.Status().State; st == sandbox.NotProvisioned || st == sandbox.Provisioning {
			return nil, fmt.Errorf("%w: the sandbox is not provisioned yet; provision it in the app or with `osaurus-sandbox start`", sandbox.ErrNotRunning)
		}
		// The boot continues when this call gives up: a second call, or
		// the user, will want the VM anyway.
		done := make(chan error, 1)
		go func() { done <- m.Start(context.WithoutCancel(ctx)) }()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, sandbox.ErrBusy) {
				return nil, fmt.Errorf("starting the sandbox VM: %w", err)
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return m.Agent()
	}
}
