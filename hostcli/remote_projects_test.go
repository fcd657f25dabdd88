package hostcli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/projects"
	"github.com/osaurus/osaurus-sandbox/remotes"
)

func put(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func has(t *testing.T, path, want string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != want {
		t.Errorf("%s: %q %v, want %q", path, b, err, want)
	}
}

func absent(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists (%v)", path, err)
	}
}

// A project across the link: `project add` through a context uploads
// the folder (no link followed, the folder untouched), the agent's view
// on the far side is taken from that copy, `changes` shows its changes
// here, and `apply` writes them into this machine's folder, leaving
// alone what the user changed since the upload (until --force) and
// writing nothing through a link of the folder.
func TestProjectsThroughContext(t *testing.T) {
	local, far, _ := farAndLocal(t, []string{"agent", "add", "alice"})
	farSide(t, "box", far)

	user, outside := t.TempDir(), t.TempDir()
	put(t, filepath.Join(user, "README.md"), "hello\n")
	put(t, filepath.Join(user, "keep.txt"), "keep\n")
	put(t, filepath.Join(user, "both.txt"), "v1\n")
	put(t, filepath.Join(user, "docs/guide.md"), "guide\n")
	put(t, filepath.Join(outside, "secret"), "SECRET\n")
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(user, "secret-link"))
	box := func(args ...string) (string, string, int) {
		t.Helper()
		return run(t, append([]string{"--context", "box"}, args...)...)
	}

	out, errOut, code := box("project", "add", user, "--name", "app")
	if code != ExitOK || !strings.Contains(out, "added project app on context box") || !strings.Contains(errOut, "left out secret-link") {
		t.Fatalf("project add: %d\n%s\n%s", code, out, errOut)
	}
	fp := config.Paths{Root: far}
	p, err := projects.Get(fp.ProjectsJSON(), "app")
	if err != nil || p.UploadedFrom == "" || !strings.HasPrefix(p.Path, far) {
		t.Fatalf("the far project: %+v %v", p, err)
	}
	has(t, filepath.Join(p.Path, "README.md"), "hello\n")
	absent(t, filepath.Join(p.Path, "secret-link"))
	if l, _ := projects.Load(config.Paths{Root: local}.ProjectsJSON()); len(l) != 0 {
		t.Errorf("this machine's projects.json got %v", l)
	}
	// The far owner refuses a taken name before reading the upload; its
	// answer still arrives.
	if _, errOut, code := box("project", "add", user, "--name", "app"); code != ExitError || !strings.Contains(errOut, `the name "app" is taken`) {
		t.Errorf("a second add: %d %s", code, errOut)
	}
	if out, errOut, code := box("project", "list"); code != ExitOK || !strings.Contains(out, "(uploaded from "+user+" here)") {
		t.Errorf("project list through the context: %d %s %s", code, out, errOut)
	}

	if out, errOut, code := box("agent", "set", "alice", "projects", "app"); code != ExitOK {
		t.Fatalf("grant: %s %s", out, errOut)
	}
	// The agent changes its view (on the far side's host, as the guest
	// would).
	view := projects.Views{Paths: fp}.Dir(agents.Agent{Slug: "alice"}, "app")
	put(t, filepath.Join(view, "README.md"), "hello from alice\n")
	put(t, filepath.Join(view, "src/new.go"), "package main\n")
	put(t, filepath.Join(view, "both.txt"), "alice's\n")
	put(t, filepath.Join(view, "docs/extra.md"), "extra\n")
	os.Remove(filepath.Join(view, "keep.txt"))

	out, errOut, code = box("changes", "alice", "app")
	if code != ExitOK || !strings.Contains(out, "+hello from alice") || !strings.Contains(out, "src/new.go") || !strings.Contains(out, "--context box apply alice app --review") {
		t.Fatalf("changes: %d\n%s\n%s", code, out, errOut)
	}
	var cs projects.ChangeSet
	if out, _, _ := box("changes", "alice", "app", "--json"); json.Unmarshal([]byte(out), &cs) != nil || len(cs.Changes) != 5 {
		t.Fatalf("changes --json: %s", out)
	}

	// Meanwhile the user changes both.txt and turns docs into a link.
	put(t, filepath.Join(user, "both.txt"), "the user's\n")
	os.Rename(filepath.Join(user, "docs"), filepath.Join(user, "docs-moved"))
	os.Symlink(outside, filepath.Join(user, "docs"))

	out, errOut, code = box("apply", "alice", "app", "--yes")
	if code != ExitError {
		t.Fatalf("apply: %d, want %d\n%s\n%s", code, ExitError, out, errOut)
	}
	for _, want := range []string{"applied README.md", "applied src/new.go", "applied keep.txt", "conflict both.txt", "refused docs/extra.md"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply: no %q in\n%s\n%s", want, out, errOut)
		}
	}
	has(t, filepath.Join(user, "README.md"), "hello from alice\n")
	has(t, filepath.Join(user, "src/new.go"), "package main\n")
	absent(t, filepath.Join(user, "keep.txt"))
	has(t, filepath.Join(user, "both.txt"), "the user's\n")
	absent(t, filepath.Join(outside, "extra.md"))
	has(t, filepath.Join(p.Path, "README.md"), "hello from alice\n") // the far copy too

	// What was not written here is still a change there; --force takes
	// the conflict.
	out, errOut, code = box("apply", "alice", "app", "--yes", "--force", "both.txt")
	if code != ExitOK || !strings.Contains(out, "applied both.txt") {
		t.Fatalf("apply --force: %d\n%s\n%s", code, out, errOut)
	}
	has(t, filepath.Join(user, "both.txt"), "alice's\n")

	// discard is the far side's; remove forgets the project there and
	// its folder here, which stays.
	if out, errOut, code := box("discard", "alice", "app", "--yes"); code != ExitOK || !strings.Contains(out, "discarded docs/extra.md") {
		t.Fatalf("discard: %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := box("agent", "set", "alice", "projects", "none"); code != ExitOK {
		t.Fatalf("ungrant: %s %s", out, errOut)
	}
	if out, errOut, code := box("project", "remove", "app"); code != ExitOK {
		t.Fatalf("remove: %s %s", out, errOut)
	}
	absent(t, p.Path)
	has(t, filepath.Join(user, "README.md"), "hello from alice\n")
	if out, errOut, code := box("apply", "alice", "app", "--yes"); code == ExitOK {
		t.Errorf("apply after remove: %s %s", out, errOut)
	}
}

