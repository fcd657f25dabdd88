package hostcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
	"github.com/osaurus/osaurus-sandbox/plugins"
)

const networkUsage = `usage:
  osaurus-sandbox network log [--follow] [--json] [--agent NAME]
    every connection the network policy refused: time, agent, destination,
    port, who refused it (the firewall or the proxy) and why`

// network is `osaurus-sandbox network ...`.
func (c *cli) network(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] != "log" {
		fmt.Fprintln(c.err, networkUsage)
		return ExitUsage
	}
	fs := c.flags("network log")
	follow := fs.Bool("follow", false, "keep printing refusals as they happen")
	fs.BoolVar(follow, "f", false, "same as --follow")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	only := fs.String("agent", "", "only this agent's refusals (name, slug or id)")
	if fs.Parse(args[1:]) != nil || fs.NArg() > 0 {
		fmt.Fprintln(c.err, networkUsage)
		return ExitUsage
	}
	names := c.agentNames(ctx)
	wantUser := ""
	if *only != "" {
		a, err := c.lookupAgent(ctx, *only)
		if err != nil {
			return c.fail(fmt.Errorf("--agent: %w", err))
		}
		wantUser = a.User()
	}
	g, err := c.running(ctx)
	if err != nil {
		if errors.Is(err, agentproto.ErrUnavailable) { // not running, or no owner
			return c.fail(fmt.Errorf("%w: the refusal log lives in the VM; run `osaurus-sandbox %sstart` first", control.ErrNotRunning, c.contextArg()))
		}
		return c.fail(err)
	}
	req := agentproto.NetLogRequest{}
	warned := map[string]bool{}
	for {
		resp, err := g.NetLog(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return ExitOK // interrupted while following
			}
			if errors.Is(err, agentproto.ErrUnsupported) {
				return c.fail(fmt.Errorf("the guest keeps no refusal log (%w); reset the VM to update its guest agent", err))
			}
			return c.fail(err)
		}
		for _, w := range resp.Warnings {
			if !warned[w] {
				warned[w] = true
				fmt.Fprintln(c.err, "osaurus-sandbox: warning:", w)
			}
		}
		for _, e := range resp.Entries {
			if wantUser != "" && e.User != wantUser {
				continue
			}
			writeRefusal(c.out, e, names(e.User), *asJSON)
		}
		req.After = resp.Next
		if len(resp.Entries) > 0 {
			continue // there may be more than one answer holds
		}
		if !*follow {
			return ExitOK
		}
		req.WaitMillis = agentproto.MaxNetLogWait.Milliseconds()
	}
}

// agentNames maps an agent's Linux user to its name, reading the agents
// again when a user is not known yet (an agent added meanwhile); through
// a remote context they are the far side's.
func (c *cli) agentNames(ctx context.Context) func(user string) string {
	var byUser map[string]string
	load := func() {
		byUser = map[string]string{}
		src, err := c.agentSource()
		if err != nil {
			return
		}
		if list, err := src.list(ctx); err == nil {
			for _, a := range list {
				byUser[a.User()] = a.Name
			}
		}
	}
	load()
	return func(user string) string {
		if user == "" {
			return ""
		}
		if _, ok := byUser[user]; !ok {
			load()
		}
		return byUser[user]
	}
}

// RefusalLine is one refusal as `network log --json` prints it.
type RefusalLine struct {
	agentproto.NetRefusal
	// Agent is the agent's name ("" when its user is no agent's any more).
	Agent string `json:"agent"`
}

func writeRefusal(w io.Writer, e agentproto.NetRefusal, agent string, asJSON bool) {
	if asJSON {
		json.NewEncoder(w).Encode(RefusalLine{NetRefusal: e, Agent: agent})
		return
	}
	fmt.Fprintln(w, agentproto.FormatRefusal(e, agent))
}

// printNetworkInForce is agent show's account of the network policy: the
// agent's own, and what each installed plugin narrows it to while the
// plugin's tools and setup run.
func (c *cli) printNetworkInForce(a agents.Agent) {
	p, err := a.NetworkPolicy()
	if err != nil {
		// The tools fail closed on a setting that does not parse.
		fmt.Fprintf(c.out, "  network in force:     none (the setting is invalid: %v)\n", err)
		return
	}
	fmt.Fprintf(c.out, "  network in force:     %s\n", p.Describe())
	if c.remote != nil {
		// The installed plugins and the refusal log are the far side's files.
		fmt.Fprintf(c.out, "  plugins' network:     not read through a context: `osaurus-sandbox agent show %s` on that machine shows it\n", a.Slug)
		return
	}
	store := plugins.NewInstalled(c.paths.AgentStateDir())
	ps, err := store.Installed(a.ID)
	if err != nil {
		fmt.Fprintf(c.out, "  plugins' network:     unknown (%v)\n", err)
		return
	}
	ins, _ := store.List(a.ID)
	for _, pl := range ps {
		n := netpolicy.Narrow(p, pl.NetworkPolicy())
		fmt.Fprintf(c.out, "  plugin %s runs with: %s\n", pl.ID(), n.Describe())
		if r := ins[pl.ID()].Review; r != "" {
			fmt.Fprintf(c.out, "    ⚑ %s\n", r)
		}
	}
	fmt.Fprintln(c.out, "  refused connections:  osaurus-sandbox network log --agent "+a.Slug)
}
