package hostcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"
)

// preview is one exposed port as the owner lists it (host.Preview).
type preview struct {
	Agent    string    `json:"agent"`
	Port     int       `json:"port"`
	HostPort int       `json:"hostPort"`
	URL      string    `json:"url"`
	Since    time.Time `json:"since"`
}

// ports lists the previews agents opened with sandbox_expose_port.
func (c *cli) ports(ctx context.Context, args []string) int {
	fs := c.flags("ports")
	asJSON := fs.Bool("json", false, "print JSON")
	if fs.Parse(args) != nil || fs.NArg() > 0 {
		fmt.Fprintln(c.err, "usage: osaurus-sandbox ports [--json]")
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
