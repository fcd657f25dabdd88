package ui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/internal/filewatch"
	"github.com/osaurus/osaurus-sandbox/projects"
	"github.com/osaurus/osaurus-sandbox/remotes"
)

// workTabs are the tabs of issue 22's workflow: the user's projects, the
// agents' changes to them, and the ports agents expose. Like the CLI's
// project, changes, apply and discard, the first two work on the data
// folder's files (package projects); closing a port goes to the owner.
// In the window of a remote context all three are the far side's, read
// and changed through its owner (its files can't be watched from here:
// they are asked again every farPoll).
type workTabs struct {
	Projects *projectsTab
	Changes  *changesView
	Ports    *portsTab
	// rc is the remote context whose tabs these are (nil: this machine's).
	rc *remotes.Context
	// shown is what the tabs last read (signature); follow updates
	// them only when it changes, not on every agent edit.
	shown string
	// poll is how often a remote context's are asked again (farPoll).
	poll time.Duration
}

func newWorkTabs(a fyne.App, b Backend, reg *agents.Registry, win fyne.Window, do func(func())) *workTabs {
	var p config.Paths
	if ph, ok := b.(interface{ Paths() config.Paths }); ok {
		p = ph.Paths()
	}
	t := &workTabs{}
	if rc, ok := remoteOf(b); ok {
		t.rc, t.poll = &rc, farPoll
		t.Changes = newChangesView(p, reg, win, do)
		t.Changes.remote = &rc
		t.Changes.ops = opsOf(b)
		// Force is about the folder here, which apply writes first.
		t.Changes.Force.Text = "Also write files changed in your folder here since the upload"
		var forward func(int) (int, error)
		if f, ok := b.(interface{ Forward(int) (int, error) }); ok {
			forward = f.Forward
		}
		t.Ports = newFarPortsTab(rc, farOf(b), forward, a.OpenURL, win, do)
		far := &farProjects{ctl: farOf(b), rc: rc}
		if l, ok := b.(interface{ Links() remotes.Links }); ok {
			far.links = l.Links()
			t.Changes.links = far.links
		}
		t.Projects = newProjectsTab(p, reg, t.Changes.refreshChoices, far, do)
		return t
	}
	t.Changes = newChangesView(p, reg, win, do)
	t.Changes.ops = opsOf(b)
	t.Projects = newProjectsTab(p, reg, t.Changes.refreshChoices, nil, do)
	t.Projects.ops = opsOf(b)
	t.Ports = newPortsTab(a, b, p, win, do)
	list, err := readPreviews(t.Ports.file)
	t.shown = t.signature(list, err)
	return t
}

// signature sums up what the tabs show: the project list, who is granted
// what, and the previews.
func (t *workTabs) signature(previews []preview, err error) string {
	var b strings.Builder
	pl, perr := projects.Load(t.Projects.paths.ProjectsJSON())
	fmt.Fprintf(&b, "%v %v\n%v %v\n", pl, perr, previews, err)
	if t.Projects.reg != nil {
		// Only grants: an agent without projects shows in neither tab.
		for _, a := range t.Projects.reg.List() {
			if len(a.Projects) > 0 {
				fmt.Fprintf(&b, "%s:%v\n", a.Slug, a.Projects)
			}
		}
	}
	return b.String()
}

func (t *workTabs) items() []*container.TabItem {
	if rc := t.rc; rc != nil {
		return []*container.TabItem{
			container.NewTabItem("Projects", t.Projects.content()),
			container.NewTabItem("Changes", t.Changes.content()),
			container.NewTabItem("Ports", t.Ports.content()),
		}
	}
	return []*container.TabItem{
		container.NewTabItem("Projects", t.Projects.content()),
		container.NewTabItem("Changes", t.Changes.content()),
		container.NewTabItem("Ports", t.Ports.content()),
	}
}

