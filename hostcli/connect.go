package hostcli

import (
	"context"
	"fmt"
	"os"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver/connect"
)

// agentConnect adds the agent to an MCP client's config file, as the
// window's Connect does: it prints the change, asks (unless --yes), backs
// the file up and writes it. --dry-run prints the change only.
func (c *cli) agentConnect(_ context.Context, reg *agents.Registry, args []string) int {
	fs := c.flags("agent connect")
	id := fs.String("client", "", "claude-desktop, claude-code, cursor, vscode or generic")
	dry := fs.Bool("dry-run", false, "show the change and write nothing")
	yes := fs.Bool("yes", false, "don't ask before writing")
	if len(args) == 0 || fs.Parse(args[1:]) != nil || fs.NArg() > 0 || *id == "" {
		fmt.Fprintln(c.err, "usage: osaurus-sandbox agent connect NAME --client claude-desktop|claude-code|cursor|vscode|generic [--dry-run] [--yes]")
		return ExitUsage
	}
	a, err := reg.Get(args[0])
	if err != nil {
		return c.fail(err)
	}
	cl, err := connect.Lookup(*id)
	if err != nil {
		fmt.Fprintln(c.err, "osaurus-sandbox:", err)
		return ExitUsage
	}
	tok, _ := reg.Token(a.ID)
	s := c.mcpClient(a, tok)
	// The data folder always: a client started from another environment
	// must reach this one.
	s.Env = map[string]string{config.HomeEnv: c.paths.Root}
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
