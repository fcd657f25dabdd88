package hostcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diskquota"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver/connect"
	"github.com/osaurus/osaurus-sandbox/tools/secretprompt"
	"golang.org/x/text/width"
)

const agentUsage = `usage:
  osaurus-sandbox agent add NAME [--adopt-home | --purge-home]
  osaurus-sandbox agent list [--json]
  osaurus-sandbox agent show NAME [--json] settings, resource use and MCP client configuration
  osaurus-sandbox agent set NAME KEY VALUE
  osaurus-sandbox agent remove NAME [--purge] [--yes]
  osaurus-sandbox agent repair
  osaurus-sandbox agent connect NAME --client claude-desktop|claude-code|cursor|vscode|generic [--dry-run] [--yes]
  osaurus-sandbox agent disconnect NAME [--client ID] [--yes]
  osaurus-sandbox agent checkpoint NAME [LABEL] | checkpoints NAME | restore NAME LABEL | fork NAME NEW
keys: projects (comma-separated project names, or none), dispatchTo (comma-separated agents, or none), name, enabled, maxCommandsPerTurn, pluginCreate, backgroundProcesses, network, diskGB,
  maxProcesses, memoryMB, cpuWeight (resource limits in the VM; 0 restores the default)
network: none | outbound | a comma-separated domain list, e.g. "example.com,*.example.com";
  it applies to the agent's next command`

// openAgents reads the agents registry. The CLI only reads it: every
// change goes through the owner (c.owner, api.AgentOps), agents.json's one
// writer.
func (c *cli) openAgents() (*agents.Registry, error) {
	return agents.OpenReadOnly(c.paths.AgentsJSON())
}

// withOwner runs fn with the owner of the data folder (c.owner) and
// closes it after.
func (c *cli) withOwner(ctx context.Context, fn func(api.Controller) error) error {
	ctl, err := c.owner(ctx)
	if err != nil {
		return err
	}
	defer ctl.Close()
	return fn(ctl)
}

