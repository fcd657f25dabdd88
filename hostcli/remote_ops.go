package hostcli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/osaurus/osaurus-sandbox/plugins"
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

// agentRepairRemote is `agent repair` through a remote context: the far
// owner repairs its agents.json. An owner that is not running can't
// start on a damaged one, and then the repair is that machine's own.
func (c *cli) agentRepairRemote(ctx context.Context) int {
	ctl, err := c.owner(ctx)
	if err != nil {
		return c.fail(fmt.Errorf("%w\nif that machine's agents.json is damaged, no owner can start there to repair it: run `%s` on it", c.farError(err, "repair its agents"), c.remote.FarCommand("agent", "repair")))
	}
	defer ctl.Close()
	res, err := ctl.RepairAgents(ctx)
	if err != nil {
		return c.fail(c.farError(err, "repair its agents"))
	}
	return c.agentRepaired(res, "agents.json of context "+c.remote.Name)
}

// refetchFar is `plugin update ID` through a remote context: the far
// library's plugin fetched again here from its URL, as `plugin import`
// through a context fetches. A file origin is a path of the far machine,
// which this one can't read.
func (c *cli) refetchFar(ctx context.Context, src pluginSource, im *plugins.Importer, id string) (*plugins.Plugin, plugins.Origin, error) {
	e, err := src.get(ctx, id)
	if err != nil {
		return nil, plugins.Origin{}, err
	}
	o := e.Current().Origin
	switch o.Kind {
	case plugins.OriginURL, plugins.OriginGitHub:
	case plugins.OriginFile:
		return nil, plugins.Origin{}, fmt.Errorf("plugin %s was imported from the file %s of context %s's machine, which this one can't read: run `%s` there, or `osaurus-sandbox %splugin import FILE` from a copy here",
			id, projects.Shown(o.Location), c.remote.Name, c.remote.FarCommand("plugin", "update", id), c.contextArg())
	default:
		return nil, plugins.Origin{}, fmt.Errorf("plugin %s was not imported (its origin is %s), so there is nothing to fetch it from again", id, o.Kind)
	}
	p, fetched, err := im.Import(ctx, o.Location)
	if err != nil {
		return nil, plugins.Origin{}, err
	}
	if p.ID() != id {
		return nil, plugins.Origin{}, fmt.Errorf("%s now holds the plugin %q, not %q; import it as a new plugin with `osaurus-sandbox %splugin import %s`", o.Location, p.ID(), id, c.contextArg(), o.Location)
	}
	return p, fetched, nil
}

// farSaidError is an error of the far owner, its message with the fixes
// it names said as commands to run here, through the context.
type farSaidError struct {
	msg string
	err error
}

func (e farSaidError) Error() string { return e.msg }
func (e farSaidError) Unwrap() error { return e.err }

func (c *cli) farSaid(err error) error {
	if err == nil {
		return nil
	}
	return farSaidError{fmt.Sprintf("context %s (%s): %s", c.remote.Name, c.remote.URL, c.viaContext(err.Error())), err}
}

// viaContext is s with each command it names (`osaurus-sandbox …`) run
// through the context.
func (c *cli) viaContext(s string) string {
	return strings.ReplaceAll(s, "`osaurus-sandbox ", "`osaurus-sandbox "+c.contextArg())
}