// follow keeps the lists current until ctx ends: the project list (any
// process may add one), the agents' grants and the owner's previews.
func (t *workTabs) follow(ctx context.Context) {
	if t.rc != nil {
		go t.Changes.followGrants(ctx)
		t.followFar(ctx)
		return
	}
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	if t.Projects.reg != nil {
		// The registry calls back on the goroutine that changed it,
		// maybe the UI's: only poke here.
		defer t.Projects.reg.Subscribe(poke)()
	}
	w := filewatch.Watch(ctx, time.Second, filewatch.File(t.Projects.paths.ProjectsJSON()), filewatch.File(t.Ports.file))
	defer w.Close()
	// Read first: a change made after the tabs were built but before the
	// watch was set sends no signal.
	for {
		list, err := readPreviews(t.Ports.file)
		if sig := t.signature(list, err); sig != t.shown {
			t.shown = sig
			t.Changes.do(func() { t.Projects.reload(); t.Ports.show(list, err) })
		}
		select {
		case <-ctx.Done():
			return
		case <-w.C():
		case <-wake:
		}
	}
}

// followFar reads a remote context's projects (with its agents, the
// registry's mirror) and previews every poll until ctx ends (the far
// side's files can't be watched from here), and updates the tabs when
// they changed.
func (t *workTabs) followFar(ctx context.Context) {
	for {
		cctx, cancel := context.WithTimeout(ctx, farCall)
		list, err := t.Ports.src.previews(cctx)
		pl, perr := t.Projects.far.ctl.ListProjects(cctx)
		if t.Projects.reg != nil {
			t.Projects.reg.Reload() // grants: it calls back only on a change
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%v %v\n%v %v\n", pl, perr, list, err)
		if t.Projects.reg != nil {
			for _, a := range t.Projects.reg.List() {
				if len(a.Projects) > 0 {
					fmt.Fprintf(&b, "%s:%v\n", a.Slug, a.Projects)
				}
			}
		}
		if sig := b.String(); sig != t.shown {
			t.shown = sig
			t.Changes.do(func() { t.Ports.show(list, err); t.Projects.show(pl, perr) })
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(t.poll):
		}
	}
}

// projectsTab lists the user's projects: add one by its folder's path,
// remove one no agent is granted. Granting stays in `agent set`. A
// remote context's are the far side's (far): Add uploads a folder of this
// machine there, as `project add` through the context does.
type projectsTab struct {
	paths   config.Paths
	reg     *agents.Registry // read only
	ops     AgentOps         // the owner's: it writes projects.json
	changed func()           // the list changed: the Changes view's choices follow
	far     *farProjects     // nil: this machine's projects.json
	do      func(func())     // UI updates from other goroutines (a remote context's)

	Path, Name  *widget.Entry
	Add, Remove *widget.Button
	List        *widget.List
	Status      *widget.Label

	list     []projects.Project
	granted  map[string][]string // project → agents' slugs
	selected int
}

// newProjectsTab is the Projects tab of this machine's data folder p, or
// (far set) of a remote context.
func newProjectsTab(p config.Paths, reg *agents.Registry, changed func(), far *farProjects, do func(func())) *projectsTab {
	t := &projectsTab{paths: p, reg: reg, changed: changed, selected: -1, far: far, do: do}
	t.Path, t.Name = widget.NewEntry(), widget.NewEntry()
	t.Path.SetPlaceHolder("/path/to/your/folder")
	t.Name.SetPlaceHolder("name (default: the folder's name)")
	t.Add = widget.NewButton("Add project", t.onAdd)
	if far != nil {
		t.Path.SetPlaceHolder("/path/to/a/folder/on/this/computer")
		t.Add.SetText("Upload project")
	}
	t.Remove = widget.NewButton("Remove", t.onRemove)
	t.Remove.Disable()
	t.Status = wrapped("")
	t.List = widget.NewList(
		func() int { return len(t.list) },
		func() fyne.CanvasObject { return widget.NewLabel("") },
		func(i widget.ListItemID, o fyne.CanvasObject) { o.(*widget.Label).SetText(t.row(i)) })
	t.List.OnSelected = func(i widget.ListItemID) { t.selected = i; t.Remove.Enable() }
	t.List.OnUnselected = func(widget.ListItemID) { t.selected = -1; t.Remove.Disable() }
	t.reload()
	return t
}

func (t *projectsTab) row(i int) string {
	if i < 0 || i >= len(t.list) {
		return ""
	}
	p := t.list[i]
	who := "no agent yet"
	if g := t.granted[p.Name]; len(g) > 0 {
		who = "agents: " + strings.Join(g, ", ")
	}
	where := p.Path
	if t.far != nil {
		where += " on " + t.far.rc.Name
	}
	if p.UploadedFrom != "" {
		where = "uploaded from " + p.UploadedFrom + ", a copy at " + where
	}
	return fmt.Sprintf("%s — %s (%s)", p.Name, where, who)
}

// farProjects are a remote context's projects, asked of its owner, and
// this machine's record of the folders uploaded to it.
type farProjects struct {
	ctl   api.Controller
	rc    remotes.Context
	links remotes.Links
}

// reload reads the project list and who is granted what: this machine's
// at once, a remote context's off the UI goroutine. Call on the UI
// goroutine.
func (t *projectsTab) reload() {
	if t.far == nil {
		list, err := projects.Load(t.paths.ProjectsJSON())
		t.show(list, err)
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), farCall)
		defer cancel()
		list, err := t.far.ctl.ListProjects(ctx)
		if t.reg != nil {
			t.reg.Reload()
		}
		t.do(func() { t.show(list, err) })
	}()
}