// liar is a far owner that lies about what it applied: paths outside
// the folder, a path not in the review, and (unless serve is the
// reviewed "good") content that is not the reviewed content. It records
// the paths it was asked to apply.
type liar struct {
	api.Controller
	serve string
	mu    sync.Mutex
	asked [][]string
}

func sum(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func (*liar) GetAgent(context.Context, string) (agents.Agent, error) {
	return agents.Agent{ID: "id-1", Name: "alice", Slug: "alice", UID: 2001}, nil
}

func (*liar) ViewChanges(context.Context, api.ViewRequest) (*projects.ChangeSet, error) {
	ch := func(p, body string) projects.Change {
		return projects.Change{Path: p, Kind: projects.Added, Type: projects.TypeFile, Size: int64(len(body)), Hash: sum(body), Mode: 0o644}
	}
	return &projects.ChangeSet{Review: "0123456789abcdef0123456789abcdef", Agent: "alice", Project: "app",
		Changes: []projects.Change{ch("../escape.txt", "x"), ch("/tmp/osaurus-liar-abs", "x"), ch("ok.txt", "good"), ch("sub/through-link.txt", "x")}}, nil
}

func (l *liar) ApplyChanges(_ context.Context, req api.ViewRequest) (*projects.Result, error) {
	l.mu.Lock()
	l.asked = append(l.asked, req.Apply.Paths)
	l.mu.Unlock()
	return &projects.Result{Done: append(req.Apply.Paths, "../escape.txt", "/tmp/osaurus-liar-abs", "not-reviewed.txt", "ok.txt")}, nil
}

func (l *liar) OpenProjectFile(_ context.Context, req control.ProjectFileRequest) (io.ReadCloser, error) {
	if req.Agent != "id-1" {
		return nil, errors.New("not from the agent's view")
	}
	return io.NopCloser(strings.NewReader(l.serve)), nil
}

// A far side that lies writes nothing outside the folder, nothing not
// reviewed, no content but the reviewed one, and nothing through a link;
// what it sends that is not the review is neither written here nor
// applied there.
func TestApplyThroughContextTrustsNoFarSide(t *testing.T) {
	for _, serve := range []string{"evil", "good"} {
		t.Run(serve, func(t *testing.T) {
			l := &liar{serve: serve}
			local := fakeFar(t, "liar", l)
			parent := t.TempDir()
			user, outside := filepath.Join(parent, "user"), t.TempDir()
			os.Mkdir(user, 0o755)
			os.Symlink(outside, filepath.Join(user, "sub"))
			c := &cli{paths: config.Paths{Root: local}, remote: &remotes.Context{Name: "liar", URL: "ssh://me@liar"}}
			if err := c.setLink("app", user); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := run(t, "--context", "liar", "apply", "alice", "app", "--yes")
			if code == ExitOK {
				t.Errorf("apply against a liar succeeded:\n%s\n%s", out, errOut)
			}
			want := []string{"refused ../escape.txt", "refused /tmp/osaurus-liar-abs", "refused sub/through-link.txt"}
			if serve == "evil" {
				want = append(want, "refused ok.txt: the far side sent")
			} else {
				want = append(want, "applied ok.txt", "refused not-reviewed.txt: the far side applied a path that is not one it was asked")
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in\n%s\n%s", w, out, errOut)
				}
			}
			absent(t, filepath.Join(parent, "escape.txt"))
			absent(t, "/tmp/osaurus-liar-abs")
			absent(t, filepath.Join(user, "not-reviewed.txt"))
			absent(t, filepath.Join(outside, "through-link.txt"))
			l.mu.Lock()
			defer l.mu.Unlock()
			if serve == "evil" {
				// Nothing written here, so nothing is applied there.
				absent(t, filepath.Join(user, "ok.txt"))
				if ents, _ := os.ReadDir(user); len(ents) != 1 {
					t.Errorf("the folder holds %v", ents)
				}
				if len(l.asked) != 0 {
					t.Errorf("the far side was asked to apply %v", l.asked)
				}
				return
			}
			has(t, filepath.Join(user, "ok.txt"), "good")
			if len(l.asked) != 1 || !slices.Equal(l.asked[0], []string{"ok.txt"}) {
				t.Errorf("the far side was asked to apply %v, want only what was written here", l.asked)
			}
		})
	}
}

