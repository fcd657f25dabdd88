package hostcli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agents"
)

// setDispatchTo is `agent set NAME dispatchTo A[,B...]|none`: the agents
// NAME may dispatch tasks to, each given by id, slug or name and stored by
// id (so a rename keeps the grant). The owner resolves and stores them;
// src names them.
func (c *cli) setDispatchTo(ctx context.Context, src agentSource, ref, value string) int {
	a, err := c.updateAgent(ctx, ref, "dispatchTo", value)
	if err != nil {
		return c.fail(err)
	}
	all, err := src.list(ctx)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "saved %s; it may dispatch tasks to: %s\n", a.Name, dispatchNames(all, a))
	return ExitOK
}

// dispatchNames are the names of the agents a may dispatch to, found by
// id among all, "none" when there are none.
func dispatchNames(all []agents.Agent, a agents.Agent) string {
	var names []string
	for _, id := range a.DispatchTo {
		if i := slices.IndexFunc(all, func(t agents.Agent) bool { return t.ID == id }); i >= 0 {
			names = append(names, all[i].Name)
		} else {
			names = append(names, id+" (removed)")
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