func (c *cli) agent(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(c.err, agentUsage)
		return ExitUsage
	}
	if args[0] == "repair" {
		return c.agentRepair(ctx, args[1:])
	}
	if run := agentCheckpointCmds[args[0]]; run != nil {
		return run(c, ctx, args[1:])
	}
	if !slices.Contains(subcommands["agent"], args[0]) {
		fmt.Fprintln(c.err, agentUsage)
		return ExitUsage
	}
	src, err := c.agentSource()
	if err != nil {
		return c.fail(err)
	}
	sub, args := args[0], args[1:]
	switch {
	case sub == "add" && len(args) >= 2 && args[0] == "--":
		// `agent add -- -rf`: after --, the name as written.
		args = append([]string{args[1]}, args[2:]...)
		if len(args) > 1 {
			fmt.Fprintln(c.err, agentUsage)
			return ExitUsage
		}
		fallthrough
	case sub == "add" && len(args) >= 1:
		fs := c.flags("agent add")
		adopt := fs.Bool("adopt-home", false, "give a home left by a removed agent of the same name, and its files, to the new agent")
		purge := fs.Bool("purge-home", false, "delete a home left by a removed agent of the same name first")
		if fs.Parse(args[1:]) != nil || fs.NArg() > 0 || *adopt && *purge {
			fmt.Fprintln(c.err, agentUsage)
			return ExitUsage
		}
		req := control.AgentAddRequest{Name: args[0]}
		switch {
		case *adopt:
			req.Home = control.HomeAdopt
		case *purge:
			req.Home = control.HomePurge
		}
		var a agents.Agent
		err := c.withOwner(ctx, func(ctl api.Controller) (err error) {
			a, err = ctl.AddAgent(ctx, req)
			return err
		})
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "added %s: Linux user %s, home %s\nautonomous exec is off; turn it on with `%s agent set %s enabled true`\n",
			a.Name, a.User(), a.Home(), c.self(), a.Slug)
		return ExitOK
	case sub == "list" && (len(args) == 0 || len(args) == 1 && args[0] == "--json"):
		list, err := src.list(ctx)
		if err != nil {
			return c.fail(err)
		}
		var usage map[string]agents.Usage
		if len(list) > 0 {
			usage, _ = c.agentUsage(ctx, list)
		}
		disk := src.diskUsage(ctx, list)
		if len(args) == 1 {
			json.NewEncoder(c.out).Encode(views(list, usage, disk))
			return ExitOK
		}
		if len(list) == 0 {
			fmt.Fprintf(c.out, "no agents; add one with `%s agent add NAME`\n", c.self())
			return ExitOK
		}
		rows := [][]string{{"NAME", "SLUG", "USER", "AUTONOMOUS EXEC", "COMMANDS/TURN", "BACKGROUND", "CPU", "MEMORY", "PROCESSES", "DISK"}}
		for _, v := range views(list, usage, disk) {
			ae := v.AutonomousExec
			cpu, mem, procs := "-", "-", "-"
			if v.Usage != nil {
				cpu = fmt.Sprintf("%.1fs", v.Usage.CPUSeconds)
				mem = fmt.Sprintf("%.0f/%d MB", v.Usage.MemoryMB, v.Limits.MemoryMB)
				procs = fmt.Sprintf("%d/%d", v.Usage.Processes, v.Limits.MaxProcesses)
			}
			rows = append(rows, []string{v.Name, v.Slug, v.User(), onOff(ae.Enabled), strconv.Itoa(ae.MaxCommandsPerTurn),
				onOff(ae.BackgroundProcesses), cpu, mem, procs, diskquota.Human(v.DiskUsedBytes) + " of " + diskquota.Human(v.DiskQuotaBytes)})
		}
		writeTable(c.out, rows)
		if usage == nil {
			fmt.Fprintln(c.out, "(usage shows while the VM runs)")
		}
		return ExitOK
	case sub == "show" && len(args) == 1:
		return c.agentShow(ctx, src, args[0])
	case sub == "connect":
		return c.agentConnect(ctx, src, args)
	case sub == "disconnect":
		return c.agentDisconnect(ctx, src, args)
	case sub == "show" && len(args) == 2 && args[1] == "--json":
		return c.agentShowJSON(ctx, src, args[0])
	case sub == "set" && len(args) == 3 && args[1] == "dispatchTo":
		return c.setDispatchTo(ctx, src, args[0], args[2])
	case sub == "set" && len(args) == 3 && args[1] == "projects":
		return c.setProjects(ctx, args[0], args[2])
	case sub == "set" && len(args) == 3:
		a, err := c.updateAgent(ctx, args[0], args[1], args[2])
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "saved %s; connected MCP clients see the change\n", a.Name)
		return ExitOK
	case sub == "remove" && len(args) >= 1:
		fs := c.flags("agent remove")
		purge := fs.Bool("purge", false, "also delete the agent's home directory and everything in it")
		yes := fs.Bool("yes", false, "with --purge: don't ask for confirmation")
		if fs.Parse(args[1:]) != nil || fs.NArg() > 0 {
			fmt.Fprintln(c.err, agentUsage)
			return ExitUsage
		}
		a, err := src.get(ctx, args[0])
		if err != nil {
			return c.fail(err)
		}
		if *purge && !*yes && !c.confirm(fmt.Sprintf("This removes agent %q (slug %s, id %s)%s and deletes its home %s with every file in it%s.", a.Name, a.Slug, a.ID, c.onFarSide(), a.Home(), checkpointsGoing(src.checkpoints(ctx, a)))) {
			return ExitDeclined
		}
		return c.agentRemove(ctx, a.ID, *purge, *yes)
	}
	fmt.Fprintln(c.err, agentUsage)
	return ExitUsage
}

