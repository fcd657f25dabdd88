package ui

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/internal/testssh"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/projects"
	"github.com/osaurus/osaurus-sandbox/remotes"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// farWindow is the window of a remote context "box" whose far side is a
// real owner of its own data folder, reached by the real dial-stdio
// through a stand-in ssh (farBox), as the app reaches one.
type farWindow struct {
	far    config.Paths   // the far side's data folder
	farCtl api.Controller // its owner, in this process
	local  config.Paths   // this machine's data folder: decoys the window must never show
	cwd    string         // the window's working folder: nothing may be written there
	w      *Window
	sess   *Session
}

// openFarWindow builds the window of box. This machine's data folder
// (OSAURUS_SANDBOX_HOME) holds a task and a console log of its own; check
// says the window never showed them and wrote nothing here.
// set changes one of the far side's settings as another writer there
// would (`config set` on that machine).
func (f *farWindow) set(t *testing.T, key, val string) {
	t.Helper()
	ctx := context.Background()
	cur, err := f.farCtl.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next, err := cur.Settings.Set(key, val)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.farCtl.SaveSettings(ctx, api.SettingsSave{Settings: next, IfRevision: cur.Revision}); err != nil {
		t.Fatal(err)
	}
}

func openFarWindow(t *testing.T) *farWindow {
	t.Helper()
	old := farPoll
	farPoll = 50 * time.Millisecond
	t.Cleanup(func() { farPoll = old })
	f := &farWindow{far: config.Paths{Root: shortDir(t, "far")}, local: config.Paths{Root: t.TempDir()}}
	t.Setenv(config.HomeEnv, f.local.Root)
	// A relative path (the empty data folder of a remote backend) would
	// land here.
	f.cwd = t.TempDir()
	t.Chdir(f.cwd)
	decoy := runner.Task{ID: "fedcba9876543210", Agent: "alice", Task: "LOCAL TASK", Source: "cli", State: runner.Done,
		Created: time.Now(), Updated: time.Now()}
	if err := (&runner.Store{Dir: f.local.TasksDir()}).Save(decoy); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(f.local.ConsoleLog()), 0o755)
	if err := os.WriteFile(f.local.ConsoleLog(), []byte("LOCAL CONSOLE LINE\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	st, _, _ := farBox(t, f.far.Root)
	var err error
	if f.farCtl, err = host.OpenData(context.Background(), f.far, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.farCtl.Close)
	addAgent(t, f.farCtl, "alice")
	rc, err := st.Get("box")
	if err != nil {
		t.Fatal(err)
	}
	sess, err := OpenRemote(context.Background(), rc, f.local)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sess.Close)
	f.sess = sess
	a := test.NewTempApp(t)
	lockedDo(func() {
		f.w = newWindowIn(a.NewWindow(""), a, sess.Backend, sess.Registry, lockedDo, nil)
		f.w.Win.Resize(fyne.NewSize(900, 760))
	})
	t.Cleanup(f.w.Close) // before the session closes
	// The settings forms' first reads: a Reload tapped while one is under
	// way does nothing (its button is disabled), and the read may answer
	// with the far settings as they were before a test changed them.
	eventually(t, "the far settings' first read", func() bool {
		return !f.w.Container.Reload.Disabled() && !f.w.Tasks.Reload.Disabled()
	})
	return f
}

// check fails the test when the window showed this machine's data or
// wrote into the working folder.
func (f *farWindow) check(t *testing.T) {
	t.Helper()
	lockedDo(func() {
		for _, tk := range f.w.Tasks.tasks {
			if tk.Task == "LOCAL TASK" {
				t.Error("the Tasks tab of box lists this machine's task")
			}
		}
		if strings.Contains(f.w.Container.Console.Text, "LOCAL") {
			t.Error("the console of box shows this machine's log")
		}
	})
	if ents, _ := os.ReadDir(f.cwd); len(ents) > 0 {
		t.Errorf("the window of box wrote %s into its working folder", ents[0].Name())
	}
}

