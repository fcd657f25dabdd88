package hostcli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"golang.org/x/term"
)

// Where the bridge keeps per-agent state on the host.
func bridgeConfig(p config.Paths) *bridge.ConfigStore {
	return &bridge.ConfigStore{Dir: filepath.Join(p.Root, "bridge", "config")}
}

func bridgeLog(p config.Paths) *bridge.LogStore {
	return &bridge.LogStore{Dir: filepath.Join(p.Logs(), "agents")}
}

// secretStore is the OS keychain store every part of the app shares.
var secretStore = secrets.New()

// NewBridge builds the host API bridge of a data dir. The VM's owner
// passes its Attach to the sandbox manager (Options.OnGuest).
func NewBridge(p config.Paths, logf func(string, ...any)) *bridge.Server {
	// Without its database a route answers 503; the rest of the bridge
	// still works.
	mem, err := OpenMemory(context.Background(), p)
	if err != nil {
		logf("bridge: agent memory unavailable: %v", err)
	}
	ev, err := OpenEvents(context.Background(), p)
	if err != nil {
		logf("bridge: event log unavailable: %v", err)
	}
	return bridge.New(bridge.Options{
		Secrets: secretStore,
		Config:  bridgeConfig(p),
		Log:     bridgeLog(p),
		Memory:  mem,
		Events:  ev,
		HostCLI: assets.HostCLI,
		Logf:    logf,
	})
}

const secretUsage = `usage:
  osaurus-sandbox secret set AGENT KEY      the value is read from stdin (not echoed on a terminal)
  osaurus-sandbox secret list AGENT [--json]
  osaurus-sandbox secret remove AGENT KEY`

// secret manages agents' secrets in the OS keychain.
func (c *cli) secret(ctx context.Context, args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(c.err, secretUsage)
		return ExitUsage
	}
	reg, err := c.openAgents()
	if err != nil {
		return c.fail(err)
	}
	a, err := reg.Get(args[1])
	if err != nil {
		return c.fail(err)
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
		if err := secretStore.Set(a.Slug, args[2], v); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "stored %s for %s\n", args[2], a.Slug)
		return ExitOK
	case args[0] == "list" && (len(args) == 2 || len(args) == 3 && args[2] == "--json"):
		names, err := secretStore.List(a.Slug)
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
		if err := secretStore.Remove(a.Slug, args[2]); err != nil {
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
	b, err := io.ReadAll(io.LimitReader(bufio.NewReader(c.in), 1<<20))
	if err != nil {
		return "", fmt.Errorf("reading the value from stdin: %w", err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return "", fmt.Errorf("no value on stdin: pipe it in, e.g. `printf %%s VALUE | osaurus-sandbox secret set %s %s`", agent, key)
	}
	return v, nil
}

// agentLogs prints an agent's bridge log buffer (osaurus-host log).
func (c *cli) agentLogs(name string) int {
	reg, err := c.openAgents()
	if err != nil {
		return c.fail(err)
	}
	a, err := reg.Get(name)
	if err != nil {
		return c.fail(err)
	}
	s, err := bridgeLog(c.paths).Read(a.Slug)
	if err != nil {
		return c.fail(err)
	}
	io.WriteString(c.out, s)
	return ExitOK
}