// hooked is a real far owner with trouble put in: onOpen runs as it
// serves a file (while this machine is writing the change), and the
// first failApply applies fail before anything is applied there.
type hooked struct {
	api.Controller
	onOpen    func(control.ProjectFileRequest)
	failApply atomic.Int32
}

func (h *hooked) OpenProjectFile(ctx context.Context, req control.ProjectFileRequest) (io.ReadCloser, error) {
	if h.onOpen != nil {
		h.onOpen(req)
	}
	return h.Controller.OpenProjectFile(ctx, req)
}

func (h *hooked) ApplyChanges(ctx context.Context, req api.ViewRequest) (*projects.Result, error) {
	if h.failApply.Add(-1) >= 0 {
		return nil, errors.New("the far disk is full")
	}
	return h.Controller.ApplyChanges(ctx, req)
}

// hookedProject is project app uploaded from a folder of this machine
// (a.txt, b.txt, c.txt, gone.txt) through context box to a real far
// owner wrapped in h, granted to alice, whose view then changes a, b and
// c and deletes gone.txt. It returns the folder, the far copy and a
// function that lists the far side's changes.
func hookedProject(t *testing.T, h *hooked) (user, copyDir string, farChanges func() []string) {
	t.Helper()
	_, far, ctl := farAndLocal(t, []string{"agent", "add", "alice"})
	h.Controller = ctl
	fakeFar(t, "box", h)
	user = t.TempDir()
	for _, n := range []string{"a.txt", "b.txt", "c.txt", "gone.txt"} {
		put(t, filepath.Join(user, n), n+" v1\n")
	}
	box := func(args ...string) string {
		t.Helper()
		out, errOut, code := run(t, append([]string{"--context", "box"}, args...)...)
		if code != ExitOK {
			t.Fatalf("%v: %d\n%s\n%s", args, code, out, errOut)
		}
		return out
	}
	box("project", "add", user, "--name", "app")
	box("agent", "set", "alice", "projects", "app")
	fp := config.Paths{Root: far}
	p, err := projects.Get(fp.ProjectsJSON(), "app")
	if err != nil {
		t.Fatal(err)
	}
	view := projects.Views{Paths: fp}.Dir(agents.Agent{Slug: "alice"}, "app")
	for _, n := range []string{"a.txt", "b.txt", "c.txt"} {
		put(t, filepath.Join(view, n), n+" by alice\n")
	}
	os.Remove(filepath.Join(view, "gone.txt"))
	return user, p.Path, func() []string {
		t.Helper()
		var cs projects.ChangeSet
		if err := json.Unmarshal([]byte(box("changes", "alice", "app", "--json")), &cs); err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, c := range cs.Changes {
			paths = append(paths, c.Path)
		}
		return paths
	}
}