// The Tasks tab of a remote context lists the far side's tasks, shows
// their steps as they arrive, and Cancel asks the far side's owner.
func TestRemoteTasksTab(t *testing.T) {
	f := openFarWindow(t)
	store := &runner.Store{Dir: f.far.TasksDir()}
	now := time.Now()
	task := runner.Task{ID: "0123456789abcdef", Agent: "alice", Task: "create hello.py", Source: "dispatch", State: runner.Running,
		Created: now, Updated: now, PID: os.Getpid(), Steps: []runner.Step{{N: 1, Content: "writing it"}}}
	if err := store.Save(task); err != nil {
		t.Fatal(err)
	}
	tt := f.w.Tasks
	eventually(t, "the far side's task", func() bool { return len(tt.tasks) == 1 })
	lockedDo(func() {
		tt.List.Select(0)
		if !strings.Contains(tt.Detail.Text, "step 1: writing it") || tt.Cancel.Disabled() {
			t.Errorf("detail %q, cancel disabled %v", tt.Detail.Text, tt.Cancel.Disabled())
		}
	})
	tap(tt.Cancel)
	eventually(t, "the far side's cancel request", func() bool {
		_, err := os.Stat(filepath.Join(f.far.TasksDir(), task.ID+".cancel"))
		return err == nil
	})
	// The far runner stops it: the tab shows the answer.
	task.Steps = append(task.Steps, runner.Step{N: 2, Content: "stopped"})
	task.State, task.Answer, task.Updated = runner.Cancelled, "Stopped early.", now.Add(time.Second)
	if err := store.Save(task); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the task to finish", func() bool { return strings.Contains(tt.Detail.Text, "step 2: stopped") })
	lockedDo(func() {
		if !tt.Cancel.Disabled() {
			t.Error("Cancel enabled for a finished task")
		}
	})
	f.check(t)
}

// The Container tab of a remote context shows the far side's console log
// as it grows, streamed by its owner.
func TestRemoteConsoleLog(t *testing.T) {
	f := openFarWindow(t)
	lockedDo(func() {
		if s := f.w.Container.Console.Text; !strings.Contains(s, "once its VM has booted") {
			t.Errorf("console before a boot: %q", s)
		}
	})
	path := f.far.ConsoleLog()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("[    0.000000] Linux version 6.1 (far)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the far side's first line", func() bool {
		return strings.Contains(f.w.Container.Console.Text, "Linux version 6.1 (far)")
	})
	lf, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	lf.WriteString("far login: ready\n")
	lf.Close()
	eventually(t, "the line written next", func() bool {
		s := f.w.Container.Console.Text
		return strings.Contains(s, "Linux version 6.1 (far)\nfar login: ready")
	})
	f.check(t)
}

// A long console stream shows its end, from a line's start.
func TestStreamConsoleKeepsTheEnd(t *testing.T) {
	test.NewTempApp(t)
	var c *containerTab
	lockedDo(func() { c = &containerTab{Console: widget.NewMultiLineEntry(), do: lockedDo} })
	pr, pw := io.Pipe()
	go func() {
		for i := range 3000 {
			fmt.Fprintf(pw, "line %04d\n", i)
		}
		pw.Close()
	}()
	c.streamConsole(context.Background(), pr)
	lockedDo(func() {
		s := c.Console.Text
		if len(s) > consoleKeep || !strings.HasPrefix(s, "line ") || !strings.HasSuffix(s, "line 2999\n") {
			t.Errorf("console shows %d bytes: %.20q … %q", len(s), s, s[max(0, len(s)-20):])
		}
	})
}

