package ui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/projects"
	"github.com/osaurus/osaurus-sandbox/remotes"
)

// changesView shows what an agent changed in its view of a project, a
// file at a time, and applies or discards the files the user picks, under
// the CLI's rules: a file changed in the user's folder meanwhile is
// refused unless Force is checked; links, devices and set-uid files are
// listed as refused and can't be picked (Apply refuses them anyway).
type changesView struct {
	paths config.Paths
	reg   *agents.Registry
	ops   AgentOps // the owner's: it writes the views and the folders
	win   fyne.Window
	do    func(func())
	// remote is the context whose agents' changes these are (nil: this
	// machine's). Its owner shows and discards them; applying writes an
	// uploaded project into this machine's folder first, the one links
	// records, and then has the owner apply what was written
	// (remotes.ApplyUploaded, as `apply` through the context does).
	remote *remotes.Context
	links  remotes.Links

	Agent, Project          *widget.Select
	Refresh, Apply, Discard *widget.Button
	All, Force              *widget.Check
	Files                   []*changeRow
	Diff                    *widget.Label
	Status                  *widget.Label
	Result                  *widget.Label // what the last Apply or Discard did
	rows                    *fyne.Container

	cs *projects.ChangeSet
	// busy counts loads and applies in flight (tests wait for 0).
	busy int
}

// changeRow is one changed file: its mark, the check that picks it and
// the button that shows its diff.
type changeRow struct {
	Change projects.Change
	Pick   *widget.Check
	Show   *widget.Button
}

func newChangesView(p config.Paths, reg *agents.Registry, win fyne.Window, do func(func())) *changesView {
	v := &changesView{paths: p, reg: reg, win: win, do: do}
	v.Agent = widget.NewSelect(nil, func(string) { v.Result.SetText(""); v.projectChoices(); v.load() })
	v.Agent.PlaceHolder = "agent"
	v.Project = widget.NewSelect(nil, func(string) { v.Result.SetText(""); v.load() })
	v.Project.PlaceHolder = "project"
	v.Refresh = widget.NewButton("Refresh", v.onRefresh)
	v.Apply = widget.NewButton("Apply…", func() { v.confirm(false) })
	v.Discard = widget.NewButton("Discard…", func() { v.confirm(true) })
	v.All = widget.NewCheck("All", func(on bool) {
		for _, r := range v.Files {
			if !r.Pick.Disabled() {
				r.Pick.SetChecked(on)
			}
		}
	})
	v.Force = widget.NewCheck("Also write files changed in your folder since the view was taken", nil)
	v.Diff = widget.NewLabel("Select a file to see its diff.")
	v.Diff.TextStyle = fyne.TextStyle{Monospace: true}
	v.Status = wrapped("Pick an agent and one of its projects.")
	v.Result = wrapped("")
	v.rows = container.NewVBox()
	v.refreshChoices()
	return v
}

// onRefresh reads the grants and the changes again. A remote context's
// grants are its owner's: they are asked for off the UI goroutine.
func (v *changesView) onRefresh() {
	if v.remote == nil || v.reg == nil {
		v.refreshChoices()
		v.load()
		return
	}
	v.busy++
	go func() {
		err := v.reg.Reload()
		v.do(func() {
			v.busy--
			if err != nil {
				v.Status.SetText("The agents of " + v.remote.Name + " can't be read: " + err.Error())
			}
			v.refreshChoices()
			v.load()
		})
	}()
}

// followGrants lists the agents' projects again whenever the registry
// (a remote context's mirror, reloaded by any tab) changes, until ctx
// ends.
func (v *changesView) followGrants(ctx context.Context) {
	if v.reg == nil {
		return
	}
	wake := make(chan struct{}, 1)
	// The registry calls back on the goroutine that reloaded it, maybe
	// the UI's: only poke here.
	defer v.reg.Subscribe(func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	})()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
			v.do(v.refreshChoices)
		}
	}
}