// agentRepair rewrites a damaged agents.json with the agents it can still
// read, keeping the damaged file aside.
func (c *cli) agentRepair(ctx context.Context, args []string) int {
	if fs := c.flags("agent repair"); fs.Parse(args) != nil || fs.NArg() > 0 {
		return ExitUsage
	}
	if c.remote != nil {
		return c.agentRepairRemote(ctx)
	}
	var res agents.RepairResult
	var dmg *agents.DamagedError
	err := c.withOwner(ctx, func(ctl api.Controller) (err error) {
		res, err = ctl.RepairAgents(ctx)
		return err
	})
	if errors.As(err, &dmg) {
		// No owner can open a damaged registry (a running one read it
		// before the damage, and repairs it above), so the file has no
		// writer but this command.
		res, err = agents.Repair(c.paths.AgentsJSON())
	}
	if err != nil {
		return c.fail(err)
	}
	return c.agentRepaired(res, c.paths.AgentsJSON())
}

// agentRepaired says what an agent repair of file did.
func (c *cli) agentRepaired(res agents.RepairResult, file string) int {
	if res.Aside == "" {
		fmt.Fprintf(c.out, "%s is fine (%d agents); nothing to repair\n", file, len(res.Kept))
		return ExitOK
	}
	fmt.Fprintf(c.out, "moved the damaged file to %s\n", res.Aside)
	var names []string
	for _, a := range res.Kept {
		names = append(names, a.Name)
	}
	if len(names) > 0 {
		fmt.Fprintf(c.out, "kept %d agents: %s\n", len(names), strings.Join(names, ", "))
	} else {
		fmt.Fprintf(c.out, "no agent could be read: starting with none (add them again with `osaurus-sandbox %sagent add NAME --adopt-home`, which gives each its old home)\n", c.contextArg())
	}
	for _, d := range res.Dropped {
		fmt.Fprintf(c.out, "could not read: %s\n", d)
	}
	if len(res.Dropped) > 0 {
		fmt.Fprintf(c.out, "what could not be read is still in %s\n", res.Aside)
	}
	return ExitOK
}

// writeTable prints rows in columns two spaces apart, measured in
// terminal cells: a CJK character or an emoji takes two (tabwriter counts
// it as one, which shifts every column after such a name).
func writeTable(w io.Writer, rows [][]string) {
	var widths []int
	for _, r := range rows {
		for i, cell := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], cells(cell))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, cell := range r {
			b.WriteString(cell)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-cells(cell)+2))
			}
		}
		fmt.Fprintln(w, b.String())
	}
}