// The Changes tab of a remote context lists the far side's agents'
// projects and their changes, and Discard throws a change away there;
// Apply writes nothing for a project that was not uploaded from this
// machine (here, a folder of the far machine): there is no folder here
// to write into.
func TestRemoteChangesTab(t *testing.T) {
	f := openFarWindow(t)
	ctx := context.Background()
	// A folder of the far machine, granted to alice there.
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.txt"), "line 1\nline 2\n")
	writeFile(t, filepath.Join(dir, "b.txt"), "b\n")
	if _, err := f.farCtl.AddProject(ctx, control.ProjectAddRequest{Path: dir, Name: "web"}); err != nil {
		t.Fatal(err)
	}
	a, err := f.farCtl.SetAgentProjects(ctx, control.AgentProjectsRequest{Agent: "alice", Projects: []string{"web"}})
	if err != nil {
		t.Fatal(err)
	}
	view := projects.Views{Paths: f.far}.Dir(a, "web")
	writeFile(t, filepath.Join(view, "a.txt"), "line 1\nline 2 by alice\n")
	writeFile(t, filepath.Join(view, "b.txt"), "b by alice\n")

	v := f.w.Work.Changes
	tap(v.Refresh) // the far side's grants, asked again
	eventually(t, "alice offered", func() bool { return slices.Contains(v.Agent.Options, "alice") })
	lockedDo(func() { v.Agent.SetSelected("alice"); v.Project.SetSelected("web") })
	waitListed(t, v, "a.txt", "b.txt")
	tap(rowFor(t, v, "a.txt").Show)
	lockedDo(func() {
		if !strings.Contains(v.Diff.Text, "+line 2 by alice") {
			t.Errorf("a.txt diff:\n%s", v.Diff.Text)
		}
	})

	// No record of web's folder here: nothing is written anywhere.
	tap(rowFor(t, v, "a.txt").Pick)
	tap(v.Apply)
	lockedDo(func() {
		if s := v.Result.Text; !strings.Contains(s, "Nothing written: project web of box was not uploaded from this computer") {
			t.Errorf("Apply in the window of box: %q", s)
		}
		if top := f.w.Win.Canvas().Overlays().Top(); top != nil {
			t.Error("Apply asked to confirm a write it can't do")
		}
	})
	if got := readFile(t, filepath.Join(dir, "a.txt")); got != "line 1\nline 2\n" {
		t.Fatalf("Apply wrote a.txt: %q", got)
	}
	if ents, _ := os.ReadDir(f.local.Root); slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.Name() == "web" }) {
		t.Error("Apply wrote a folder web here")
	}

	// Discard throws b.txt's change away in the far side's view.
	tap(rowFor(t, v, "a.txt").Pick) // unchecked: a.txt stays
	tap(rowFor(t, v, "b.txt").Pick)
	tap(v.Discard)
	tapInOverlay(t, f.w.Win, "Yes")
	waitListed(t, v, "a.txt")
	if got := readFile(t, filepath.Join(view, "b.txt")); got != "b\n" {
		t.Fatalf("discarded b.txt in the far view: %q", got)
	}
	lockedDo(func() {
		if !strings.Contains(v.Result.Text, "Discarded: b.txt") {
			t.Errorf("result %q", v.Result.Text)
		}
	})
	f.check(t)
}

// servesOther is a far owner that serves content other than the
// reviewed one for every changed file.
type servesOther struct{ AgentOps }

func (servesOther) OpenProjectFile(context.Context, control.ProjectFileRequest) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader("not what was reviewed\n")), nil
}

