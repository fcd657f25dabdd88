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

// preview is one exposed port as the owner lists it (host.Preview).
type preview struct {
	Agent    string    `json:"agent"`
	Port     int       `json:"port"`
	HostPort int       `json:"hostPort"`
	URL      string    `json:"url"`
	Since    time.Time `json:"since"`
}

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
	list := []preview{}
	b, err := os.ReadFile(c.paths.PreviewsFile())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return c.fail(err)
	}
	if err == nil {
		if err := json.Unmarshal(b, &list); err != nil {
			return c.fail(fmt.Errorf("%s: %w", c.paths.PreviewsFile(), err))
		}
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
	return ExitOK
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
