package hostcli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/projects"
)

const projectUsage = `usage:
  osaurus-sandbox project add PATH [--name NAME]
  osaurus-sandbox project list [--json]
  osaurus-sandbox project remove NAME
  osaurus-sandbox project repair
  osaurus-sandbox agent set AGENT projects NAME[,NAME...]   (or "none")
  osaurus-sandbox changes AGENT PROJECT [--json]
  osaurus-sandbox apply AGENT PROJECT [--review ID] [--yes] [--force]
        [--allow-exec-paths] [--allow-large] [PATHS...]
  osaurus-sandbox discard AGENT PROJECT [--yes] [PATHS...]
A project is a folder of yours. Each agent granted it works on a view of its
own at /workspace/projects/NAME; nothing reaches your folder until you apply it.`

func (c *cli) views() projects.Views { return projects.Views{Paths: c.paths} }

func (c *cli) project(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(c.err, projectUsage)
		return ExitUsage
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "add":
		fs := c.flags("project add")
		name := fs.String("name", "", "the project's name (default: the folder's name)")
		// PATH may come before or after the flags.
		var dir []string
		for len(args) > 0 {
			if fs.Parse(args) != nil {
				return ExitUsage
			}
			if fs.NArg() == 0 {
				break
			}
			dir = append(dir, fs.Arg(0))
			args = fs.Args()[1:]
		}
		if len(dir) != 1 {
			fmt.Fprintln(c.err, projectUsage)
			return ExitUsage
		}
		// The owner's working folder is not this one.
		if abs, err := filepath.Abs(dir[0]); err == nil {
			dir[0] = abs
		}
		if c.remote != nil {
			return c.projectAddRemote(ctx, dir[0], *name)
		}
		var p projects.Project
		err := c.withOwner(ctx, func(ctl api.Controller) (err error) {
			p, err = ctl.AddProject(ctx, control.ProjectAddRequest{Path: dir[0], Name: *name})
			return err
		})
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "added project %s: %s\ngrant it to an agent with `osaurus-sandbox agent set AGENT projects %s`; it sees its own view at %s\n",
			p.Name, p.Path, p.Name, projects.GuestDir(p.Name))
		return ExitOK
	case "list":
		fs := c.flags("project list")
		asJSON := fs.Bool("json", false, "print JSON")
		if fs.Parse(args) != nil || fs.NArg() > 0 {
			return ExitUsage
		}
		if c.remote != nil {
			return c.projectListRemote(ctx, *asJSON)
		}
		list, err := projects.Load(c.paths.ProjectsJSON())
		if err != nil {
			return c.fail(err)
		}
		reg, err := c.openAgents()
		if err != nil {
			return c.fail(err)
		}
		type view struct {
			projects.Project
			Agents []string `json:"agents"`
		}
		out := []view{}
		for _, p := range list {
			v := view{Project: p, Agents: []string{}}
			for _, a := range reg.List() {
				if slices.Contains(a.Projects, p.Name) {
					v.Agents = append(v.Agents, a.Slug)
				}
			}
			out = append(out, v)
		}
		if *asJSON {
			json.NewEncoder(c.out).Encode(out)
			return ExitOK
		}
		if len(out) == 0 {
			fmt.Fprintln(c.out, "no projects; add one with `osaurus-sandbox project add PATH`")
			return ExitOK
		}
		w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tPATH\tAGENTS")
		for _, v := range out {
			where := v.Path
			if v.UploadedFrom != "" {
				// Apply writes only this copy; the other machine writes
				// its own folder.
				where += " (uploaded from " + projects.Shown(v.UploadedFrom) + ")"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", v.Name, where, strings.Join(v.Agents, ","))
		}
		w.Flush()
		return ExitOK
	case "remove":
		if len(args) != 1 {
			fmt.Fprintln(c.err, projectUsage)
			return ExitUsage
		}
		if c.remote != nil {
			return c.projectRemoveRemote(ctx, args[0])
		}
		if err := c.withOwner(ctx, func(ctl api.Controller) error { return ctl.RemoveProject(ctx, args[0]) }); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "removed project %s (your folder is untouched)\n", args[0])
		return ExitOK
	case "repair":
		if fs := c.flags("project repair"); fs.Parse(args) != nil || fs.NArg() > 0 {
			return ExitUsage
		}
		return c.projectRepair(ctx)
	}
	fmt.Fprintln(c.err, projectUsage)
	return ExitUsage
}

