package hostcli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver/connect"
)

// clientIDs are the --client values, as usage lines show them
// (TestClientIDs keeps it in step with connect.Clients).
const clientIDs = "claude-desktop|claude-code|cursor|vscode|generic"

// agentConnect adds the agent to an MCP client's config file, as the
// window's Connect does: it prints the change, asks (unless --yes), backs
// the file up and writes it. --dry-run prints the change only.
func (c *cli) agentConnect(ctx context.Context, src agentSource, args []string) int {
	fs := c.flags("agent connect")
	id := fs.String("client", "", strings.ReplaceAll(clientIDs, "|", ", "))
	dry := fs.Bool("dry-run", false, "show the change and write nothing")
	yes := fs.Bool("yes", false, "don't ask before writing")
	if len(args) == 0 || fs.Parse(args[1:]) != nil || fs.NArg() > 0 || *id == "" {
		fmt.Fprintln(c.err, "usage: osaurus-sandbox agent connect NAME --client "+clientIDs+" [--dry-run] [--yes]")
		return ExitUsage
	}
	cl, err := connect.Lookup(*id)
	if err != nil {
		fmt.Fprintln(c.err, "osaurus-sandbox:", err)
		return ExitUsage
	}
	a, err := src.get(ctx, args[0])
	if err != nil {
		return c.fail(err)
	}
	tok, _ := src.token(a.ID) // "" for a remote agent: its token is for the far side's HTTP server
	s := c.mcpClient(a, tok)
	// The data folder always: a client started from another environment
	// must reach this one (a context's too: contexts.json is in it).
	s.Env = map[string]string{config.HomeEnv: c.paths.Root}
	if c.remote != nil {
		s.Context = c.remote.Name
		fmt.Fprintf(c.out, "Through context %s (%s): the entry runs %s's tools on that machine, whichever context is current later.\n", c.remote.Name, c.remote.URL, a.Name)
	}
	if !cl.HasFile() {
		fmt.Fprintln(c.out, connect.Snippets(s))
		return ExitOK
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return c.fail(err)
	}
	ch, err := connect.Plan(cl, home, s)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprint(c.out, ch.Describe())
	if *dry || ch.Unchanged {
		return ExitOK
	}
	if !*yes && !c.confirm("Write this change?") {
		return ExitDeclined
	}
	return c.apply(ch)
}

// agentDisconnect takes the agent's entry out of MCP clients' config
// files: the one --client names, else every client whose file has it.
// NAME may be an agent already removed (its slug), whose entries would
// otherwise fail with "agent not found".
func (c *cli) agentDisconnect(ctx context.Context, src agentSource, args []string) int {
	fs := c.flags("agent disconnect")
	id := fs.String("client", "", "only this client")
	yes := fs.Bool("yes", false, "don't ask before writing")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") || fs.Parse(args[1:]) != nil || fs.NArg() > 0 {
		fmt.Fprintln(c.err, "usage: osaurus-sandbox agent disconnect NAME [--client "+clientIDs+"] [--yes]")
		return ExitUsage
	}
	slug := args[0]
	isSlug := agents.Slugify(slug) == slug
	// Through a context a slug needs no lookup (nor a reachable far
	// side): it names the entry.
	if c.remote == nil || !isSlug {
		if a, err := src.get(ctx, args[0]); err == nil {
			slug = a.Slug
		} else if !isSlug {
			return c.fail(err)
		}
	}
	clients := connect.Clients
	if *id != "" {
		cl, err := connect.Lookup(*id)
		if err != nil {
			fmt.Fprintln(c.err, "osaurus-sandbox:", err)
			return ExitUsage
		}
		clients = []connect.Client{cl}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return c.fail(err)
	}
	server := mcpserver.Client{Agent: agents.Agent{Slug: slug}}.ServerName()
	found := false
	for _, cl := range clients {
		if !cl.HasFile() {
			continue
		}
		ch, err := connect.PlanRemove(cl, home, server)
		if err != nil {
			return c.fail(err)
		}
		if ch.Unchanged {
			continue
		}
		found = true
		fmt.Fprint(c.out, ch.Describe())
		if !*yes && !c.confirm("Write this change?") {
			return ExitDeclined
		}
		if code := c.apply(ch); code != ExitOK {
			return code
		}
	}
	if !found {
		fmt.Fprintf(c.out, "no client config file has %s; nothing to change\n", server)
	}
	return ExitOK
}

// offerDisconnect, after an agent is removed, takes its entries out of
// the client config files that have one (asking first unless yes): they
// would fail with "agent not found".
func (c *cli) offerDisconnect(slug string, yes bool) {
	home, err := os.UserHomeDir()
	if err != nil {
		return
	}
	server := mcpserver.Client{Agent: agents.Agent{Slug: slug}}.ServerName()
	var changes []connect.Change
	var where []string
	for _, cl := range connect.Clients {
		if !cl.HasFile() || !connect.Connected(cl, home, server) {
			continue
		}
		ch, err := connect.PlanRemove(cl, home, server)
		if err != nil {
			fmt.Fprintf(c.err, "warning: %v\n", err)
			continue
		}
		changes = append(changes, ch)
		where = append(where, fmt.Sprintf("%s (%s)", cl.Name, ch.Path))
	}
	if len(changes) == 0 {
		return
	}
	later := fmt.Sprintf("`osaurus-sandbox agent disconnect %s` removes them later", slug)
	if !yes {
		fmt.Fprintf(c.err, "%s is still in %s, which will fail to start it.\nRemove it from them (a backup of each file is kept)? Type yes to continue: ", server, strings.Join(where, ", "))
		line, _ := c.line()
		if strings.TrimSpace(line) != "yes" {
			fmt.Fprintf(c.err, "\nThe client config files were left as they are; %s.\n", later)
			return
		}
	}
	for _, ch := range changes {
		if c.apply(ch) != ExitOK {
			fmt.Fprintf(c.err, "%s.\n", later)
		}
	}
}

// apply writes a planned change and says where the backup is.
func (c *cli) apply(ch connect.Change) int {
	backup, err := connect.Apply(ch)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "wrote %s", ch.Path)
	if backup != "" {
		fmt.Fprintf(c.out, " (the old file is %s)", backup)
	}
	fmt.Fprintln(c.out)
	return ExitOK
}
