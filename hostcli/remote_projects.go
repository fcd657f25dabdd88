package hostcli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/projects"
	"github.com/osaurus/osaurus-sandbox/remotes"
)

// Projects across the link (docs/projects.md, "A project on another
// machine"): through a remote context, `project add` uploads the folder
// to the far owner, which keeps a copy of its own; `changes` and
// `discard` are the far owner's; `apply` writes the review's changes
// into this machine's folder itself, checking each here
// (projects.WriteApplied), and then has the far owner apply those it
// wrote to its copy. Which local folder a far project is written into is
// recorded here, never taken from the far side: a far side that lies
// can't choose where this machine writes.

// remoteProjectCmds are the project subcommands that work through a
// remote context.
var remoteProjectCmds = []string{"add", "list", "remove", "repair"}

// links is the record of which folder of this machine each far project
// came from (remotes.Links).
func (c *cli) links() remotes.Links {
	return remotes.Links{Path: remotes.LinksPath(c.paths.ConfigDir())}
}

// setLink records (or, with dir "", forgets) where the context's project
// came from.
func (c *cli) setLink(project, dir string) error {
	return c.links().Set(*c.remote, project, dir)
}

// linkedDir is the folder of this machine the context's project was
// uploaded from.
func (c *cli) linkedDir(project string) (string, error) {
	return c.links().Folder(*c.remote, project)
}

// projectAddRemote uploads dir to the far owner as project name.
func (c *cli) projectAddRemote(ctx context.Context, dir, name string) int {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return c.fail(fmt.Errorf("%w: path: %s is not a folder", projects.ErrInvalid, dir))
	}
	ctl, err := c.owner(ctx)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.err, "uploading %s to context %s...\n", dir, c.remote.Name)
	p, stats, err := remotes.UploadProject(ctx, ctl, *c.remote, c.links(), dir, name)
	if err != nil && p.Name == "" {
		return c.fail(c.farError(err, "take uploads"))
	}
	if err != nil {
		return c.fail(err)
	}
	for _, s := range stats.Skipped {
		fmt.Fprintf(c.err, "left out %s: %s\n", projects.Shown(s.Path), s.Reason)
	}
	fmt.Fprintf(c.out, "added project %s on context %s: a copy of %s (%d files, %d bytes); your folder stays here, and `apply` writes reviewed changes into it\ngrant it to an agent with `osaurus-sandbox --context %s agent set AGENT projects %s`; it sees its own view at %s\n",
		p.Name, c.remote.Name, dir, stats.Files, stats.Bytes, c.remote.Name, p.Name, projects.GuestDir(p.Name))
	return ExitOK
}

// projectRemoveRemote forgets the far project (and its copy there) and
// the record of its folder here; the folder is untouched.
func (c *cli) projectRemoveRemote(ctx context.Context, name string) int {
	if err := c.withOwner(ctx, func(ctl api.Controller) error { return ctl.RemoveProject(ctx, name) }); err != nil {
		return c.fail(err)
	}
	if err := c.setLink(name, ""); err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "removed project %s from context %s (your folder is untouched)\n", name, c.remote.Name)
	return ExitOK
}

// agentProjectRemote resolves AGENT PROJECT on the far side: the agent
// by its owner, the project by name (its owner checks the grant).
func (c *cli) agentProjectRemote(ctx context.Context, agent, project string) (agents.Agent, projects.Project, error) {
	src, err := c.agentSource()
	if err != nil {
		return agents.Agent{}, projects.Project{}, err
	}
	a, err := src.get(ctx, agent)
	if err != nil {
		return agents.Agent{}, projects.Project{}, err
	}
	return a, projects.Project{Name: project}, nil
}

// applyRemote writes review of a's changes to the far project p.Name
// into this machine's folder and then has the far side apply exactly
// the ones written (remotes.ApplyUploaded). Changes this folder can't
// take (refused here, or changed here since the upload without --force)
// are left out of what the far side applies, so they stay changes there.
func (c *cli) applyRemote(ctx context.Context, a agents.Agent, p projects.Project, o projects.ApplyOptions, yes bool) int {
	dir, err := c.linkedDir(p.Name)
	if err != nil {
		return c.fail(err)
	}
	cs, err := c.viewChanges(ctx, a, p)
	if err != nil {
		return c.fail(err)
	}
	if len(cs.Changes) == 0 {
		fmt.Fprintf(c.out, "nothing to apply: %s has not changed %s since its view was taken\n", a.Name, p.Name)
		return ExitOK
	}
	if o.Review == "" {
		c.printChanges(cs)
		o.Review = cs.Review
	} else if o.Review != cs.Review {
		// A review is its content: another id means the changes differ
		// from what was shown.
		return c.fail(fmt.Errorf("%w: review %s is no longer what %s changed in %s (now review %s); see them again with `osaurus-sandbox --context %s changes %s %s`",
			projects.ErrInvalid, projects.Shown(o.Review), a.Name, p.Name, cs.Review, c.remote.Name, a.Slug, p.Name))
	}
	// Checked before asking: a path that is not a change is a mistake.
	if _, err := remotes.PickChanges(cs, o.Paths); err != nil {
		return c.fail(fmt.Errorf("%w; see `osaurus-sandbox --context %s changes %s %s`", err, c.remote.Name, a.Slug, p.Name))
	}
	if !yes {
		var shown []string
		for _, p := range o.Paths {
			shown = append(shown, projects.Shown(p))
		}
		what := "every change"
		if len(shown) > 0 {
			what = strings.Join(shown, ", ") + ", as"
		}
		if !c.confirm(fmt.Sprintf("This writes %s of review %s from %s's view (context %s) into %s.", what, o.Review, a.Name, c.remote.Name, dir)) {
			return ExitDeclined
		}
	}
	ctl, err := c.owner(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer ctl.Close()
	out, err := remotes.ApplyUploaded(ctx, ctl, *c.remote, c.links(), a, p, cs, o)
	if out.Checkpoint != "" {
		fmt.Fprintf(c.err, "saved the sandbox on context %s first as checkpoint %s\n", c.remote.Name, out.Checkpoint)
	}
	for _, d := range out.Applied {
		fmt.Fprintf(c.out, "applied %s\n", projects.Shown(d))
	}
	printSkipped := func(r *projects.Result) {
		for _, s := range r.Refused {
			fmt.Fprintf(c.out, "refused %s: %s\n", projects.Shown(s.Path), projects.Shown(s.Reason))
		}
		for _, s := range r.Conflict {
			fmt.Fprintf(c.out, "conflict %s: %s\n", projects.Shown(s.Path), projects.Shown(s.Reason))
		}
		for _, s := range r.Changed {
			fmt.Fprintf(c.out, "changed %s: %s\n", projects.Shown(s.Path), projects.Shown(s.Reason))
		}
	}
	if out.Here != nil {
		printSkipped(out.Here)
	}
	if out.Far != nil {
		printSkipped(out.Far)
	}
	for _, d := range out.Unasked {
		// Not written here, so not asked for: the far side says it took
		// a change this folder does not have.
		fmt.Fprintf(c.out, "refused %s: the far side applied a path that is not one it was asked to apply: not written here\n", projects.Shown(d))
	}
	for _, d := range out.Pending {
		fmt.Fprintf(c.out, "%s: written here; still listed as a change on context %s: run apply again\n", projects.Shown(d), c.remote.Name)
	}
	if err != nil {
		return c.fail(err)
	}
	if out.Problems() > 0 {
		return ExitError
	}
	return ExitOK
}