// setProjects grants ref exactly the projects in value (comma-separated;
// "none" or "" for none), through the owner: views of newly granted ones
// are taken before the grant is saved, and views of projects taken away
// are dropped first, refused while they hold changes.
func (c *cli) setProjects(ctx context.Context, ref, value string) int {
	var want []string
	if v := strings.TrimSpace(value); v != "" && v != "none" {
		for n := range strings.SplitSeq(v, ",") {
			n = strings.TrimSpace(n)
			if n != "" && !slices.Contains(want, n) {
				want = append(want, n)
			}
		}
	}
	var a agents.Agent
	err := c.withOwner(ctx, func(ctl api.Controller) (err error) {
		a, err = ctl.SetAgentProjects(ctx, control.AgentProjectsRequest{Agent: ref, Projects: want})
		return err
	})
	if err != nil {
		return c.fail(err)
	}
	if len(want) == 0 {
		fmt.Fprintf(c.out, "saved %s: no projects\n", a.Name)
		return ExitOK
	}
	fmt.Fprintf(c.out, "saved %s: projects %s, each its own view at /workspace/projects/NAME\n", a.Name, strings.Join(want, ", "))
	return ExitOK
}

// agentProject resolves the AGENT PROJECT pair of changes, apply and
// discard: through a remote context, on the far side.
func (c *cli) agentProject(ctx context.Context, agent, project string) (agents.Agent, projects.Project, error) {
	if c.remote != nil {
		return c.agentProjectRemote(ctx, agent, project)
	}
	reg, err := c.openAgents()
	if err != nil {
		return agents.Agent{}, projects.Project{}, err
	}
	a, err := reg.Get(agent)
	if err != nil {
		return agents.Agent{}, projects.Project{}, err
	}
	p, err := projects.Get(c.paths.ProjectsJSON(), project)
	if err != nil {
		return agents.Agent{}, projects.Project{}, err
	}
	if !slices.Contains(a.Projects, p.Name) && !c.views().Has(a, p.Name) {
		return agents.Agent{}, projects.Project{}, fmt.Errorf("%w: %s has not been granted %q", projects.ErrNotGranted, a.Name, p.Name)
	}
	return a, p, nil
}

func (c *cli) changes(ctx context.Context, args []string) int {
	fs := c.flags("changes")
	asJSON := fs.Bool("json", false, "print JSON")
	if len(args) < 2 || fs.Parse(args[2:]) != nil || fs.NArg() > 0 {
		fmt.Fprintln(c.err, projectUsage)
		return ExitUsage
	}
	a, p, err := c.agentProject(ctx, args[0], args[1])
	if err != nil {
		return c.fail(err)
	}
	cs, err := c.viewChanges(ctx, a, p)
	if err != nil {
		return c.fail(err)
	}
	if *asJSON {
		json.NewEncoder(c.out).Encode(cs)
		return ExitOK
	}
	if len(cs.Changes) == 0 {
		fmt.Fprintf(c.out, "%s has not changed %s\n", a.Name, p.Name)
		return ExitOK
	}
	c.printChanges(cs)
	for _, ch := range cs.Changes {
		switch {
		case ch.Diff != "":
			// Changes escaped the diff's control characters.
			fmt.Fprintf(c.out, "\n%s", ch.Diff)
		case ch.Binary && ch.Kind != projects.Deleted:
			fmt.Fprintf(c.out, "\nbinary %s: %d bytes, sha256 %s (was %d bytes, %s)\n", projects.Shown(ch.Path), ch.Size, ch.Hash, ch.OldSize, orNone(ch.OldHash))
		}
	}
	fmt.Fprintf(c.out, "\napply exactly these with `osaurus-sandbox %sapply %s %s --review %s [PATHS...]`\n", c.contextArg(), a.Slug, p.Name, cs.Review)
	return ExitOK
}