// Apply in the Changes tab of a remote context writes a project uploaded
// from this machine into its folder here, after asking (naming that
// folder), and then the far side applies it to its copy: the change is
// no longer listed there. A far side that serves content other than the
// review has nothing written here and nothing applied there, and the tab
// says so.
func TestRemoteChangesApply(t *testing.T) {
	f := openFarWindow(t)
	ctx := context.Background()
	v := f.w.Work.Changes
	var rc remotes.Context
	lockedDo(func() { rc = *v.remote })
	here := t.TempDir()
	writeFile(t, filepath.Join(here, "a.txt"), "a\n")
	writeFile(t, filepath.Join(here, "b.txt"), "b\n")
	links := remotes.Links{Path: remotes.LinksPath(f.local.ConfigDir())}
	p, _, err := remotes.UploadProject(ctx, f.farCtl, rc, links, here, "app")
	if err != nil {
		t.Fatal(err)
	}
	here, _ = filepath.EvalSymlinks(here) // as recorded
	a, err := f.farCtl.SetAgentProjects(ctx, control.AgentProjectsRequest{Agent: "alice", Projects: []string{"app"}})
	if err != nil {
		t.Fatal(err)
	}
	view := projects.Views{Paths: f.far}.Dir(a, "app")
	writeFile(t, filepath.Join(view, "a.txt"), "a by alice\n")
	writeFile(t, filepath.Join(view, "b.txt"), "b by alice\n")
	copyDir := func() string {
		got, err := projects.Get(f.far.ProjectsJSON(), p.Name)
		if err != nil {
			t.Fatal(err)
		}
		return got.Path
	}()

	tap(v.Refresh)
	eventually(t, "alice offered", func() bool { return slices.Contains(v.Agent.Options, "alice") })
	lockedDo(func() { v.Agent.SetSelected("alice"); v.Project.SetSelected("app") })
	waitListed(t, v, "a.txt", "b.txt")

	// a.txt: asked, naming this machine's folder; written here, applied
	// there.
	tap(rowFor(t, v, "a.txt").Pick)
	tap(v.Apply)
	lockedDo(func() {
		if !overlayHas(f.w.Win, here+", your folder on this computer") {
			t.Error("the confirmation does not name the folder here")
		}
	})
	tapInOverlay(t, f.w.Win, "Yes")
	waitListed(t, v, "b.txt")
	lockedDo(func() {
		if s := v.Result.Text; !strings.Contains(s, "Applied: a.txt (written into "+here+" and applied on box)") {
			t.Errorf("result %q", s)
		}
	})
	if got := readFile(t, filepath.Join(here, "a.txt")); got != "a by alice\n" {
		t.Fatalf("a.txt here: %q", got)
	}
	if got := readFile(t, filepath.Join(copyDir, "a.txt")); got != "a by alice\n" {
		t.Fatalf("a.txt in the far copy: %q", got)
	}

	// b.txt from a far side that serves other content than the review.
	lockedDo(func() { v.ops = servesOther{v.ops} })
	tap(rowFor(t, v, "b.txt").Pick)
	tap(v.Apply)
	tapInOverlay(t, f.w.Win, "Yes")
	eventually(t, "the refusal", func() bool { return v.busy == 0 && strings.Contains(v.Result.Text, "Refused b.txt") })
	waitListed(t, v, "b.txt")
	lockedDo(func() {
		if s := v.Result.Text; !strings.Contains(s, "Nothing was written into "+here+" and nothing applied on box") || strings.Contains(s, "Applied") {
			t.Errorf("result %q", s)
		}
	})
	if got := readFile(t, filepath.Join(here, "b.txt")); got != "b\n" {
		t.Fatalf("b.txt here: %q", got)
	}
	if got := readFile(t, filepath.Join(copyDir, "b.txt")); got != "b\n" {
		t.Fatalf("b.txt in the far copy: %q", got)
	}
	cs, err := f.farCtl.ViewChanges(ctx, api.ViewRequest{Agent: a.ID, Project: "app"})
	if err != nil || len(cs.Changes) != 1 || cs.Changes[0].Path != "b.txt" {
		t.Fatalf("the far side's changes after: %+v %v", cs, err)
	}

	// The agent changes b.txt again after the list was shown: nothing is
	// written on either side, and the new review is shown.
	lockedDo(func() { v.ops = v.ops.(servesOther).AgentOps })
	writeFile(t, filepath.Join(view, "b.txt"), "b by alice, again\n")
	tap(rowFor(t, v, "b.txt").Pick)
	tap(v.Apply)
	tapInOverlay(t, f.w.Win, "Yes")
	eventually(t, "the stale review refused", func() bool {
		return v.busy == 0 && strings.Contains(v.Result.Text, "alice changed app since this review was shown")
	})
	if got := readFile(t, filepath.Join(here, "b.txt")); got != "b\n" {
		t.Fatalf("b.txt here after a stale apply: %q", got)
	}
	if got := readFile(t, filepath.Join(copyDir, "b.txt")); got != "b\n" {
		t.Fatalf("b.txt in the far copy after a stale apply: %q", got)
	}
	f.check(t)
}

