package hostcli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/osaurus/osaurus-sandbox/projects"
)

// projectListRemote is `project list` through a remote context: the far
// owner's projects and which of its agents are granted each. An uploaded
// project shows the folder of this machine it came from, as recorded
// here (remote-projects.json): the far side's record of it is only a
// label.
func (c *cli) projectListRemote(ctx context.Context, asJSON bool) int {
	ctl, err := c.owner(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer ctl.Close()
	list, err := ctl.ListProjects(ctx)
	if err != nil {
		return c.fail(c.farError(err, "list its projects"))
	}
	al, err := ctl.ListAgents(ctx)
	if err != nil {
		return c.fail(c.farError(err, "list its agents"))
	}
	type view struct {
		projects.Project
		Agents []string `json:"agents"`
		// LocalDir is this machine's folder an uploaded project came
		// from, where apply writes ("" when not uploaded from here).
		LocalDir string `json:"localDir,omitempty"`
	}
	out := []view{}
	for _, p := range list {
		v := view{Project: p, Agents: []string{}}
		for _, a := range al.Agents {
			if slices.Contains(a.Projects, p.Name) {
				v.Agents = append(v.Agents, a.Slug)
			}
		}
		if p.UploadedFrom != "" {
			v.LocalDir, _ = c.linkedDir(p.Name) // not known here: none
		}
		out = append(out, v)
	}
	if asJSON {
		json.NewEncoder(c.out).Encode(out)
		return ExitOK
	}
	if len(out) == 0 {
		fmt.Fprintf(c.out, "context %s has no projects; upload one with `osaurus-sandbox %sproject add PATH`\n", c.remote.Name, c.contextArg())
		return ExitOK
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "NAME\tPATH (on %s)\tAGENTS\n", c.remote.Name)
	for _, v := range out {
		where := projects.Shown(v.Path)
		switch {
		case v.LocalDir != "":
			where += " (uploaded from " + projects.Shown(v.LocalDir) + " here)"
		case v.UploadedFrom != "":
			where += " (uploaded from " + projects.Shown(v.UploadedFrom) + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", v.Name, where, strings.Join(v.Agents, ","))
	}
	w.Flush()
	return ExitOK
}
