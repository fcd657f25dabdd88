package ui

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/projects"
)

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestProjectsAddAndRemove(t *testing.T) {
	f := newFake(t)
	w, reg := newTestWindow(t, f)
	pt := w.Work.Projects
	dir := t.TempDir()

	// A path that is no folder is refused, naming the field.
	typeIn(pt.Path, filepath.Join(dir, "missing"))
	tap(pt.Add)
	lockedDo(func() {
		if !strings.Contains(pt.Status.Text, "path:") || len(pt.list) != 0 {
			t.Fatalf("missing folder: %q, %d projects", pt.Status.Text, len(pt.list))
		}
	})
	lockedDo(func() { pt.Path.SetText(dir) })
	typeIn(pt.Name, "web")
	tap(pt.Add)
	list, err := projects.Load(f.Paths().ProjectsJSON())
	lockedDo(func() {
		if err != nil || len(list) != 1 || list[0].Name != "web" || len(pt.list) != 1 {
			t.Fatalf("after add: %+v %v (shown %d): %q", list, err, len(pt.list), pt.Status.Text)
		}
		if !strings.Contains(pt.Status.Text, "agent set AGENT projects web") {
			t.Fatalf("add does not say how to grant: %q", pt.Status.Text)
		}
	})

	// A granted project stays until no agent has it.
	a, err := reg.Add("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Update(a.ID, func(a *agents.Agent) error { a.Projects = []string{"web"}; return nil }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the grant shown", func() bool { return strings.Contains(pt.row(0), "agents: alice") })
	lockedDo(func() { pt.List.Select(0) })
	tap(pt.Remove)
	lockedDo(func() {
		if !strings.Contains(pt.Status.Text, "Not removed") || len(pt.list) != 1 {
			t.Fatalf("removing a granted project: %q", pt.Status.Text)
		}
	})
	if _, err := reg.Update(a.ID, func(a *agents.Agent) error { a.Projects = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	lockedDo(func() { pt.List.Select(0) })
	tap(pt.Remove)
	list, _ = projects.Load(f.Paths().ProjectsJSON())
	lockedDo(func() {
		if len(list) != 0 || len(pt.list) != 0 {
			t.Fatalf("after remove: %+v: %q", list, pt.Status.Text)
		}
	})
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("removing the project touched the folder: %v", err)
	}
}

// changesFixture is a project "web" granted to alice whose view she
// changed: a.txt modified, b.txt deleted, new.txt added, c.txt modified
// in both the view and the user's folder, and a planted symlink.
func changesFixture(t *testing.T, f *fakeBackend, reg *agents.Registry) (dir, view string) {
	t.Helper()
	dir = t.TempDir()
	for _, n := range []string{"a.txt", "b.txt", "c.txt"} {
		writeFile(t, filepath.Join(dir, n), "line 1\nline 2\n")
	}
	p, err := projects.Add(f.Paths().ProjectsJSON(), dir, "web", f.Paths().Root)
	if err != nil {
		t.Fatal(err)
	}
	a, err := reg.Add("alice")
	if err != nil {
		t.Fatal(err)
	}
	views := projects.Views{Paths: f.Paths()}
	if err := views.Ensure(context.Background(), a, p); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Update(a.ID, func(a *agents.Agent) error { a.Projects = []string{"web"}; return nil }); err != nil {
		t.Fatal(err)
	}
	view = views.Dir(a, "web")
	writeFile(t, filepath.Join(view, "a.txt"), "line 1\nline 2 by alice\n")
	writeFile(t, filepath.Join(view, "c.txt"), "line 1\nalice's c\n")
	writeFile(t, filepath.Join(view, "new.txt"), "new\n")
	if err := os.Remove(filepath.Join(view, "b.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(view, "link")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "c.txt"), "line 1\nthe user's c\n")
	return dir, view
}

func rowFor(t *testing.T, v *changesView, path string) *changeRow {
	t.Helper()
	var r *changeRow
	lockedDo(func() {
		if i := slices.IndexFunc(v.Files, func(r *changeRow) bool { return r.Change.Path == path }); i >= 0 {
			r = v.Files[i]
		}
	})
	if r == nil {
		t.Fatalf("%s is not listed", path)
	}
	return r
}

func listed(v *changesView) []string {
	var out []string
	for _, r := range v.Files {
		out = append(out, r.Change.Path)
	}
	slices.Sort(out)
	return out
}

func waitListed(t *testing.T, v *changesView, want ...string) {
	t.Helper()
	eventually(t, "changes "+strings.Join(want, ","), func() bool { return v.busy == 0 && slices.Equal(listed(v), want) })
}

func TestChangesReviewApplyDiscard(t *testing.T) {
	f := newFake(t)
	w, reg := newTestWindow(t, f)
	dir, view := changesFixture(t, f, reg)
	v := w.Work.Changes
	eventually(t, "alice offered", func() bool { return slices.Contains(v.Agent.Options, "alice") })
	lockedDo(func() { v.Agent.SetSelected("alice"); v.Project.SetSelected("web") })
	waitListed(t, v, "a.txt", "b.txt", "c.txt", "link", "new.txt")

	// Marks: kind, the refused link (which can't be picked), the conflict.
	link := rowFor(t, v, "link")
	rows := map[string]*changeRow{}
	for _, p := range []string{"a.txt", "b.txt", "new.txt", "c.txt"} {
		rows[p] = rowFor(t, v, p)
	}
	lockedDo(func() {
		if !strings.Contains(link.Pick.Text, "refused") || !link.Pick.Disabled() {
			t.Fatalf("link row %q, disabled %v", link.Pick.Text, link.Pick.Disabled())
		}
		for path, want := range map[string]string{"a.txt": "M  a.txt", "b.txt": "D  b.txt", "new.txt": "A  new.txt", "c.txt": "changed in your folder too"} {
			if r := rows[path]; !strings.Contains(r.Pick.Text, want) {
				t.Errorf("%s row %q, want %q", path, r.Pick.Text, want)
			}
		}
	})
	tap(rows["a.txt"].Show)
	lockedDo(func() {
		if !strings.Contains(v.Diff.Text, "-line 2\n+line 2 by alice") {
			t.Fatalf("a.txt diff:\n%s", v.Diff.Text)
		}
	})

	// Nothing picked: nothing to confirm. Declined: nothing written.
	tap(v.Apply)
	lockedDo(func() {
		if !strings.Contains(v.Status.Text, "Check the files first") {
			t.Fatalf("apply with nothing picked: %q", v.Status.Text)
		}
	})
	tap(rows["a.txt"].Pick)
	tap(v.Apply)
	tapInOverlay(t, w.Win, "No")
	if got := readFile(t, filepath.Join(dir, "a.txt")); got != "line 1\nline 2\n" {
		t.Fatalf("declined apply wrote a.txt: %q", got)
	}

	// All picks everything but the link; c.txt is a conflict, not written.
	tap(v.All)
	lockedDo(func() {
		if link.Pick.Checked {
			t.Fatal("All picked the refused link")
		}
	})
	tap(v.Apply)
	tapInOverlay(t, w.Win, "Yes")
	waitListed(t, v, "c.txt", "link")
	for n, want := range map[string]string{"a.txt": "line 1\nline 2 by alice\n", "new.txt": "new\n", "c.txt": "line 1\nthe user's c\n"} {
		if got := readFile(t, filepath.Join(dir, n)); got != want {
			t.Errorf("%s in the folder: %q, want %q", n, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("applied deletion left b.txt: %v", err)
	}
	lockedDo(func() {
		if !strings.Contains(v.Result.Text, "Not written, c.txt") {
			t.Errorf("result %q does not name the conflict", v.Result.Text)
		}
	})

	// Force writes the conflict; the link is still never applied.
	lockedDo(func() { v.Force.SetChecked(true) })
	tap(v.All)
	tap(v.Apply)
	tapInOverlay(t, w.Win, "Yes")
	waitListed(t, v, "link")
	if got := readFile(t, filepath.Join(dir, "c.txt")); got != "line 1\nalice's c\n" {
		t.Fatalf("forced c.txt: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "link")); !os.IsNotExist(err) {
		t.Fatalf("the planted link reached the folder: %v", err)
	}

	// Discard gives the view the folder's content back.
	writeFile(t, filepath.Join(view, "a.txt"), "alice again\n")
	tap(v.Refresh)
	waitListed(t, v, "a.txt", "link")
	tap(rowFor(t, v, "a.txt").Pick)
	tap(v.Discard)
	tapInOverlay(t, w.Win, "Yes")
	waitListed(t, v, "link")
	if got := readFile(t, filepath.Join(view, "a.txt")); got != "line 1\nline 2 by alice\n" {
		t.Fatalf("discarded a.txt in the view: %q", got)
	}
	if got := readFile(t, filepath.Join(dir, "a.txt")); got != "line 1\nline 2 by alice\n" {
		t.Fatalf("discard touched the folder: %q", got)
	}
}

// portsFake is a backend that closes previews as the owner does: it
// rewrites the previews file without them.
type portsFake struct {
	*fakeBackend
	mu     sync.Mutex
	closed []api.ClosePortsRequest
}

func (p *portsFake) ClosePorts(_ context.Context, req api.ClosePortsRequest) (api.ClosePortsResult, error) {
	p.mu.Lock()
	p.closed = append(p.closed, req)
	p.mu.Unlock()
	list, err := readPreviews(p.Paths().PreviewsFile())
	if err != nil {
		return api.ClosePortsResult{}, err
	}
	n := len(list)
	list = slices.DeleteFunc(list, func(v preview) bool { return v.Agent == req.Agent && v.Port == req.Port })
	b, _ := json.Marshal(list)
	return api.ClosePortsResult{Closed: n - len(list)}, os.WriteFile(p.Paths().PreviewsFile(), b, 0o644)
}

func writePreviews(t *testing.T, file string, list []preview) {
	t.Helper()
	b, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, file, string(b))
}

func TestPortsOpenAndClose(t *testing.T) {
	f := &portsFake{fakeBackend: newFake(t)}
	w, _ := newTestWindow(t, f)
	pt := w.Work.Ports
	lockedDo(func() {
		if len(pt.Rows) != 0 || !strings.Contains(pt.Status.Text, "No ports exposed") {
			t.Fatalf("no previews: %d rows, %q", len(pt.Rows), pt.Status.Text)
		}
	})
	var opened []string
	lockedDo(func() { pt.open = func(u *url.URL) error { opened = append(opened, u.String()); return nil } })
	// The file changes while the window is open: the list follows. The
	// URL Open uses is loopback at the host port, whatever the file says.
	now := time.Now()
	writePreviews(t, f.Paths().PreviewsFile(), []preview{
		{Agent: "alice", Port: 8000, HostPort: 41001, URL: "http://example.com/", Since: now},
		{Agent: "bob", Port: 3000, HostPort: 41002, URL: "http://127.0.0.1:41002/", Since: now},
		{Agent: "bad", Port: 1, HostPort: 0, Since: now},
	})
	eventually(t, "two previews", func() bool { return len(pt.Rows) == 2 })
	var alice, bob *portRow
	lockedDo(func() { alice, bob = pt.Rows[0], pt.Rows[1] })
	lockedDo(func() {
		if !strings.Contains(alice.Label.Text, "alice  port 8000  →  http://127.0.0.1:41001/") {
			t.Fatalf("row %q", alice.Label.Text)
		}
	})
	tap(alice.Open)
	lockedDo(func() {
		if !slices.Equal(opened, []string{"http://127.0.0.1:41001/"}) {
			t.Fatalf("opened %v", opened)
		}
	})
	tap(bob.Close)
	eventually(t, "bob's closed", func() bool { return len(pt.Rows) == 1 && pt.Rows[0].Preview.Agent == "alice" })
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.closed) != 1 || f.closed[0] != (api.ClosePortsRequest{Agent: "bob", Port: 3000}) {
		t.Fatalf("close requests %+v", f.closed)
	}
}

// The Changes view as the docs show it (docs/projects.md links the image).
func TestChangesViewImage(t *testing.T) {
	f := newFake(t)
	f.st = control.Status{State: control.Stopped} // a VM exists: every tab is open
	w, reg := newTestWindow(t, f)
	changesFixture(t, f, reg)
	v := w.Work.Changes
	eventually(t, "alice offered", func() bool { return slices.Contains(v.Agent.Options, "alice") })
	lockedDo(func() { v.Agent.SetSelected("alice"); v.Project.SetSelected("web") })
	waitListed(t, v, "a.txt", "b.txt", "c.txt", "link", "new.txt")
	a := rowFor(t, v, "a.txt")
	tap(a.Pick)
	tap(a.Show)
	lockedDo(func() {
		w.Tabs.SelectIndex(slices.IndexFunc(w.Tabs.Items, func(i *container.TabItem) bool { return i.Text == "Changes" }))
		test.AssertImageMatches(t, "changes_view.png", w.Win.Canvas().Capture())
	})
}

// plainCtl is an owner that can't close previews (an older one).
type plainCtl struct{ api.Controller }

func (plainCtl) Status(context.Context) (api.Status, error) { return api.Status{}, nil }
func (plainCtl) Subscribe(func(api.Status)) func()          { return func() {} }

// closerCtl can.
type closerCtl struct {
	plainCtl
	got []api.ClosePortsRequest
}

func (c *closerCtl) ClosePorts(_ context.Context, req api.ClosePortsRequest) (api.ClosePortsResult, error) {
	c.got = append(c.got, req)
	return api.ClosePortsResult{Closed: 1}, nil
}

// The window's Close reaches the owner through the Controller, as the
// CLI's `ports close` does; an owner without it is a clear error.
func TestControlledClosePorts(t *testing.T) {
	ctx := context.Background()
	cc := &closerCtl{}
	b, err := NewBackend(ctx, cc, newFake(t).Paths())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	req := api.ClosePortsRequest{Agent: "alice", Port: 8000}
	if r, err := b.ClosePorts(ctx, req); err != nil || r.Closed != 1 || len(cc.got) != 1 || cc.got[0] != req {
		t.Fatalf("close: %+v %v, owner got %+v", r, err, cc.got)
	}
	old, err := NewBackend(ctx, plainCtl{}, newFake(t).Paths())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := old.ClosePorts(ctx, req); err == nil || !strings.Contains(err.Error(), "can't close previews") {
		t.Fatalf("an owner without ClosePorts: %v", err)
	}
}

// Paths that run code on the user's computer are asked about a second
// time: declined, the rest is written and they are not; a name with
// terminal controls is listed escaped, refused, and can't be picked.
func TestChangesHostExecAsksAgain(t *testing.T) {
	f := newFake(t)
	w, reg := newTestWindow(t, f)
	dir, view := changesFixture(t, f, reg)
	writeFile(t, filepath.Join(view, ".vscode/tasks.json"), `{"tasks":[]}`)
	writeFile(t, filepath.Join(view, "x\x1b[2Ky.txt"), "x\n")
	v := w.Work.Changes
	eventually(t, "alice offered", func() bool { return slices.Contains(v.Agent.Options, "alice") })
	lockedDo(func() { v.Agent.SetSelected("alice"); v.Project.SetSelected("web") })
	waitListed(t, v, ".vscode/tasks.json", "a.txt", "b.txt", "c.txt", "link", "new.txt", "x\x1b[2Ky.txt")
	tasks, evil := rowFor(t, v, ".vscode/tasks.json"), rowFor(t, v, "x\x1b[2Ky.txt")
	lockedDo(func() {
		if !strings.Contains(tasks.Pick.Text, "runs on your computer") {
			t.Errorf("tasks.json row %q", tasks.Pick.Text)
		}
		if strings.Contains(evil.Pick.Text, "\x1b") || !strings.Contains(evil.Pick.Text, `x\x1b[2Ky.txt`) || !evil.Pick.Disabled() {
			t.Errorf("escape row %q, disabled %v", evil.Pick.Text, evil.Pick.Disabled())
		}
	})
	tap(v.All)
	tap(v.Apply)
	tapInOverlay(t, w.Win, "Yes")
	tapInOverlay(t, w.Win, "No") // the second question: not the host-executable file
	waitListed(t, v, ".vscode/tasks.json", "c.txt", "link", "x\x1b[2Ky.txt")
	if got := readFile(t, filepath.Join(dir, "a.txt")); got != "line 1\nline 2 by alice\n" {
		t.Fatalf("a.txt: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".vscode")); !os.IsNotExist(err) {
		t.Fatalf("tasks.json written though declined: %v", err)
	}
	tap(rowFor(t, v, ".vscode/tasks.json").Pick)
	tap(v.Apply)
	tapInOverlay(t, w.Win, "Yes")
	tapInOverlay(t, w.Win, "Yes")
	waitListed(t, v, "c.txt", "link", "x\x1b[2Ky.txt")
	if got := readFile(t, filepath.Join(dir, ".vscode/tasks.json")); got != `{"tasks":[]}` {
		t.Fatalf("tasks.json: %q", got)
	}
}