// viewChanges has the owner compute and record a's changes to p.
func (c *cli) viewChanges(ctx context.Context, a agents.Agent, p projects.Project) (cs *projects.ChangeSet, err error) {
	err = c.withOwner(ctx, func(ctl api.Controller) (err error) {
		cs, err = ctl.ViewChanges(ctx, api.ViewRequest{Agent: a.ID, Project: p.Name})
		return err
	})
	return cs, err
}

// printChanges lists a review: its id, then per change its kind, mode,
// size, hash and path (escaped), with why it is refused or needs
// confirming.
func (c *cli) printChanges(cs *projects.ChangeSet) {
	fmt.Fprintf(c.out, "review %s\n", cs.Review)
	for _, ch := range cs.Changes {
		var notes []string
		if ch.Refused != "" {
			notes = append(notes, "refused: "+projects.Shown(ch.Refused))
		} else {
			if ch.HostExec != "" {
				notes = append(notes, "runs on your computer: "+ch.HostExec+"; apply needs --allow-exec-paths")
			}
			if ch.Large {
				notes = append(notes, "large: apply needs --allow-large")
			}
			if ch.HostChanged {
				notes = append(notes, "changed in your folder too: apply needs --force")
			}
		}
		note := ""
		if len(notes) > 0 {
			note = "  (" + strings.Join(notes, "; ") + ")"
		}
		hash := ch.Hash
		if hash == "" {
			hash = "-"
		} else {
			hash = hash[:min(16, len(hash))]
		}
		mode := "-"
		if ch.Kind != projects.Deleted && ch.Type == projects.TypeFile {
			mode = fmt.Sprintf("%04o", ch.Mode.Perm())
		}
		fmt.Fprintf(c.out, "%-8s %-4s %10d %-16s %s%s\n", ch.Kind, mode, ch.Size, hash, projects.Shown(ch.Path), note)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return "sha256 " + s
}

// applyOrDiscard runs apply (discard false) or discard.
func (c *cli) applyOrDiscard(discard bool) func(context.Context, []string) int {
	return func(ctx context.Context, args []string) int {
		name := "apply"
		if discard {
			name = "discard"
		}
		fs := c.flags(name)
		yes := fs.Bool("yes", false, "don't ask for confirmation")
		force, allowExec, allowLarge, reviewID := new(bool), new(bool), new(bool), new(string)
		if !discard {
			force = fs.Bool("force", false, "also write files changed in your folder since the agent's view was taken")
			reviewID = fs.String("review", "", "apply exactly this review (the id `changes` prints)")
			allowExec = fs.Bool("allow-exec-paths", false, "also write paths that run code on your computer (shell rc files, .vscode/, CI workflows...)")
			allowLarge = fs.Bool("allow-large", false, fmt.Sprintf("also write files bigger than %d MB", projects.LargeFile>>20))
		}
		if len(args) < 2 {
			fmt.Fprintln(c.err, projectUsage)
			return ExitUsage
		}
		var paths []string
		rest := args[2:]
		for len(rest) > 0 {
			if fs.Parse(rest) != nil {
				return ExitUsage
			}
			if fs.NArg() == 0 {
				break
			}
			paths = append(paths, fs.Arg(0))
			rest = fs.Args()[1:]
		}
		a, p, err := c.agentProject(ctx, args[0], args[1])
		if err != nil {
			return c.fail(err)
		}
		if c.remote != nil && !discard {
			return c.applyRemote(ctx, a, p, projects.ApplyOptions{Review: *reviewID, Paths: paths, Force: *force,
				AllowHostExec: *allowExec, AllowLarge: *allowLarge}, *yes)
		}
		var shown []string
		for _, p := range paths {
			shown = append(shown, projects.Shown(p))
		}
		if discard || *reviewID == "" {
			// Nothing changed: say so, and ask nothing.
			cs, err := c.viewChanges(ctx, a, p)
			if err != nil {
				return c.fail(err)
			}
			if len(cs.Changes) == 0 {
				fmt.Fprintf(c.out, "nothing to %s: %s has not changed %s since its view was taken\n", name, a.Name, p.Name)
				return ExitOK
			}
			if !discard {
				// No review given: this is the review. Show it, ask, and
				// apply exactly it.
				c.printChanges(cs)
				*reviewID = cs.Review
			}
		}
		if !*yes {
			var msg string
			switch {
			case discard && len(shown) == 0:
				msg = fmt.Sprintf("This throws away all of %s's changes to %s.", a.Name, p.Name)
			case discard:
				msg = fmt.Sprintf("This throws away %s's changes to %s in %s.", a.Name, strings.Join(shown, ", "), p.Name)
			case len(shown) == 0:
				msg = fmt.Sprintf("This writes every change of review %s from %s's view into %s.", *reviewID, a.Name, p.Path)
			default:
				msg = fmt.Sprintf("This writes %s, as of review %s, from %s's view into %s.", strings.Join(shown, ", "), *reviewID, a.Name, p.Path)
			}
			if !c.confirm(msg) {
				return ExitDeclined
			}
		}
		var r *projects.Result
		req := api.ViewRequest{Agent: a.ID, Project: p.Name, Paths: paths, Apply: projects.ApplyOptions{Review: *reviewID, Paths: paths, Force: *force,
			AllowHostExec: *allowExec, AllowLarge: *allowLarge}}
		// The owner writes the views, the reviews and your folder; it is
		// asked after the confirmation, so none is held while you answer.
		err = c.withOwner(ctx, func(ctl api.Controller) (err error) {
			if discard {
				r, err = ctl.DiscardChanges(ctx, req)
			} else {
				r, err = ctl.ApplyChanges(ctx, req)
			}
			return err
		})
		if r != nil && r.Checkpoint != "" {
			fmt.Fprintf(c.err, "saved the sandbox first as checkpoint %s\n", r.Checkpoint)
		}
		if r != nil {
			verb := "applied"
			if discard {
				verb = "discarded"
			}
			for _, d := range r.Done {
				fmt.Fprintf(c.out, "%s %s\n", verb, projects.Shown(d))
			}
			for _, s := range r.Refused {
				fmt.Fprintf(c.out, "refused %s: %s\n", projects.Shown(s.Path), projects.Shown(s.Reason))
			}
			for _, s := range r.Conflict {
				fmt.Fprintf(c.out, "conflict %s: %s\n", projects.Shown(s.Path), s.Reason)
			}
			for _, s := range r.Changed {
				fmt.Fprintf(c.out, "changed %s: %s\n", projects.Shown(s.Path), s.Reason)
			}
		}
		if err != nil {
			return c.fail(err)
		}
		if r != nil && len(r.Refused)+len(r.Conflict)+len(r.Changed) > 0 {
			return ExitError
		}
		return ExitOK
	}
}

// projectRepair rewrites a damaged projects.json with the projects it can
// still read, keeping the damaged file aside; no folder is touched.
func (c *cli) projectRepair(ctx context.Context) int {
	path := c.paths.ProjectsJSON()
	if c.remote != nil {
		path = "projects.json of context " + c.remote.Name
	}
	var res projects.RepairResult
	err := c.withOwner(ctx, func(ctl api.Controller) (err error) {
		res, err = ctl.RepairProjects(ctx)
		return err
	})
	if c.remote != nil {
		err = c.farError(err, "repair its projects")
	}
	if err != nil {
		return c.fail(err)
	}
	if res.Aside == "" {
		fmt.Fprintf(c.out, "%s is fine (%d projects); nothing to repair\n", path, len(res.Kept))
		return ExitOK
	}
	fmt.Fprintf(c.out, "moved the damaged file to %s\n", res.Aside)
	var names []string
	for _, p := range res.Kept {
		names = append(names, p.Name)
	}
	if len(names) > 0 {
		fmt.Fprintf(c.out, "kept %d projects: %s\n", len(names), strings.Join(names, ", "))
	} else {
		fmt.Fprintf(c.out, "no project could be read: starting with none (add your folders again with `osaurus-sandbox %sproject add PATH --name NAME`; agents' views are kept)\n", c.contextArg())
	}
	for _, d := range res.Dropped {
		fmt.Fprintf(c.out, "could not read: %s\n", d)
	}
	return ExitOK
}
