package hostcli

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/osaurus/osaurus-sandbox/host/api"
)

const checkpointUsage = `usage: osaurus-sandbox checkpoint create [NAME]
       osaurus-sandbox checkpoint list [--json]
       osaurus-sandbox checkpoint restore [--yes] NAME
       osaurus-sandbox checkpoint remove NAME`

// checkpoint takes, lists, restores and removes sandbox checkpoints
// through the owner (which holds the VM still for them).
func (c *cli) checkpoint(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(c.err, checkpointUsage)
		return ExitUsage
	}
	sub, rest := args[0], args[1:]
	fs := c.flags("checkpoint " + sub)
	asJSON := fs.Bool("json", false, "print JSON")
	yes := fs.Bool("yes", false, "don't ask for confirmation")
	if fs.Parse(rest) != nil {
		return ExitUsage
	}
	var name string
	switch {
	case sub == "create" && fs.NArg() <= 1:
		name = fs.Arg(0)
	case sub == "list" && fs.NArg() == 0:
	case (sub == "restore" || sub == "remove") && fs.NArg() == 1:
		name = fs.Arg(0)
	default:
		fmt.Fprintln(c.err, checkpointUsage)
		return ExitUsage
	}
	if sub == "restore" && !*yes && !c.confirm(fmt.Sprintf("Restore puts back the VM's root disk, every agent's home and project views, and the agents' settings as they were in checkpoint %s.\nThe current state is saved first as an automatic checkpoint; a running VM is restarted.", name)) {
		return ExitDeclined
	}
	cl, err := c.connect(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer cl.Close()
	req := api.CheckpointRequest{Name: name}
	switch sub {
	case "create":
		m, err := cl.CreateCheckpoint(ctx, req)
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "checkpoint %s: %s, %s on disk, taken in %.2fs (%s; VM %s)\n", m.Name, size(m.Bytes), size(m.DiskBytes), m.Seconds, m.Method, m.VM)
	case "list":
		l, err := cl.ListCheckpoints(ctx)
		if err != nil {
			return c.fail(err)
		}
		if *asJSON {
			json.NewEncoder(c.out).Encode(l.Checkpoints)
			return ExitOK
		}
		if len(l.Checkpoints) == 0 {
			fmt.Fprintln(c.out, "no checkpoints; take one with `osaurus-sandbox checkpoint create [NAME]`")
			return ExitOK
		}
		w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tCREATED\tVM\tSIZE\tON DISK\tTOOK\tWHY")
		for _, m := range l.Checkpoints {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%.2fs\t%s\n", m.Name, m.Created.Local().Format(time.DateTime), m.VM, size(m.Bytes), size(m.DiskBytes), m.Seconds, m.Reason)
		}
		w.Flush()
	case "restore":
		r, err := cl.RestoreCheckpoint(ctx, req)
		if err != nil {
			return c.fail(err)
		}
		again := ""
		if r.Restarted {
			again = "; the VM was started again"
		}
		fmt.Fprintf(c.out, "restored checkpoint %s (the state before it is checkpoint %s)%s\n", r.Restored.Name, r.Saved.Name, again)
	case "remove":
		if err := cl.RemoveCheckpoint(ctx, req); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "removed checkpoint %s\n", name)
	}
	return ExitOK
}

// size is a byte count for people.
func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
