package hostcli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agents"
)

// setDispatchTo is `agent set NAME dispatchTo A[,B...]|none`: the agents
// NAME may dispatch tasks to, each given by id, slug or name and stored by
// id (so a rename keeps the grant).
func (c *cli) setDispatchTo(reg *agents.Registry, ref, value string) int {
	var ids []string
	if v := strings.TrimSpace(value); v != "" && v != "none" {
		for n := range strings.SplitSeq(v, ",") {
			if n = strings.TrimSpace(n); n == "" {
				continue
			}
			t, err := reg.Get(n)
			if err != nil {
				return c.fail(fmt.Errorf("dispatchTo: %q: %w (`osaurus-sandbox agent list` shows the agents)", n, err))
			}
			if !slices.Contains(ids, t.ID) {
				ids = append(ids, t.ID)
			}
		}
	}
	a, err := reg.Update(ref, func(a *agents.Agent) error {
		if slices.Contains(ids, a.ID) {
			return &agents.ValidationError{Field: "dispatchTo", Got: a.Name, Want: "other agents (an agent may always dispatch to itself)"}
		}
		a.DispatchTo = ids
		return nil
	})
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