// show shows list (err: why it can't be read) with who is granted what.
// Call on the UI goroutine.
func (t *projectsTab) show(list []projects.Project, err error) {
	if err != nil {
		t.Status.SetText("The project list can't be read: " + err.Error())
	}
	t.list = list
	t.granted = map[string][]string{}
	if t.reg != nil {
		for _, a := range t.reg.List() {
			for _, n := range a.Projects {
				t.granted[n] = append(t.granted[n], a.Slug)
			}
		}
	}
	// A refresh keeps the user's selection while it still names a project.
	if t.selected >= len(t.list) {
		t.List.UnselectAll()
	}
	t.List.Refresh()
	if t.changed != nil {
		t.changed()
	}
}

func (t *projectsTab) onAdd() {
	dir := strings.TrimSpace(t.Path.Text)
	if dir == "" {
		t.Status.SetText("Path: type the folder to add, e.g. /home/you/src/webapp.")
		return
	}
	if t.far != nil {
		t.upload(dir)
		return
	}
	if t.ops == nil {
		t.Status.SetText("Not added: " + errNoOps.Error())
		return
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	p, err := t.ops.AddProject(context.Background(), control.ProjectAddRequest{Path: dir, Name: strings.TrimSpace(t.Name.Text)})
	if err != nil {
		t.Status.SetText("Not added: " + err.Error())
		return
	}
	t.Path.SetText("")
	t.Name.SetText("")
	t.reload()
	t.Status.SetText(fmt.Sprintf("Added %s. Grant it to an agent with `osaurus-sandbox agent set AGENT projects %s`; the agent sees its own view at %s.",
		p.Name, p.Name, projects.GuestDir(p.Name)))
}

// farUpload bounds the upload of a folder to a remote context.
const farUpload = 30 * time.Minute

// upload sends dir, a folder of this machine, to a remote context's
// owner as a project (remotes.UploadProject, as `project add` through
// the context does), off the UI goroutine. Call on the UI goroutine.
func (t *projectsTab) upload(dir string) {
	if !filepath.IsAbs(dir) {
		// The window's working folder means nothing to the user.
		t.Status.SetText("Path: type the folder's full path, e.g. /home/you/src/webapp.")
		return
	}
	name := strings.TrimSpace(t.Name.Text)
	rc := t.far.rc
	t.Add.Disable()
	t.Status.SetText(fmt.Sprintf("Uploading %s to %s…", dir, rc.Name))
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), farUpload)
		defer cancel()
		p, stats, err := remotes.UploadProject(ctx, t.far.ctl, rc, t.far.links, dir, name)
		t.do(func() {
			t.Add.Enable()
			if p.Name == "" && err != nil {
				t.Status.SetText("Not added: " + err.Error())
				return
			}
			t.Path.SetText("")
			t.Name.SetText("")
			t.reload()
			msg := fmt.Sprintf("Added %s on %s: a copy of %s (%d files, %d bytes); your folder stays here, and `osaurus-sandbox --context %s apply AGENT %s` writes reviewed changes into it. "+
				"Grant it to an agent with `osaurus-sandbox --context %s agent set AGENT projects %s`; the agent sees its own view at %s.",
				p.Name, rc.Name, dir, stats.Files, stats.Bytes, rc.Name, p.Name, rc.Name, p.Name, projects.GuestDir(p.Name))
			if len(stats.Skipped) > 0 {
				msg += fmt.Sprintf(" Left out %d links or special files.", len(stats.Skipped))
			}
			if err != nil {
				msg += " " + err.Error()
			}
			t.Status.SetText(msg)
		})
	}()
}