// The Plugins tab of a remote context lists the far side's library and
// who installed what there, and Save, Duplicate and Remove change that
// library through its owner; this machine's library is never shown.
func TestRemotePluginsTab(t *testing.T) {
	f := openFarWindow(t)
	ctx := context.Background()
	mine, err := plugins.OpenLibrary(f.local.PluginsDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := mine.Save(ctx, recipe(t, notesJSON), plugins.Origin{Kind: plugins.OriginEditor}); err != nil {
		t.Fatal(err)
	}
	hello, err := recipe(t, helloJSON).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.farCtl.SavePlugin(ctx, api.PluginSaveRequest{Recipe: hello, Origin: plugins.Origin{Kind: plugins.OriginURL, Location: "https://plugins.example.org/hello.json"}}); err != nil {
		t.Fatal(err)
	}
	alice, err := f.farCtl.GetAgent(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := plugins.NewInstalled(f.far.AgentStateDir()).Record(ctx, alice.ID, recipe(t, helloJSON), 1); err != nil {
		t.Fatal(err)
	}
	farIDs := func() []string {
		l, err := f.farCtl.PluginLibrary(ctx, control.PluginLibraryRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range l.Plugins {
			ids = append(ids, e.ID)
		}
		return ids
	}

	pt := f.w.Plugins
	eventually(t, "the far side's plugin, installed for alice", func() bool {
		return len(pt.entries) == 1 && pt.entries[0].ID == "hello-tools" && slices.Equal(pt.installedFor["hello-tools"], []string{"alice"})
	})
	lockedDo(func() {
		if len(pt.farAllow) == 0 {
			t.Error("no setup allowlist from the far side's owner")
		}
		pt.List.Select(0)
		if !strings.Contains(pt.Detail.Text, "Installed for: alice") {
			t.Errorf("detail %q", pt.Detail.Text)
		}
	})

	// Save: a new version in the far side's library.
	lockedDo(func() {
		pt.Editor.SetText(strings.Replace(pt.Editor.Text, "Says hello", "Says hello from afar", 1))
	})
	tap(pt.Save)
	eventually(t, "version 2 saved there", func() bool { return strings.Contains(pt.Status.Text, "Saved hello-tools as library version 2") })
	l, err := f.farCtl.PluginLibrary(ctx, control.PluginLibraryRequest{Plugin: "hello-tools"})
	if err != nil || len(l.Plugins) != 1 || l.Plugins[0].Current().Recipe.Description != "Says hello from afar" {
		t.Fatalf("far library after Save: %+v %v", l.Plugins, err)
	}

	// Duplicate, then Remove the copy.
	tap(pt.Duplicate)
	eventually(t, "the copy", func() bool { return strings.Contains(pt.Status.Text, "Duplicated hello-tools as") })
	if ids := farIDs(); len(ids) != 2 {
		t.Fatalf("far library after Duplicate: %v", ids)
	}
	var copyID string
	lockedDo(func() { copyID = pt.selected })
	if copyID == "hello-tools" || copyID == "" {
		t.Fatalf("selected after Duplicate: %q", copyID)
	}
	tap(pt.Remove)
	tapInOverlay(t, f.w.Win, "Remove")
	eventually(t, "the copy removed", func() bool { return strings.Contains(pt.Status.Text, "Removed "+copyID) })
	if ids := farIDs(); !slices.Equal(ids, []string{"hello-tools"}) {
		t.Fatalf("far library after Remove: %v", ids)
	}
	eventually(t, "the list without the copy", func() bool { return len(pt.entries) == 1 })
	lockedDo(func() {
		for _, e := range pt.entries {
			if e.ID == "notes" {
				t.Error("the Plugins tab of box lists this machine's plugin")
			}
		}
	})
	if l, _ := mine.List(); len(l) != 1 {
		t.Errorf("this machine's library changed: %d plugins", len(l))
	}
	f.check(t)
}

// The Container tab of a remote context shows the far side's settings
// and saves a change into the far side's sandbox.json, never this
// machine's; a change made there after the form was read is not
// overwritten: the save says so, and Reload shows it.
func TestRemoteSettings(t *testing.T) {
	f := openFarWindow(t)
	// This machine's sandbox.json: a decoy the window must never show.
	mine := config.Defaults()
	mine.CPUs, mine.MemoryGB = 7, 7
	if err := config.SaveSandbox(f.local.SandboxJSON(), mine); err != nil {
		t.Fatal(err)
	}
	localBefore := readFile(t, f.local.SandboxJSON())
	f.set(t, "cpus", "3")
	c := f.w.Container
	tap(c.Reload) // the far side's as they are now
	eventually(t, "the far side's settings", func() bool { return c.CPUs.Selected == "3" && !c.Save.Disabled() })
	lockedDo(func() {
		if c.Memory.Selected == "7" {
			t.Error("the form shows this machine's memory setting")
		}
		c.Memory.SetSelected("5")
	})
	tap(c.Save)
	eventually(t, "saved", func() bool { return c.Saved.Text == "Saved." })
	got, err := config.LoadSandbox(f.far.SandboxJSON())
	if err != nil || got.MemoryGB != 5 || got.CPUs != 3 {
		t.Fatalf("far sandbox.json after Save: cpus %d memory %d (%v)", got.CPUs, got.MemoryGB, err)
	}

	// Another writer there, between the read and the next save.
	f.set(t, "cpus", "2")
	farAfter := readFile(t, f.far.SandboxJSON())
	lockedDo(func() { c.CPUs.SetSelected("4") })
	tap(c.Save)
	eventually(t, "the conflict", func() bool {
		return strings.Contains(c.Saved.Text, "changed on the far side since you opened them") && !c.Save.Disabled()
	})
	if s := readFile(t, f.far.SandboxJSON()); s != farAfter {
		t.Fatalf("a conflicting save changed the far sandbox.json:\n%s\nwant\n%s", s, farAfter)
	}
	tap(c.Reload)
	eventually(t, "the other writer's value", func() bool { return c.CPUs.Selected == "2" && c.Saved.Text == "" })
	lockedDo(func() { c.CPUs.SetSelected("4") })
	tap(c.Save)
	eventually(t, "saved again", func() bool { return c.Saved.Text == "Saved." })
	if got, _ := config.LoadSandbox(f.far.SandboxJSON()); got.CPUs != 4 || got.MemoryGB != 5 {
		t.Fatalf("far sandbox.json after the second Save: cpus %d memory %d", got.CPUs, got.MemoryGB)
	}
	if s := readFile(t, f.local.SandboxJSON()); s != localBefore {
		t.Fatalf("this machine's sandbox.json changed:\n%s", s)
	}
	f.check(t)
}

// The Ports tab of a remote context lists the far side's previews, asked
// of its owner, never this machine's previews file. An owner lists
// previews only while its VM relays them (no test here boots one): this
// checks its empty list and a Close through it; TestFarPortsTab checks
// the rows of a list.
func TestRemotePortsTab(t *testing.T) {
	f := openFarWindow(t)
	writePreviews(t, f.local.PreviewsFile(), []preview{{Agent: "alice", Port: 8000, HostPort: 41001, URL: "http://127.0.0.1:41001/", Since: time.Now()}})
	pt := f.w.Work.Ports
	eventually(t, "the far side's (empty) list", func() bool { return strings.Contains(pt.Status.Text, "No ports exposed on box") })
	lockedDo(func() {
		if len(pt.Rows) != 0 {
			t.Errorf("the Ports tab of box lists %+v", pt.Rows[0].Preview)
		}
		if !strings.Contains(pt.Status.Text, "loopback, not this computer's") || !strings.Contains(pt.Status.Text, "--context box mcp --agent") {
			t.Errorf("status %q", pt.Status.Text)
		}
		pt.Status.SetText("")
		pt.close(preview{Agent: "alice", Port: 8000})
	})
	eventually(t, "the list after Close", func() bool { return strings.Contains(pt.Status.Text, "No ports exposed on box") })
	lockedDo(func() {
		if strings.Contains(pt.Status.Text, "failed") || len(pt.Rows) != 0 {
			t.Errorf("after Close: %q, %d rows", pt.Status.Text, len(pt.Rows))
		}
	})
	tap(pt.Refresh)
	eventually(t, "refreshed", func() bool { return strings.Contains(pt.Status.Text, "No ports exposed on box") })
	f.check(t)
}

// previewsCtl is a far owner with previews open: ClosePorts closes them.
type previewsCtl struct {
	api.Controller
	mu     sync.Mutex
	list   []api.Preview
	closed []api.ClosePortsRequest
}

func (p *previewsCtl) Previews(context.Context) ([]api.Preview, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.list), nil
}

func (p *previewsCtl) ClosePorts(_ context.Context, req api.ClosePortsRequest) (api.ClosePortsResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = append(p.closed, req)
	n := len(p.list)
	p.list = slices.DeleteFunc(p.list, func(v api.Preview) bool { return v.Agent == req.Agent && v.Port == req.Port })
	return api.ClosePortsResult{Closed: n - len(p.list)}, nil
}

// A remote context's previews are listed with the far side's URLs;
// Open forwards one to this machine's loopback over the context's ssh (a
// stand-in, with this machine as the far side) and opens the local URL,
// which reaches the far preview; Close closes it through the far owner;
// closing the forwards leaves no ssh running.
func TestFarPortsTab(t *testing.T) {
	test.NewTempApp(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pids := t.TempDir()
	t.Setenv(testssh.PidsEnv, pids)
	fwd := &remotes.Forwards{CtxName: "box", Argv: func(p int) []string { return []string{self, "standin-ssh-w", "127.0.0.1:" + strconv.Itoa(p)} }}
	t.Cleanup(fwd.CloseAll)
	farPort := testssh.FarPreview(t)
	now := time.Now()
	ctl := &previewsCtl{list: []api.Preview{
		{Agent: "alice", Port: 8000, HostPort: farPort, URL: "http://127.0.0.1:" + strconv.Itoa(farPort) + "/", Since: now},
		{Agent: "bob", Port: 3000, HostPort: 41002, URL: "http://127.0.0.1:41002/", Since: now},
	}}
	var opened []*url.URL
	open := func(u *url.URL) error { opened = append(opened, u); return nil }
	var pt *portsTab
	lockedDo(func() {
		pt = newFarPortsTab(remotes.Context{Name: "box", URL: "ssh://me@box"}, ctl, fwd.Open, open, nil, lockedDo)
		pt.content()
		pt.reload()
	})
	eventually(t, "two rows", func() bool { return len(pt.Rows) == 2 })
	var alice, bob *portRow
	lockedDo(func() {
		alice, bob = pt.Rows[0], pt.Rows[1]
		if s := alice.Label.Text; !strings.Contains(s, fmt.Sprintf("alice  port 8000  →  http://127.0.0.1:%d/ on box", farPort)) {
			t.Errorf("row %q", s)
		}
		if !strings.Contains(pt.Status.Text, "on box's loopback") || !strings.Contains(pt.Status.Text, "Open forwards one") {
			t.Errorf("status %q", pt.Status.Text)
		}
		if alice.Open == nil {
			t.Fatal("no Open on a far preview")
		}
	})
	tap(alice.Open)
	var local *url.URL
	lockedDo(func() {
		if len(opened) != 1 {
			t.Fatalf("opened %v; status %q", opened, pt.Status.Text)
		}
		local = opened[0]
		if local.Hostname() != "127.0.0.1" || !strings.Contains(pt.Status.Text, fmt.Sprintf("forwarded over SSH from box's 127.0.0.1:%d", farPort)) {
			t.Errorf("opened %s, status %q", local, pt.Status.Text)
		}
	})
	c := testssh.NoRedirects()
	defer c.CloseIdleConnections()
	if code, body, _ := testssh.Get(t, c, local.String(), ""); code != 200 || body != "hello from the far preview, /" {
		t.Fatalf("GET %s: %d %q", local, code, body)
	}
	if len(testssh.Alive(pids)) == 0 {
		t.Fatal("no ssh carried the request")
	}
	tap(alice.Open) // again: the same forward
	lockedDo(func() {
		if len(opened) != 2 || opened[1].String() != local.String() {
			t.Errorf("opened again: %v, want %s twice", opened, local)
		}
	})

	tap(bob.Close)
	eventually(t, "bob's closed", func() bool { return len(pt.Rows) == 1 && pt.Rows[0].Preview.Agent == "alice" })
	ctl.mu.Lock()
	if len(ctl.closed) != 1 || ctl.closed[0] != (api.ClosePortsRequest{Agent: "bob", Port: 3000}) {
		t.Errorf("close requests %+v", ctl.closed)
	}
	ctl.mu.Unlock()

	c.CloseIdleConnections()
	fwd.CloseAll()
	if alive := testssh.Alive(pids); len(alive) != 0 {
		t.Fatalf("ssh left running after the forwards closed: %q", alive)
	}
}

// The Projects tab of a remote context lists the far side's projects with
// the far agents granted each, uploads a folder of this machine as one
// (recording the folder here, as `project add` through the context does)
// and removes them there; this machine's projects.json is never shown.
func TestRemoteProjectsTab(t *testing.T) {
	f := openFarWindow(t)
	ctx := context.Background()
	writeFile(t, f.local.ProjectsJSON(), `{"projects":[{"name":"mine","path":"/LOCAL/PROJECT"}]}`)
	localBefore := readFile(t, f.local.ProjectsJSON())
	farDir := t.TempDir()
	if _, err := f.farCtl.AddProject(ctx, control.ProjectAddRequest{Path: farDir, Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.farCtl.SetAgentProjects(ctx, control.AgentProjectsRequest{Agent: "alice", Projects: []string{"web"}}); err != nil {
		t.Fatal(err)
	}
	pt := f.w.Work.Projects
	rowOf := func(name string) (int, string) {
		for i, p := range pt.list {
			if p.Name == name {
				return i, pt.row(i)
			}
		}
		return -1, ""
	}
	eventually(t, "web, granted to alice", func() bool {
		_, r := rowOf("web")
		return strings.Contains(r, "on box (agents: alice)")
	})
	lockedDo(func() {
		if i, _ := rowOf("mine"); i >= 0 {
			t.Error("the Projects tab of box lists this machine's project")
		}
		if pt.Add.Text != "Upload project" {
			t.Errorf("Add is %q", pt.Add.Text)
		}
	})

	// Upload a folder of this machine.
	here := t.TempDir()
	writeFile(t, filepath.Join(here, "a.txt"), "hello\n")
	lockedDo(func() { pt.Path.SetText(here); pt.Name.SetText("app") })
	tap(pt.Add)
	eventually(t, "the upload", func() bool { return strings.Contains(pt.Status.Text, "Added app on box") })
	eventually(t, "app listed with its origin", func() bool {
		_, r := rowOf("app")
		return strings.Contains(r, "uploaded from ") && strings.Contains(r, here)
	})
	list, err := f.farCtl.ListProjects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(p projects.Project) bool { return p.Name == "app" })
	if i < 0 || list[i].UploadedFrom == "" || !strings.HasPrefix(list[i].Path, f.far.Root) {
		t.Fatalf("far projects after the upload: %+v", list)
	}
	if got := readFile(t, filepath.Join(list[i].Path, "a.txt")); got != "hello\n" {
		t.Fatalf("the far copy's a.txt: %q", got)
	}
	links := remotes.Links{Path: remotes.LinksPath(f.local.ConfigDir())}
	real, _ := filepath.EvalSymlinks(here)
	if k, ok, err := links.Get(remotes.Context{Name: "box"}, "app"); err != nil || !ok || k.Dir != real {
		t.Fatalf("the record of app's folder: %+v %v %v", k, ok, err)
	}

	// Remove web (granted: refused there), then app.
	lockedDo(func() { i, _ := rowOf("web"); pt.List.Select(i) })
	tap(pt.Remove)
	eventually(t, "web refused", func() bool { return strings.Contains(pt.Status.Text, "Not removed") })
	lockedDo(func() { i, _ := rowOf("app"); pt.List.Select(i) })
	tap(pt.Remove)
	eventually(t, "app removed", func() bool {
		i, _ := rowOf("app")
		return strings.Contains(pt.Status.Text, "Removed app from box") && i < 0
	})
	list, _ = f.farCtl.ListProjects(ctx)
	if len(list) != 1 || list[0].Name != "web" {
		t.Fatalf("far projects after Remove: %+v", list)
	}
	if _, ok, _ := links.Get(remotes.Context{Name: "box"}, "app"); ok {
		t.Error("the record of app's folder is kept after Remove")
	}
	if got := readFile(t, filepath.Join(here, "a.txt")); got != "hello\n" {
		t.Fatalf("the uploaded folder changed: %q", got)
	}
	if s := readFile(t, f.local.ProjectsJSON()); s != localBefore {
		t.Fatalf("this machine's projects.json changed: %s", s)
	}
	f.check(t)
}
