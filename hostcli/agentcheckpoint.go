package hostcli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/osaurus/osaurus-sandbox/host/api"
)

const agentCheckpointUsage = `usage:
  osaurus-sandbox agent checkpoint NAME [LABEL]
  osaurus-sandbox agent checkpoints NAME [--json]
  osaurus-sandbox agent restore [--yes] NAME LABEL
  osaurus-sandbox agent checkpoint-remove NAME LABEL
  osaurus-sandbox agent fork NAME NEW`

// agentCheckpointCmds are the agent subcommands of agent checkpoints and
// fork (agent dispatches to them first).
var agentCheckpointCmds = map[string]func(c *cli, ctx context.Context, args []string) int{
	"checkpoint":        (*cli).agentCheckpoint,
	"checkpoints":       (*cli).agentCheckpoints,
	"restore":           (*cli).agentRestore,
	"checkpoint-remove": (*cli).agentCheckpointRemove,
	"fork":              (*cli).agentFork,
}

func init() {
	subcommands["agent"] = append(subcommands["agent"], "checkpoint", "checkpoints", "restore", "checkpoint-remove", "fork")
	at := slices.IndexFunc(helps, func(h cmdHelp) bool { return h.name == "agent repair" })
	if at < 0 {
		at = len(helps)
	}
	helps = slices.Insert(helps, at,
		cmdHelp{name: "agent checkpoint", summary: "save an agent's home, project views and settings (installed plugins; secrets by name only) under a label",
			usage:   []string{"agent checkpoint NAME [LABEL]"},
			notes:   []string{"LABEL: 1–64 letters, digits, '.', '_' or '-'; the time when left out. The VM is paused for the copy."},
			example: []string{"osaurus-sandbox agent checkpoint alice before-refactor"}},
		cmdHelp{name: "agent checkpoints", summary: "list an agent's checkpoints, with why each exists",
			usage: []string{"agent checkpoints NAME [--json]"}, flags: [][2]string{{"--json", "print JSON"}},
			example: []string{"osaurus-sandbox agent checkpoints alice"}},
		cmdHelp{name: "agent restore", summary: "put an agent's checkpoint back (its current state is saved first); no other agent's files are touched",
			usage: []string{"agent restore [--yes] NAME LABEL"}, flags: [][2]string{{"--yes", "don't ask for confirmation"}},
			example: []string{"osaurus-sandbox agent restore alice before-refactor"}},
		cmdHelp{name: "agent checkpoint-remove", summary: "delete one of an agent's checkpoints",
			usage:   []string{"agent checkpoint-remove NAME LABEL"},
			example: []string{"osaurus-sandbox agent checkpoint-remove alice before-refactor"}},
		cmdHelp{name: "agent fork", summary: "add a new agent with a copy of an agent's home, views and settings, under its own Linux uid (secrets are not copied: set them for the new agent)",
			usage:   []string{"agent fork NAME NEW"},
			example: []string{"osaurus-sandbox agent fork alice alice-try2"}},
	)
}

// agentCheckpointer is the owner's agent checkpoints (a running owner, or
// this process for the command).
func (c *cli) agentCheckpointer(ctx context.Context) (api.AgentCheckpointer, func(), error) {
	ctl, err := c.owner(ctx)
	if err != nil {
		return nil, nil, err
	}
	cp, ok := ctl.(api.AgentCheckpointer)
	if !ok {
		ctl.Close()
		return nil, nil, fmt.Errorf("the owner of the sandbox (an older osaurus-sandbox?) has no agent checkpoints: restart it (`osaurus-sandbox stop`)")
	}
	return cp, ctl.Close, nil
}

func (c *cli) agentCheckpoint(ctx context.Context, args []string) int {
	if len(args) < 1 || len(args) > 2 {
		fmt.Fprintln(c.err, agentCheckpointUsage)
		return ExitUsage
	}
	req := api.AgentCheckpointRequest{Agent: args[0]}
	if len(args) == 2 {
		req.Label = args[1]
	}
	cp, done, err := c.agentCheckpointer(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer done()
	m, err := cp.CreateAgentCheckpoint(ctx, req)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "checkpoint %s of %s: %s, %s on disk, taken in %.2fs\nput it back with `osaurus-sandbox agent restore %s %s`\n",
		m.Label, m.Agent, size(m.Bytes), size(m.DiskBytes), m.Seconds, m.Agent, m.Label)
	return ExitOK
}

