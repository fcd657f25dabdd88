package hostcli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/internal/termsafe"
)

// parseAnywhere parses flags that may come after positional arguments
// (`memory search TEXT --agent a`) and returns the positionals.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

const memoryUsage = `usage:
  osaurus-sandbox memory list --agent NAME [--limit N] [--json]
  osaurus-sandbox memory search --agent NAME [--json] TEXT
  osaurus-sandbox memory remove --agent NAME ID | --all`

// memory shows and prunes an agent's memory (osaurus-host agent memory).
func (c *cli) memory(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(c.err, memoryUsage)
		return ExitUsage
	}
	sub := args[0]
	fs := c.flags("memory " + sub)
	agent := fs.String("agent", "", "the agent (name, slug or id)")
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 0, "list: at most this many, newest first (0: all)")
	all := fs.Bool("all", false, "remove: every entry of the agent")
	pos, err := parseAnywhere(fs, args[1:])
	if err != nil || *agent == "" {
		fmt.Fprintln(c.err, memoryUsage)
		return ExitUsage
	}
	a, err := c.lookupAgent(ctx, *agent)
	if err != nil {
		return c.fail(err)
	}
	// The owner is the one writer of memory.db: this process never opens it.
	ctl, err := c.owner(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer ctl.Close()
	var es []control.MemoryEntry
	switch {
	case sub == "list" && len(pos) == 0:
		var l control.MemoryList
		l, err = ctl.Memories(ctx, control.MemoryQuery{Agent: a.Slug, Limit: *limit})
		es = l.Entries
	case sub == "search" && len(pos) > 0:
		var l control.MemoryList
		l, err = ctl.Memories(ctx, control.MemoryQuery{Agent: a.Slug, Search: strings.Join(pos, " ")})
		es = l.Entries
	case sub == "remove" && *all && len(pos) == 0:
		r, err := ctl.RemoveMemory(ctx, control.MemoryRemove{Agent: a.Slug, All: true})
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "removed %d entries of %s\n", r.Removed, a.Slug)
		return ExitOK
	case sub == "remove" && len(pos) == 1:
		id, perr := strconv.ParseInt(pos[0], 10, 64)
		if perr != nil {
			return c.fail(fmt.Errorf("ID %q is not a number; `osaurus-sandbox memory list --agent %s` shows the ids", pos[0], a.Slug))
		}
		if _, err := ctl.RemoveMemory(ctx, control.MemoryRemove{Agent: a.Slug, ID: id}); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "removed entry %d of %s\n", id, a.Slug)
		return ExitOK
	default:
		fmt.Fprintln(c.err, memoryUsage)
		return ExitUsage
	}
	if err != nil {
		if errors.Is(err, agentproto.ErrInvalid) { // the query on the command line
			fmt.Fprintln(c.err, "osaurus-sandbox:", err)
			return ExitUsage
		}
		return c.fail(err)
	}
	if *asJSON {
		json.NewEncoder(c.out).Encode(es)
		return ExitOK
	}
	if len(es) == 0 {
		if sub == "list" {
			fmt.Fprintf(c.out, "%s has no memories; agents store them with `osaurus-host agent memory store TEXT`\n", a.Slug)
		} else {
			fmt.Fprintln(c.out, "no match")
		}
		return ExitOK
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCREATED\tSALIENCE\tCONTENT")
	for _, e := range es {
		fmt.Fprintf(tw, "%d\t%s\t%.2f\t%s\n", e.ID, e.CreatedAt.Local().Format(time.DateTime), e.Salience, escapeLine(e.Content))
	}
	tw.Flush()
	return ExitOK
}

// escapeLine keeps an entry on its row. Stored content has no control
// characters other than newline and tab (store/memory.CheckContent).
func escapeLine(s string) string { return termsafe.Line(s) }

const eventsUsage = `usage: osaurus-sandbox events [--follow] [--agent NAME] [--last N] [--json]`

// events prints the event log (osaurus-host events emit), optionally
// following it. --json prints one JSON object per line.
func (c *cli) events(ctx context.Context, args []string) int {
	fs := c.flags("events")
	follow := fs.Bool("follow", false, "keep printing events as they are emitted")
	fs.BoolVar(follow, "f", false, "short for --follow")
	agent := fs.String("agent", "", "only this agent's events (name, slug or id)")
	last := fs.Int("last", 50, "start with at most this many past events (0: all)")
	asJSON := fs.Bool("json", false, "one JSON object per line")
	if fs.Parse(args) != nil || fs.NArg() > 0 || *last < 0 {
		fmt.Fprintln(c.err, eventsUsage)
		return ExitUsage
	}
	f := control.EventFilter{Last: *last}
	if *agent != "" {
		a, err := c.lookupAgent(ctx, *agent)
		if err != nil {
			return c.fail(err)
		}
		f.Agent = a.Slug
	}
	// The owner is the one writer of events.db: this process never opens it.
	ctl, err := c.owner(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer ctl.Close()
	enc := json.NewEncoder(c.out)
	print := func(e control.Event) error {
		if *asJSON {
			return enc.Encode(e)
		}
		// The payload is compact JSON, so control characters in it are
		// escaped; the type is checked by the event log.
		_, err := fmt.Fprintf(c.out, "%s  %s  %s  %s\n", e.Time.Local().Format(time.DateTime), e.Agent, termsafe.Line(e.Type), termsafe.Line(string(e.Payload)))
		return err
	}
	if !*follow {
		es, err := ctl.Events(ctx, f)
		if err != nil {
			return c.fail(err)
		}
		if len(es) == 0 && !*asJSON {
			fmt.Fprintln(c.out, "no events yet; agents emit them with `osaurus-host events emit TYPE [PAYLOAD]`")
		}
		for _, e := range es {
			print(e)
		}
		return ExitOK
	}
	if err := ctl.FollowEvents(ctx, f, print); err != nil && ctx.Err() == nil {
		return c.fail(err)
	}
	return ExitOK
}
