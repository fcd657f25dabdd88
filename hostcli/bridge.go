package hostcli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/termsafe"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

const secretUsage = `usage:
  osaurus-sandbox secret set AGENT KEY      the value is read from stdin (not echoed on a terminal)
  osaurus-sandbox secret list AGENT [--json]
  osaurus-sandbox secret remove AGENT KEY
  osaurus-sandbox secret set|remove --app INFERENCE_API_KEY   the app's own (the model server's API key)`

// secret manages agents' secrets in the data folder's secret store (the
// OS keychain, or the file secretStore names).
func (c *cli) secret(ctx context.Context, args []string) int {
	if len(args) >= 2 && args[1] == "--app" {
		return c.secretApp(ctx, args)
	}
	if len(args) < 2 {
		fmt.Fprintln(c.err, secretUsage)
		return ExitUsage
	}
	var (
		a   agents.Agent
		sec = c.sec
	)
	if c.remote != nil {
		// This machine's entries of the context; the far side names the
		// agent.
		var err error
		if a, err = c.farSecretAgent(ctx, args[1]); err != nil {
			return c.fail(err)
		}
		sec = c.farSecrets()
	} else {
		reg, err := c.openAgents()
		if err != nil {
			return c.fail(err)
		}
		if a, err = reg.Get(args[1]); err != nil {
			return c.fail(err)
		}
	}
	switch {
	case args[0] == "set" && len(args) == 3:
		if err := secrets.CheckKey(args[2]); err != nil {
			return c.fail(err)
		}
		v, err := c.readSecret(a.Slug, args[2])
		if err != nil {
			return c.fail(err)
		}
		if err := sec.Set(a.Slug, args[2], v); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "stored %s for %s\n", args[2], a.Slug)
		return ExitOK
	case args[0] == "list" && (len(args) == 2 || len(args) == 3 && args[2] == "--json"):
		names, err := sec.List(a.Slug)
		if err != nil {
			return c.fail(err)
		}
		if len(args) == 3 {
			json.NewEncoder(c.out).Encode(names)
			return ExitOK
		}
		if len(names) == 0 {
			fmt.Fprintf(c.out, "%s has no secrets; add one with `osaurus-sandbox secret set %s KEY`\n", a.Slug, a.Slug)
		}
		for _, n := range names {
			fmt.Fprintln(c.out, n)
		}
		return ExitOK
	case args[0] == "remove" && len(args) == 3:
		if err := sec.Remove(a.Slug, args[2]); err != nil {
			if errors.Is(err, secrets.ErrNotFound) {
				return c.fail(fmt.Errorf("%s has no secret %s (see `osaurus-sandbox secret list %s`)", a.Slug, args[2], a.Slug))
			}
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "removed %s from %s\n", args[2], a.Slug)
		return ExitOK
	}
	fmt.Fprintln(c.err, secretUsage)
	return ExitUsage
}

// removeAgentSecrets deletes a removed agent's secrets from the keychain,
// so a later agent of the same name starts without them. The agent is
// already gone from the registry, so a keychain that can't be reached is
// a warning rather than a failure: on a machine without one there is
// nothing to delete.
func (c *cli) removeAgentSecrets(slug string) {
	gone, err := c.sec.RemoveAll(slug)
	var marked *secrets.MarkedError
	switch {
	case errors.As(err, &marked):
		fmt.Fprintf(c.err, "warning: its secrets in %s could not be deleted now: %v\n", c.sec.Where(), err)
	case err != nil:
		fmt.Fprintf(c.err, "warning: its secrets in %s were not deleted: %v\n", c.sec.Where(), err)
	case len(gone) > 0:
		fmt.Fprintf(c.out, "deleted its secrets from %s: %s\n", c.sec.Where(), strings.Join(gone, ", "))
	}
}

// readSecret reads a value from stdin: without echo on a terminal, else
// the piped input with one trailing newline dropped.
func (c *cli) readSecret(agent, key string) (string, error) {
	if f, ok := c.in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(c.err, "value of %s for %s (not shown): ", key, agent)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(c.err)
		if err != nil {
			return "", fmt.Errorf("reading the value: %w", err)
		}
		return string(b), nil
	}
	// Read one byte past the limit (and a line end) to refuse, not cut,
	// a longer value.
	b, err := io.ReadAll(io.LimitReader(bufio.NewReader(c.in), secrets.MaxValueBytes+3))
	if err != nil {
		return "", fmt.Errorf("reading the value from stdin: %w", err)
	}
	if len(b) > secrets.MaxValueBytes+2 {
		return "", fmt.Errorf("%w: the value of %s on stdin is longer than the %d bytes a secret may hold; nothing was stored", secrets.ErrInvalid, key, secrets.MaxValueBytes)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("no value on stdin: pipe it in, e.g. `printf %%s VALUE | osaurus-sandbox secret set %s %s`", agent, key)
	}
	return v, nil
}

// agentLogs prints an agent's bridge log buffer (osaurus-host log).
func (c *cli) agentLogs(ctx context.Context, name string) int {
	a, err := c.lookupAgent(ctx, name)
	if err != nil {
		return c.fail(err)
	}
	ctl, err := c.owner(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer ctl.Close()
	s, err := ctl.AgentLog(ctx, a.Slug)
	if err != nil {
		return c.fail(err)
	}
	if s == "" {
		fmt.Fprintf(c.out, "%s's log is empty; the agent writes to it with `osaurus-host log MESSAGE`\n", a.Slug)
		return ExitOK
	}
	io.WriteString(c.out, termsafe.String(s))
	return ExitOK
}