// cells is how many terminal cells s takes.
func cells(s string) int {
	n := 0
	for _, r := range s {
		switch width.LookupRune(r).Kind() {
		case width.EastAsianWide, width.EastAsianFullwidth:
			n += 2
		default:
			n++
		}
	}
	return n
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// updateAgent has the owner change one setting; it validates the result.
func (c *cli) updateAgent(ctx context.Context, ref, key, value string) (a agents.Agent, err error) {
	err = c.withOwner(ctx, func(ctl api.Controller) (err error) {
		a, err = ctl.UpdateAgent(ctx, control.AgentUpdateRequest{Agent: ref, Settings: []control.Setting{{Key: key, Value: value}}})
		return err
	})
	return a, err
}

func (c *cli) agentShow(ctx context.Context, src agentSource, ref string) int {
	a, err := src.get(ctx, ref)
	if err != nil {
		return c.fail(err)
	}
	tok, err := src.token(a.ID)
	if err != nil {
		return c.fail(err)
	}
	all, err := src.list(ctx) // for the names dispatchTo stores as ids
	if err != nil {
		return c.fail(err)
	}
	ae := a.AutonomousExec
	fmt.Fprintf(c.out, "%s (id %s)%s\n  Linux user:           %s (uid %d)\n  home:                 %s\n", a.Name, a.ID, c.onFarSide(), a.User(), a.UID, a.Home())
	fmt.Fprintf(c.out, "  disk:                 %s of %s (diskGB)\n", diskquota.Human(src.diskUsage(ctx, []agents.Agent{a})[a.Slug]), diskquota.Human(a.DiskQuota()))
	fmt.Fprintf(c.out, "  autonomous exec:      %s (enabled)\n  commands per turn:    %d (maxCommandsPerTurn)\n", onOff(ae.Enabled), ae.MaxCommandsPerTurn)
	fmt.Fprintf(c.out, "  background processes: %s (backgroundProcesses)\n  they keep VM awake:   %s (backgroundKeepsAwake)\n  plugin create:        %s (pluginCreate)\n  plugin creator skill: %s (pluginCreatorSkill)\n  network:              %s (network)\n",
		onOff(ae.BackgroundProcesses), onOff(a.BackgroundKeepsAwake()), onOff(ae.PluginCreate), onOff(!ae.PluginCreatorSkillOff), ae.Network)
	fmt.Fprintf(c.out, "  dispatch to:          %s (dispatchTo)\n", dispatchNames(all, a))
	c.printNetworkInForce(a)
	l := a.Resources.Limits()
	fmt.Fprintf(c.out, "  processes:            at most %d (maxProcesses)\n  memory:               %d MB (memoryMB)\n  CPU weight:           %d (cpuWeight)\n",
		l.MaxProcesses, l.MemoryMB, l.CPUWeight)
	if usage, why := c.agentUsage(ctx, []agents.Agent{a}); usage != nil {
		fmt.Fprintf(c.out, "  usage:                %s\n", usage[a.User()].Summary(l))
	} else {
		fmt.Fprintf(c.out, "  usage:                unknown: %s\n", why)
	}
	io.WriteString(c.out, c.agentStores(ctx, a).lines())
	if c.remote != nil {
		// The client configurations below run this machine's sandbox.
		fmt.Fprintf(c.out, "\nConnect an MCP client on this machine with `%s agent connect %s --client %s`:\nits entry runs %s's tools on %s over ssh.\n", c.self(), a.Slug, clientIDs, a.Name, c.remote.URL)
		return ExitOK
	}
	cl := c.mcpClient(a, tok)
	fmt.Fprintf(c.out, "\nClaude Desktop (claude_desktop_config.json):\n%s\n", cl.ClaudeDesktop())
	fmt.Fprintf(c.out, "\nClaude Code, stdio:\n  %s\n", cl.ClaudeCodeStdio())
	fmt.Fprintf(c.out, "\nClaude Code, HTTP (needs the app or `osaurus-sandbox serve` running):\n  %s\n", cl.ClaudeCodeHTTP())
	fmt.Fprintln(c.out, "\nAfter adding it, start a new Claude Code session: a running one doesn't load new servers.")
	fmt.Fprintln(c.out, "The bearer token is this agent's password: keep it private.")
	return ExitOK
}

// self is this program as a command line to suggest: with the remote
// context when there is one, so the suggestion drives the same sandbox.
func (c *cli) self() string {
	if c.remote != nil {
		return "osaurus-sandbox --context " + c.remote.Name
	}
	return "osaurus-sandbox"
}

// onFarSide is " on HOST" through a remote context, for what is said
// about its agents.
func (c *cli) onFarSide() string {
	if c.remote != nil {
		return " on " + c.remote.URL
	}
	return ""
}

// mcpClient is how an MCP client reaches a: the installed binary (with a
// warning on stderr when there is only a temporary or build copy).
func (c *cli) mcpClient(a agents.Agent, tok string) mcpserver.Client {
	exe, warning := connect.Executable()
	if warning != "" {
		fmt.Fprintln(c.err, "warning:", warning)
	}
	cl := mcpserver.Client{Exe: exe, Agent: a, Token: tok}
	if cfg, err := config.LoadSandbox(c.paths.SandboxJSON()); err == nil {
		cl.Addr = cfg.MCPAddr()
	}
	if os.Getenv(config.HomeEnv) != "" {
		cl.Env = map[string]string{config.HomeEnv: c.paths.Root}
	}
	return cl
}

// agentRemove has the owner remove the agent with id ref: its registry
// entry, views, checkpoints, memories, bridge config and, while the VM
// runs, its Linux user. Its keychain entries go from here (the keychain
// is the user's), and the MCP client entries that would fail now (asking
// unless yes).
func (c *cli) agentRemove(ctx context.Context, ref string, purge, yes bool) int {
	var r api.RemoveAgentResult
	err := c.withOwner(ctx, func(ctl api.Controller) (err error) {
		r, err = ctl.RemoveAgent(ctx, api.RemoveAgentRequest{Agent: ref, Purge: purge})
		return err
	})
	if err != nil {
		return c.fail(err)
	}
	a := r.Agent
	fmt.Fprintf(c.out, "removed %s from the registry%s; its token no longer works\n", a.Name, c.onFarSide())
	if c.remote != nil {
		// Its secrets are in the far side's keychain (its tools ran
		// there), and an MCP client entry here of the same name may be a
		// local agent's: neither is this command's to delete.
		fmt.Fprintf(c.out, "its secrets stay in the keychain of %s: delete them there (osaurus-sandbox secret remove %s KEY); an MCP client here that ran it: `%s agent disconnect %s`\n", c.remote.URL, a.Slug, c.self(), a.Slug)
	} else {
		c.removeAgentSecrets(a.Slug)
		defer c.offerDisconnect(a.Slug, yes)
	}
	if r.ViewsError != "" {
		fmt.Fprintf(c.err, "warning: its project views were not all deleted: %s\n", r.ViewsError)
	} else if len(a.Projects) > 0 {
		fmt.Fprintf(c.out, "deleted its views of %s (your folders are untouched)\n", strings.Join(a.Projects, ", "))
	}
	if r.ForgetError != "" {
		fmt.Fprintf(c.err, "warning: not everything the host kept for it was deleted: %s\n", r.ForgetError)
	}
	if r.Checkpoints > 0 {
		fmt.Fprintf(c.out, "deleted its %s (%s on disk)\n", checkpointCount(r.Checkpoints), diskquota.Human(r.CheckpointBytes))
	}
	if r.CheckpointsError != "" {
		fmt.Fprintf(c.err, "warning: its checkpoints were not all deleted: %s\n", r.CheckpointsError)
	}
	if !r.UserRemoved {
		if r.HomeDeleted {
			fmt.Fprintf(c.out, "deleted its home %s\n", a.Home())
		}
		fmt.Fprintf(c.out, "the VM is not running, so the Linux user %s stays in it until the VM is reset\n", a.User())
		return ExitOK
	}
	fmt.Fprintf(c.out, "stopped its processes and deleted the Linux user %s\n", a.User())
	if purge {
		fmt.Fprintf(c.out, "deleted its home %s\n", a.Home())
	} else {
		fmt.Fprintf(c.out, "kept its home %s (use --purge to delete it)\n", a.Home())
	}
	return ExitOK
}

// checkpointsGoing names an agent's n checkpoints of disk bytes, which
// its removal deletes, for the question before it ("" when it has none,
// or they could not be counted).
func checkpointsGoing(n int, disk int64, err error) string {
	if err != nil || n == 0 {
		return ""
	}
	return fmt.Sprintf(", and its %s (%s)", checkpointCount(n), diskquota.Human(disk))
}

// checkpointCount is "1 checkpoint" or "N checkpoints".
func checkpointCount(n int) string {
	if n == 1 {
		return "1 checkpoint"
	}
	return fmt.Sprintf("%d checkpoints", n)
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
	// Tools run in the owner (started on the first call when none runs),
	// under the limits every process shares. The connection is made on
	// the first call: MCP clients start their servers eagerly.
	c.noteBackgroundOwner(ctx, "the first tool call")
	ctl := client.NewLazy(c.paths)
	defer ctl.Close()
	// The secret prompts of this process: the MCP client's URL elicitation.
	// What the user types goes where the secret tools go (promptStore).
	inv := stdioInvoker{ToolInvoker: api.ToolInvoker{Ctl: ctl}, viaOwner: c.secretsViaOwner}
	answers := promptStore{local: c.sec, owner: inv.ToolInvoker, reg: reg, viaOwner: c.secretsViaOwner}
	prompts := &secretprompt.Broker{Store: answers, Pages: &secretprompt.Pages{Store: answers}}
	local := tools.NewEnv(tools.Options{Agents: reg, Plugins: c.installed(), Registry: datadir.PluginRegistry(c.paths),
		Secrets: tools.StoreSecrets{Store: c.sec}, SecretStore: c.sec, SecretPrompter: prompts,
		Exposer: inOwner{}, Checkpointer: inOwner{}, Reviewer: inOwner{}})
	inv.local = local
	cfg := mcpserver.Config{
		// Env lists the agent's tools here (its installed plugins' too).
		// The owner runs them, except the secret tools: they run here,
		// where the MCP session is that can ask the user for a value.
		Env:      local,
		Invoker:  inv,
		Registry: reg,
		Version:  Version,
		Logger:   slog.New(slog.NewTextHandler(c.err, &slog.HandlerOptions{Level: slog.LevelWarn})),
		// The owner's event log, through the control socket.
		Events: ownerEvents{paths: c.paths, poll: time.Second},
	}
	in, out := c.in, c.out
	// A line that isn't a message gets a JSON-RPC error, and the session
	// goes on.
	if err := mcpserver.ServeStdio(ctx, cfg, *ref, mcpserver.StdioTransport(in, out)); err != nil {
		return c.fail(err)
	}
	return ExitOK
}

// stdioInvoker runs the secret tools in this process, where the MCP
// session is that can ask the user for a value (URL elicitation), and
// every other tool in the owner. Secret tools touch only the keychain, so
// running them here shares no limit the owner keeps.
//
// A data folder whose secrets a connected front end keeps (secretStore
// client: a server driven through a remote context) is different: only
// its owner is offered them, so the secret tools run there, except a
// prompt (sandbox_secret_set without a value), which needs this session;
// what the user types is then stored through the owner (promptStore).
type stdioInvoker struct {
	api.ToolInvoker
	local    *tools.Env
	viaOwner func() bool
}

func (r stdioInvoker) RunTool(ctx context.Context, a agents.Agent, name string, args json.RawMessage) envelope.Envelope {
	if tools.IsSecretTool(name) && (!r.viaOwner() || isSecretPrompt(name, args)) {
		return r.local.RunTool(ctx, a, name, args)
	}
	return r.ToolInvoker.RunTool(ctx, a, name, args)
}

// isSecretPrompt says whether a secret tool call asks the user for the
// value: sandbox_secret_set without one. Arguments that don't decode are
// the local tool's to refuse.
func isSecretPrompt(name string, args json.RawMessage) bool {
	var a struct {
		Value *string `json:"value"`
	}
	return name == "sandbox_secret_set" && (json.Unmarshal(args, &a) != nil || a.Value == nil)
}

// secretsViaOwner says whether this data folder's secrets are reached only
// through its owner (secretStore client). A setting that can't be read
// keeps them here, where the store says what is wrong with it.
func (c *cli) secretsViaOwner() bool {
	cfg, err := config.LoadSandbox(c.paths.SandboxJSON())
	return err == nil && cfg.SecretStore == config.SecretStoreClient
}

// promptStore stores what the user typed on a prompt of this process: in
// this machine's store, or, when the secret tools run in the owner
// (stdioInvoker), through the owner's sandbox_secret_set.
type promptStore struct {
	local    secretprompt.Store
	owner    api.ToolInvoker
	reg      *agents.Registry
	viaOwner func() bool
}

func (p promptStore) Set(agent, key, value string) error {
	if !p.viaOwner() {
		return p.local.Set(agent, key, value)
	}
	a, err := p.reg.GetSlug(agent)
	if err != nil {
		return err
	}
	args, err := json.Marshal(map[string]string{"key": key, "value": value})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), secrets.ClientTimeout+10*time.Second)
	defer cancel()
	if e := p.owner.RunTool(ctx, a, "sandbox_secret_set", args); !e.OK {
		return fmt.Errorf("storing %s through the sandbox's owner: %s", key, e.Message)
	}
	return nil
}