// resolve is the agent and project a view request names: this machine's
// checked as the CLI checks them; a remote context's owner checks its
// own (its projects.json is there).
func (v *changesView) resolve(agent, project string) (agents.Agent, string, error) {
	if v.remote == nil {
		a, p, err := resolveGrant(v.paths, v.reg, agent, project)
		return a, p.Name, err
	}
	if v.reg == nil {
		return agents.Agent{}, "", errors.New("no agent registry")
	}
	a, err := v.reg.Get(agent)
	return a, project, err
}

// refreshChoices lists the agents that hold projects, keeping the choice.
func (v *changesView) refreshChoices() {
	var names []string
	if v.reg != nil {
		for _, a := range v.reg.List() {
			if len(a.Projects) > 0 {
				names = append(names, a.Slug)
			}
		}
	}
	v.Agent.Options = names
	if v.Agent.Selected != "" && !slices.Contains(names, v.Agent.Selected) {
		v.Agent.ClearSelected()
	}
	v.Agent.Refresh()
	v.projectChoices()
}

func (v *changesView) projectChoices() {
	var names []string
	if v.reg != nil && v.Agent.Selected != "" {
		if a, err := v.reg.Get(v.Agent.Selected); err == nil {
			names = a.Projects
		}
	}
	v.Project.Options = names
	if v.Project.Selected != "" && !slices.Contains(names, v.Project.Selected) {
		v.Project.ClearSelected()
	}
	v.Project.Refresh()
}

// load computes the changes off the UI goroutine and shows them.
func (v *changesView) load() {
	agent, project := v.Agent.Selected, v.Project.Selected
	if agent == "" || project == "" {
		v.show(nil, nil)
		return
	}
	v.busy++
	go func() {
		var cs *projects.ChangeSet
		a, p, err := v.resolve(agent, project)
		if err == nil && v.ops == nil {
			err = errNoOps
		}
		if err == nil {
			// The owner records the review.
			cs, err = v.ops.ViewChanges(context.Background(), api.ViewRequest{Agent: a.ID, Project: p})
		}
		v.do(func() {
			v.busy--
			if v.Agent.Selected == agent && v.Project.Selected == project {
				v.show(cs, err)
			}
		})
	}()
}

// mark is a change's line in the list.
func mark(c projects.Change) string {
	m := map[string]string{projects.Added: "A", projects.Modified: "M", projects.Deleted: "D"}[c.Kind]
	if m == "" {
		m = "?"
	}
	// The agent named the file: shown escaped, so a name can't pass for
	// a refusal or hide what follows it.
	s := m + "  " + projects.Shown(c.Path)
	switch {
	case c.Refused != "":
		s += "  (refused: " + c.Refused + "; never applied)"
	case c.HostExec != "":
		s += "  (runs on your computer: asks again before it is applied)"
	case c.Large:
		s += "  (large: asks again before it is applied)"
	case c.HostChanged:
		s += "  (changed in your folder too: needs Force)"
	}
	return s
}

func (v *changesView) show(cs *projects.ChangeSet, err error) {
	v.cs = cs
	v.Files = nil
	v.rows.Objects = nil
	v.All.SetChecked(false)
	v.Diff.SetText("Select a file to see its diff.")
	switch {
	case err != nil:
		v.Status.SetText("Changes can't be read: " + err.Error())
	case cs == nil:
		v.Status.SetText("Pick an agent and one of its projects.")
	case len(cs.Changes) == 0:
		v.Status.SetText(fmt.Sprintf("%s has not changed %s.", cs.Agent, cs.Project))
	default:
		v.Status.SetText(fmt.Sprintf("%d changes by %s to %s. Check the files to apply or discard.", len(cs.Changes), cs.Agent, cs.Project))
	}
	if cs != nil {
		for _, c := range cs.Changes {
			r := &changeRow{Change: c, Pick: widget.NewCheck(mark(c), nil)}
			if c.Refused != "" {
				r.Pick.Disable()
			}
			r.Show = widget.NewButton("Diff", func() { v.Diff.SetText(diffText(c)) })
			v.Files = append(v.Files, r)
			v.rows.Add(container.NewBorder(nil, nil, nil, r.Show, r.Pick))
		}
	}
	v.rows.Refresh()
}

