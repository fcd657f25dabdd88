package hostcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
)

// ports lists the previews agents opened with sandbox_expose_port, or
// closes them (ports close [AGENT [PORT]]).
func (c *cli) ports(ctx context.Context, args []string) int {
	if len(args) > 0 && args[0] == "close" {
		return c.portsClose(ctx, args[1:])
	}
	fs := c.flags("ports")
	asJSON := fs.Bool("json", false, "print JSON")
	if fs.Parse(args) != nil || fs.NArg() > 0 {
		fmt.Fprintln(c.err, portsUsage)
		return ExitUsage
	}
	list, err := c.previews(ctx)
	if err != nil {
		return c.fail(err)
	}
	if *asJSON {
		json.NewEncoder(c.out).Encode(list)
		return ExitOK
	}
	if len(list) == 0 {
		fmt.Fprintln(c.out, "no ports exposed; an agent exposes one with its sandbox_expose_port tool")
		return ExitOK
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "AGENT\tPORT\tURL\tSINCE")
	for _, p := range list {
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", p.Agent, p.Port, p.URL, p.Since.Local().Format(time.DateTime))
	}
	w.Flush()
	if c.remote != nil {
		fmt.Fprintf(c.out, "these URLs are on the loopback of context %s's machine; an agent's MCP relay (`osaurus-sandbox --context %s mcp --agent NAME`) forwards the previews it opens to this machine\n", c.remote.Name, c.remote.Name)
	}
	return ExitOK
}

// previews are the open previews: the file the owner keeps here (it may
// not run), or through a remote context what the far owner relays.
func (c *cli) previews(ctx context.Context) ([]api.Preview, error) {
	if c.remote != nil {
		ctl, err := c.owner(ctx)
		if err != nil {
			return nil, err
		}
		defer ctl.Close()
		list, err := ctl.Previews(ctx)
		return list, c.farError(err, "list previews")
	}
	list := []api.Preview{}
	b, err := os.ReadFile(c.paths.PreviewsFile())
	if errors.Is(err, os.ErrNotExist) {
		return list, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", c.paths.PreviewsFile(), err)
	}
	return list, nil
}

const portsUsage = "usage: osaurus-sandbox ports [--json]\n       osaurus-sandbox ports close [AGENT [PORT]]   (no AGENT: every preview)"

func (c *cli) portsClose(ctx context.Context, args []string) int {
	var req api.ClosePortsRequest
	switch len(args) {
	case 2:
		p, err := strconv.Atoi(args[1])
		if err != nil || p < 1 || p > 65535 {
			fmt.Fprintf(c.err, "osaurus-sandbox: port: %q, want 1–65535\n", args[1])
			return ExitUsage
		}
		req.Port = p
		fallthrough
	case 1:
		a, err := c.lookupAgent(ctx, args[0])
		if err != nil {
			return c.fail(err)
		}
		req.Agent = a.Slug
	case 0:
	default:
		fmt.Fprintln(c.err, portsUsage)
		return ExitUsage
	}
	if c.remote != nil {
		// The far owner runs (one starts when none does), and its
		// previews are its own.
		ctl, err := c.owner(ctx)
		if err != nil {
			return c.fail(err)
		}
		defer ctl.Close()
		pc, ok := ctl.(api.PortCloser)
		if !ok {
			return c.fail(errors.New("this build can't close a far side's previews"))
		}
		r, err := pc.ClosePorts(ctx, req)
		if err != nil {
			return c.fail(c.farError(err, "close previews"))
		}
		fmt.Fprintf(c.out, "closed %d previews on context %s\n", r.Closed, c.remote.Name)
		return ExitOK
	}
	cl, err := client.Dial(ctx, c.paths)
	if errors.Is(err, api.ErrNoOwner) {
		// No owner, no listener: a list left by one that died is stale.
		os.Remove(c.paths.PreviewsFile())
		fmt.Fprintln(c.out, "no previews are open (the app is not running)")
		return ExitOK
	}
	if err != nil {
		return c.fail(err)
	}
	defer cl.Close()
	r, err := cl.ClosePorts(ctx, req)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "closed %d previews\n", r.Closed)
	return ExitOK
}
