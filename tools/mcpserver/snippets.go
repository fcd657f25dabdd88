package mcpserver

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agents"
)

// Client describes how an MCP client reaches an agent, for the config
// snippets the CLI and the app show.
type Client struct {
	Exe   string            // the osaurus-sandbox executable
	Env   map[string]string // extra environment for the stdio server, e.g. a non-default data dir
	Addr  string            // HTTP address; default DefaultAddr
	Agent agents.Agent
	Token string
	// Context is the CLI context (package remotes) the stdio server runs
	// through, "" for this machine: the entry names it, so the client
	// keeps using that sandbox whichever context is current later.
	Context string
}

// Args are the stdio server's arguments.
func (c Client) Args() []string {
	args := []string{"mcp", "--agent", c.Agent.Slug}
	if c.Context != "" {
		args = append([]string{"--context", c.Context}, args...)
	}
	return args
}

// ServerName is the name the snippets give the agent's MCP server.
func (c Client) ServerName() string { return "osaurus-sandbox-" + c.Agent.Slug }

// URL is the HTTP endpoint.
func (c Client) URL() string {
	addr := c.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	return "http://" + addr + Path
}

// ClaudeDesktop is the claude_desktop_config.json fragment that runs the
// stdio server.
func (c Client) ClaudeDesktop() string {
	server := map[string]any{"command": c.Exe, "args": c.Args()}
	if len(c.Env) > 0 {
		server["env"] = c.Env
	}
	b, _ := json.MarshalIndent(map[string]any{"mcpServers": map[string]any{c.ServerName(): server}}, "", "  ")
	return string(b)
}

// ClaudeCodeStdio is the `claude mcp add` command for the stdio server,
// in user scope (every project), where `agent connect` writes it too.
func (c Client) ClaudeCodeStdio() string {
	var env strings.Builder
	for k, v := range c.Env {
		fmt.Fprintf(&env, " --env %s=%s", k, shellQuote(v))
	}
	args := make([]string, len(c.Args()))
	for i, a := range c.Args() {
		args[i] = shellQuote(a)
	}
	return fmt.Sprintf("claude mcp add --scope user%s %s -- %s %s", env.String(), c.ServerName(), shellQuote(c.Exe), strings.Join(args, " "))
}

// ClaudeCodeHTTP is the `claude mcp add` command for the app's HTTP server.
func (c Client) ClaudeCodeHTTP() string {
	return fmt.Sprintf("claude mcp add --scope user --transport http %s %s --header %s",
		c.ServerName(), c.URL(), shellQuote("Authorization: Bearer "+c.Token))
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