// diffText is what the diff pane shows for c.
func diffText(c projects.Change) string {
	switch {
	case c.Refused != "":
		return fmt.Sprintf("%s: %s, refused (%s); it is never applied.", projects.Shown(c.Path), c.Type, c.Refused)
	case c.Diff != "":
		return c.Diff
	case c.Kind == projects.Deleted:
		return projects.Shown(c.Path) + ": deleted by the agent."
	case c.Binary:
		old := "none"
		if c.OldHash != "" {
			old = fmt.Sprintf("%d bytes, sha256 %s", c.OldSize, c.OldHash)
		}
		return fmt.Sprintf("%s: binary or large, %d bytes, sha256 %s (was: %s)", projects.Shown(c.Path), c.Size, c.Hash, old)
	}
	return projects.Shown(c.Path) + ": no textual difference."
}

// picked are the checked files' paths.
func (v *changesView) picked() []string {
	var out []string
	for _, r := range v.Files {
		if r.Pick.Checked && r.Change.Refused == "" {
			out = append(out, r.Change.Path)
		}
	}
	return out
}

// confirm asks before applying (or discarding) the picked files; picked
// paths that run code on the user's computer, or large files, are asked
// about a second time, on their own.
func (v *changesView) confirm(discard bool) {
	paths := v.picked()
	if v.cs == nil || len(paths) == 0 {
		v.Status.SetText("Check the files first (All checks every file that can be applied).")
		return
	}
	agent, project, review, cs := v.Agent.Selected, v.Project.Selected, v.cs.Review, v.cs
	force := v.Force.Checked
	into := v.cs.Source
	write := func(o projects.ApplyOptions) { v.run(agent, project, paths, false, o) }
	if v.remote != nil && !discard {
		// A remote context's project is written into the folder of this
		// machine it was uploaded from, which only this machine's record
		// names: without one there is nowhere here to write.
		dir, err := v.links.Folder(*v.remote, project)
		if err != nil {
			v.Result.SetText(noFolderText(*v.remote, project, err))
			return
		}
		into = fmt.Sprintf("%s, your folder on this computer (then %s applies them to its copy)", dir, v.remote.Name)
		write = func(o projects.ApplyOptions) { v.applyUploaded(agent, project, cs, o) }
	}
	var exec, large []string
	for _, r := range v.Files {
		if r.Pick.Checked && r.Change.Refused == "" {
			if r.Change.HostExec != "" {
				exec = append(exec, r.Change.Path)
			}
			if r.Change.Large {
				large = append(large, r.Change.Path)
			}
		}
	}
	apply := func(o projects.ApplyOptions) {
		if len(exec) == 0 && len(large) == 0 {
			write(o)
			return
		}
		var b strings.Builder
		if len(exec) > 0 {
			fmt.Fprintf(&b, "These files run commands on your computer (shells, git, editors or CI read them):\n%s\n", pathList(exec))
		}
		if len(large) > 0 {
			fmt.Fprintf(&b, "These files are bigger than %d MB:\n%s\n", projects.LargeFile>>20, pathList(large))
		}
		b.WriteString("Write them too? No writes the other files only.")
		dialog.ShowConfirm("Apply files that run on your computer?", b.String(), func(ok bool) {
			o.AllowHostExec, o.AllowLarge = ok, ok
			write(o)
		}, v.win)
	}
	title, msg := "Apply changes", fmt.Sprintf("Write %d files of %s's view into %s?\n%s", len(paths), agent, into, pathList(paths))
	if force {
		msg += "\nForce is checked: files changed in your folder since the view was taken are overwritten."
	}
	if discard {
		title, msg = "Discard changes", fmt.Sprintf("Throw away %s's changes to %d files of %s?\n%s", agent, len(paths), project, pathList(paths))
	}
	dialog.ShowConfirm(title, msg, func(ok bool) {
		switch {
		case !ok:
		case discard:
			v.run(agent, project, paths, true, projects.ApplyOptions{})
		default:
			apply(projects.ApplyOptions{Review: review, Paths: paths, Force: force})
		}
	}, v.win)
}