// A change this folder refuses or that conflicts as it is written (the
// folder changed after it was judged) is not applied on the far side
// either: it is still a change there, nothing is lost.
func TestRemoteApplyLosesNoRefusedChange(t *testing.T) {
	outside := t.TempDir()
	put(t, filepath.Join(outside, "target"), "outside\n")
	var user string
	h := &hooked{onOpen: func(req control.ProjectFileRequest) {
		// The user's folder changes while the content comes: b.txt
		// becomes a link, c.txt the user's own edit.
		switch req.Path {
		case "b.txt":
			os.Remove(filepath.Join(user, "b.txt"))
			os.Symlink(filepath.Join(outside, "target"), filepath.Join(user, "b.txt"))
		case "c.txt":
			os.WriteFile(filepath.Join(user, "c.txt"), []byte("the user's\n"), 0o644)
		}
	}}
	user, copyDir, farChanges := hookedProject(t, h)
	out, errOut, code := run(t, "--context", "box", "apply", "alice", "app", "--yes")
	if code != ExitError {
		t.Fatalf("apply: %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"applied a.txt", "applied gone.txt", "refused b.txt: your folder has a symbolic link here", "conflict c.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s\n%s", want, out, errOut)
		}
	}
	has(t, filepath.Join(user, "a.txt"), "a.txt by alice\n")
	absent(t, filepath.Join(user, "gone.txt"))
	has(t, filepath.Join(outside, "target"), "outside\n")
	has(t, filepath.Join(user, "c.txt"), "the user's\n")
	has(t, filepath.Join(copyDir, "a.txt"), "a.txt by alice\n")
	has(t, filepath.Join(copyDir, "b.txt"), "b.txt v1\n")
	has(t, filepath.Join(copyDir, "c.txt"), "c.txt v1\n")
	if got := farChanges(); !slices.Equal(got, []string{"b.txt", "c.txt"}) {
		t.Errorf("the far side's changes after: %v, want b.txt and c.txt", got)
	}
}

// When the far side fails to apply what was written here, the change
// stays listed there; the next apply finds this folder already holding
// it and lets the far side apply it, and both sides agree.
func TestRemoteApplyFarFailureIsFinishedByTheNext(t *testing.T) {
	h := &hooked{}
	h.failApply.Store(1)
	user, copyDir, farChanges := hookedProject(t, h)
	out, errOut, code := run(t, "--context", "box", "apply", "alice", "app", "--yes")
	if code != ExitError || !strings.Contains(errOut, "the far disk is full") {
		t.Fatalf("apply: %d\n%s\n%s", code, out, errOut)
	}
	for _, n := range []string{"a.txt", "b.txt", "c.txt", "gone.txt"} {
		if want := n + ": written here; still listed as a change on context box: run apply again"; !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	has(t, filepath.Join(user, "a.txt"), "a.txt by alice\n")
	absent(t, filepath.Join(user, "gone.txt"))
	has(t, filepath.Join(copyDir, "a.txt"), "a.txt v1\n")
	if got := farChanges(); len(got) != 4 {
		t.Errorf("the far side's changes after the failure: %v", got)
	}

	out, errOut, code = run(t, "--context", "box", "apply", "alice", "app", "--yes")
	if code != ExitOK {
		t.Fatalf("apply again: %d\n%s\n%s", code, out, errOut)
	}
	for _, n := range []string{"a.txt", "b.txt", "c.txt", "gone.txt"} {
		if !strings.Contains(out, "applied "+n) {
			t.Errorf("no applied %s in\n%s", n, out)
		}
	}
	for _, n := range []string{"a.txt", "b.txt", "c.txt"} {
		has(t, filepath.Join(user, n), n+" by alice\n")
		has(t, filepath.Join(copyDir, n), n+" by alice\n")
	}
	absent(t, filepath.Join(user, "gone.txt"))
	absent(t, filepath.Join(copyDir, "gone.txt"))
	if got := farChanges(); len(got) != 0 {
		t.Errorf("the far side's changes after apply again: %v", got)
	}
}