func (t *projectsTab) onRemove() {
	if t.selected < 0 || t.selected >= len(t.list) {
		return
	}
	p := t.list[t.selected]
	if t.far != nil {
		t.removeFar(p)
		return
	}
	if t.ops == nil {
		t.Status.SetText("Not removed: " + errNoOps.Error())
		return
	}
	if err := t.ops.RemoveProject(context.Background(), p.Name); err != nil {
		t.Status.SetText("Not removed: " + err.Error())
		return
	}
	t.reload()
	t.Status.SetText("Removed " + p.Name + " (your folder is untouched).")
}

// removeFar has a remote context's owner forget p (and delete its copy
// there when it was uploaded), then forgets which folder here it came
// from, as `project remove` through the context does. Call on the UI
// goroutine.
func (t *projectsTab) removeFar(p projects.Project) {
	rc := t.far.rc
	t.Remove.Disable()
	t.Status.SetText("Removing " + p.Name + " from " + rc.Name + "…")
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), farCall)
		defer cancel()
		err := t.far.ctl.RemoveProject(ctx, p.Name)
		if err == nil {
			err = t.far.links.Set(rc, p.Name, "")
		}
		t.do(func() {
			if t.selected >= 0 {
				t.Remove.Enable()
			}
			if err != nil {
				t.Status.SetText("Not removed: " + err.Error())
				return
			}
			t.List.UnselectAll()
			t.reload()
			t.Status.SetText("Removed " + p.Name + " from " + rc.Name + " (your folder is untouched).")
		})
	}()
}

func (t *projectsTab) content() fyne.CanvasObject {
	form := container.NewBorder(nil, nil, nil, t.Add, container.NewGridWithColumns(2, t.Path, t.Name))
	intro := "A project is a folder of yours. Each agent granted it works on a view of its own; nothing reaches your folder until you apply it in Changes."
	if rc := t.far; rc != nil {
		intro = fmt.Sprintf("The projects of %[1]s: folders there, or copies of folders of this computer uploaded to it (Upload project). Each agent granted one works on a view of its own there; "+
			"`osaurus-sandbox --context %[1]s apply AGENT PROJECT` writes reviewed changes into the folder here an upload came from.", rc.rc.Name)
	}
	top := container.NewVBox(wrapped(intro), form, t.Status)
	return container.NewBorder(top, t.Remove, nil, nil, t.List)
}

// resolveGrant finds the agent and project of a Changes view, as the
// CLI's changes, apply and discard do: the agent must hold a view of it.
func resolveGrant(p config.Paths, reg *agents.Registry, agent, project string) (agents.Agent, projects.Project, error) {
	if reg == nil {
		return agents.Agent{}, projects.Project{}, errors.New("no agent registry")
	}
	a, err := reg.Get(agent)
	if err != nil {
		return agents.Agent{}, projects.Project{}, err
	}
	pr, err := projects.Get(p.ProjectsJSON(), project)
	if err != nil {
		return agents.Agent{}, projects.Project{}, err
	}
	if !slices.Contains(a.Projects, pr.Name) && !(projects.Views{Paths: p}).Has(a, pr.Name) {
		return agents.Agent{}, projects.Project{}, fmt.Errorf("%w: %s has not been granted %q", projects.ErrNotGranted, a.Name, pr.Name)
	}
	return a, pr, nil
}
