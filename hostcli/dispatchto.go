package hostcli

import (
	"context"
	"fmt"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agents"
)

// setDispatchTo is `agent set NAME dispatchTo A[,B...]|none`: the agents
// NAME may dispatch tasks to, each given by id, slug or name and stored by
// id (so a rename keeps the grant). The owner resolves and stores them;
// reg (read before) names them.
func (c *cli) setDispatchTo(ctx context.Context, reg *agents.Registry, ref, value string) int {
	a, err := c.updateAgent(ctx, ref, "dispatchTo", value)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "saved %s; it may dispatch tasks to: %s\n", a.Name, dispatchNames(reg, a))
	return ExitOK
}

// dispatchNames are the names of the agents a may dispatch to, "none"
// when there are none.
func dispatchNames(reg *agents.Registry, a agents.Agent) string {
	var names []string
	for _, id := range a.DispatchTo {
		if t, err := reg.Get(id); err == nil {
			names = append(names, t.Name)
		} else {
			names = append(names, id+" (removed)")
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