// pathList shows up to 10 paths, escaped.
func pathList(paths []string) string {
	shown := make([]string, 0, min(len(paths), 10))
	for _, p := range paths[:min(len(paths), 10)] {
		shown = append(shown, projects.Shown(p))
	}
	if len(paths) > 10 {
		return strings.Join(shown, "\n") + fmt.Sprintf("\n… and %d more", len(paths)-10)
	}
	return strings.Join(shown, "\n")
}

// run applies (o: the review and paths, and what the user confirmed) or
// discards paths.
func (v *changesView) run(agent, project string, paths []string, discard bool, o projects.ApplyOptions) {
	v.busy++
	go func() {
		var r *projects.Result
		a, p, err := v.resolve(agent, project)
		if err == nil && v.ops == nil {
			err = errNoOps
		}
		if err == nil {
			// The owner writes the view and the folder.
			req := api.ViewRequest{Agent: a.ID, Project: p, Apply: o, Paths: paths}
			if discard {
				r, err = v.ops.DiscardChanges(context.Background(), req)
			} else {
				r, err = v.ops.ApplyChanges(context.Background(), req)
			}
		}
		v.do(func() {
			v.busy--
			v.Result.SetText(applyResultText(r, err, discard))
			v.load()
		})
	}()
}

// farApplyTime bounds applying a remote context's changes: the files
// come over the link, maybe large ones, but a link that hangs must not
// keep the tab busy forever.
const farApplyTime = 10 * time.Minute

// applyUploaded applies the review cs (the one shown and confirmed) of
// a remote context's project: this machine's folder first, then the far
// side's copy (remotes.ApplyUploaded).
func (v *changesView) applyUploaded(agent, project string, cs *projects.ChangeSet, o projects.ApplyOptions) {
	rc, ops, links := *v.remote, v.ops, v.links
	v.busy++
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), farApplyTime)
		defer cancel()
		var out remotes.ApplyOutcome
		a, p, err := v.resolve(agent, project)
		if err == nil && ops == nil {
			err = errNoOps
		}
		// The review shown is checked against the far side's now, as the
		// command line does, before anything is written here: changes the
		// agent made since are shown first, not half-applied.
		var now *projects.ChangeSet
		if err == nil {
			now, err = ops.ViewChanges(ctx, api.ViewRequest{Agent: a.ID, Project: p})
		}
		if err == nil && now.Review != cs.Review {
			v.do(func() {
				v.busy--
				v.Result.SetText(fmt.Sprintf("Nothing written: %s changed %s since this review was shown (now review %s). The list is reloaded: look again, then apply.", agent, project, now.Review))
				v.load()
			})
			return
		}
		if err == nil {
			out, err = remotes.ApplyUploaded(ctx, ops, rc, links, a, projects.Project{Name: p}, cs, o)
		}
		v.do(func() {
			v.busy--
			v.Result.SetText(uploadedResultText(rc, project, out, err))
			v.load()
		})
	}()
}

// noFolderText says why a remote context's project can't be applied
// here: no record of its folder on this machine, or a stale one.
func noFolderText(rc remotes.Context, project string, err error) string {
	if errors.Is(err, remotes.ErrNoFolder) {
		return fmt.Sprintf("Nothing written: project %s of %s was not uploaded from this computer, so there is no folder here to write its changes into. "+
			"Apply them on the computer that uploaded it, or upload a folder of this one in Projects.", project, rc.Name)
	}
	return "Nothing written: " + err.Error()
}