func (c *cli) agentCheckpoints(ctx context.Context, args []string) int {
	fs := c.flags("agent checkpoints")
	asJSON := fs.Bool("json", false, "print JSON")
	if len(args) == 0 || fs.Parse(args[1:]) != nil || fs.NArg() > 0 {
		fmt.Fprintln(c.err, agentCheckpointUsage)
		return ExitUsage
	}
	cp, done, err := c.agentCheckpointer(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer done()
	l, err := cp.ListAgentCheckpoints(ctx, api.AgentCheckpointRequest{Agent: args[0]})
	if err != nil {
		return c.fail(err)
	}
	if *asJSON {
		json.NewEncoder(c.out).Encode(l.Checkpoints)
		return ExitOK
	}
	if len(l.Checkpoints) == 0 {
		fmt.Fprintf(c.out, "%s has no checkpoints; take one with `osaurus-sandbox agent checkpoint %s [LABEL]`\n", l.Agent.Name, l.Agent.Slug)
		return ExitOK
	}
	rows := [][]string{{"LABEL", "CREATED", "SIZE", "ON DISK", "TOOK", "WHY"}}
	for _, m := range l.Checkpoints {
		rows = append(rows, []string{m.Label, m.Created.Local().Format(time.DateTime), size(m.Bytes), size(m.DiskBytes), fmt.Sprintf("%.2fs", m.Seconds), m.Reason})
	}
	writeTable(c.out, rows)
	return ExitOK
}

func (c *cli) agentRestore(ctx context.Context, args []string) int {
	fs := c.flags("agent restore")
	yes := fs.Bool("yes", false, "don't ask for confirmation")
	if fs.Parse(args) != nil || fs.NArg() != 2 {
		fmt.Fprintln(c.err, agentCheckpointUsage)
		return ExitUsage
	}
	name, label := fs.Arg(0), fs.Arg(1)
	if !*yes && !c.confirm(fmt.Sprintf("Restore puts back %s's home, project views and settings as they were in its checkpoint %s; its shells end.\nIts current state is saved first as an automatic checkpoint. No other agent is touched.", name, label)) {
		return ExitDeclined
	}
	cp, done, err := c.agentCheckpointer(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer done()
	r, err := cp.RestoreAgentCheckpoint(ctx, api.AgentCheckpointRequest{Agent: name, Label: label})
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "restored %s's checkpoint %s (the state before it is its checkpoint %s)\n", r.Restored.Agent, r.Restored.Label, r.Saved.Label)
	return ExitOK
}

func (c *cli) agentCheckpointRemove(ctx context.Context, args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(c.err, agentCheckpointUsage)
		return ExitUsage
	}
	cp, done, err := c.agentCheckpointer(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer done()
	if err := cp.RemoveAgentCheckpoint(ctx, api.AgentCheckpointRequest{Agent: args[0], Label: args[1]}); err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "removed %s's checkpoint %s\n", args[0], args[1])
	return ExitOK
}

func (c *cli) agentFork(ctx context.Context, args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(c.err, agentCheckpointUsage)
		return ExitUsage
	}
	cp, done, err := c.agentCheckpointer(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer done()
	r, err := cp.ForkAgent(ctx, api.ForkRequest{Agent: args[0], New: args[1]})
	if err != nil {
		return c.fail(err)
	}
	a := r.Agent
	fmt.Fprintf(c.out, "forked %s to %s: Linux user %s (uid %d), home %s; %s copied in %.2fs\nits plugins' secrets are not copied: set them with `osaurus-sandbox secret set %s KEY`; connect a client with `osaurus-sandbox agent connect %s --client ID`\n",
		args[0], a.Name, a.User(), a.UID, a.Home(), size(r.Bytes), r.Seconds, a.Slug, a.Slug)
	return ExitOK
}