// uploadedResultText says what applying a remote context's changes did
// here and there. The far side's reasons are its own: shown escaped.
func uploadedResultText(rc remotes.Context, project string, out remotes.ApplyOutcome, err error) string {
	if out.Here == nil && err != nil {
		return noFolderText(rc, project, err) // nothing was tried
	}
	var b strings.Builder
	if out.Checkpoint != "" {
		fmt.Fprintf(&b, "Saved the sandbox on %s first as checkpoint %s. ", rc.Name, projects.Shown(out.Checkpoint))
	}
	if len(out.Applied) > 0 {
		fmt.Fprintf(&b, "Applied: %s (written into %s and applied on %s).", strings.ReplaceAll(pathList(out.Applied), "\n", ", "), out.Dir, rc.Name)
	}
	for _, s := range out.Here.Refused {
		fmt.Fprintf(&b, " Refused %s: %s.", projects.Shown(s.Path), projects.Shown(s.Reason))
	}
	for _, s := range out.Here.Conflict {
		fmt.Fprintf(&b, " Not written, %s: %s (check Force to write it anyway).", projects.Shown(s.Path), projects.Shown(s.Reason))
	}
	if len(out.Here.Done) == 0 {
		fmt.Fprintf(&b, " Nothing was written into %s and nothing applied on %s.", out.Dir, rc.Name)
	}
	if out.Far != nil {
		for _, s := range out.Far.Refused {
			fmt.Fprintf(&b, " Refused on %s, %s: %s.", rc.Name, projects.Shown(s.Path), projects.Shown(s.Reason))
		}
		for _, s := range append(slices.Clone(out.Far.Conflict), out.Far.Changed...) {
			fmt.Fprintf(&b, " Not applied on %s, %s: %s.", rc.Name, projects.Shown(s.Path), projects.Shown(s.Reason))
		}
	}
	for _, d := range out.Unasked {
		fmt.Fprintf(&b, " Refused %s: %s says it applied it, but it was not asked to; not written here.", projects.Shown(d), rc.Name)
	}
	if len(out.Pending) > 0 {
		fmt.Fprintf(&b, " Written here but still listed as changes on %s: %s; apply them again.", rc.Name, strings.ReplaceAll(pathList(out.Pending), "\n", ", "))
	}
	if err != nil {
		fmt.Fprintf(&b, " Failed: %v", err)
	}
	return strings.TrimSpace(b.String())
}

// resultText says what Apply or Discard did, and what it refused.
func applyResultText(r *projects.Result, err error, discard bool) string {
	verb := "Applied"
	if discard {
		verb = "Discarded"
	}
	var b strings.Builder
	if r != nil {
		if r.Checkpoint != "" {
			fmt.Fprintf(&b, "Saved the sandbox first as checkpoint %s. ", r.Checkpoint)
		}
		if len(r.Done) > 0 {
			fmt.Fprintf(&b, "%s: %s.", verb, strings.ReplaceAll(pathList(r.Done), "\n", ", "))
		}
		for _, s := range r.Refused {
			fmt.Fprintf(&b, " Refused %s: %s.", projects.Shown(s.Path), s.Reason)
		}
		for _, s := range r.Conflict {
			fmt.Fprintf(&b, " Not written, %s: %s (check Force to write it anyway).", projects.Shown(s.Path), s.Reason)
		}
		for _, s := range r.Changed {
			fmt.Fprintf(&b, " Not written, %s: %s.", projects.Shown(s.Path), s.Reason)
		}
	}
	if err != nil {
		fmt.Fprintf(&b, " Failed: %v", err)
	}
	return strings.TrimSpace(b.String())
}

func (v *changesView) content() fyne.CanvasObject {
	bar := container.NewHBox(v.Agent, v.Project, v.Refresh)
	actions := container.NewHBox(v.All, v.Apply, v.Discard)
	top := container.NewVBox(bar, v.Status, v.Result)
	bottom := container.NewVBox(v.Force, actions)
	split := container.NewVSplit(container.NewVScroll(v.rows), container.NewScroll(v.Diff))
	split.Offset = 0.5
	return container.NewBorder(top, bottom, nil, nil, split)
}
