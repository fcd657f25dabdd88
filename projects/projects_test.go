package projects

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
)

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func kinds(cs *ChangeSet) map[string]string {
	m := map[string]string{}
	for _, c := range cs.Changes {
		k := c.Kind
		if c.Refused != "" {
			k += ",refused"
		}
		if c.HostChanged {
			k += ",host"
		}
		m[c.Path] = k
	}
	return m
}

func TestViewChangesApplyDiscard(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	paths := config.Paths{Root: filepath.Join(root, "data")}
	src := filepath.Join(root, "repo")
	write(t, filepath.Join(src, "README.md"), "hello\nworld\n")
	write(t, filepath.Join(src, "src/main.go"), "package main\n")
	write(t, filepath.Join(src, "old.txt"), "old\n")
	write(t, filepath.Join(src, "keep.txt"), "keep\n")
	write(t, filepath.Join(src, "bin.dat"), "a\x00b")

	p, err := Add(paths.ProjectsJSON(), src, "", paths.Root)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "repo" {
		t.Fatalf("name %q", p.Name)
	}
	if _, err := Add(paths.ProjectsJSON(), src, "other", paths.Root); err == nil {
		t.Fatal("the same folder added twice")
	}
	if _, err := Add(paths.ProjectsJSON(), paths.Root, "data", paths.Root); err == nil {
		t.Fatal("the data folder added as a project")
	}
	v := Views{Paths: paths, Chown: func(string, int, int) error { return nil }}
	a := agents.Agent{ID: "id-a", Name: "A", Slug: "a"}
	b := agents.Agent{ID: "id-b", Name: "B", Slug: "b"}
	for _, ag := range []agents.Agent{a, b} {
		if err := v.Ensure(ctx, ag, p); err != nil {
			t.Fatal(err)
		}
	}
	va := v.Dir(a, p.Name)
	write(t, filepath.Join(va, "README.md"), "hello\nthere\n")
	write(t, filepath.Join(va, "new/added.txt"), "new\n")
	os.Remove(filepath.Join(va, "old.txt"))
	os.Remove(filepath.Join(va, "keep.txt"))
	write(t, filepath.Join(va, "bin.dat"), "a\x00c")
	if err := os.Symlink("/etc/passwd", filepath.Join(va, "link")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(va, "suid"), "x")
	os.Chmod(filepath.Join(va, "suid"), 0o755|os.ModeSetuid)

	cs, err := v.Changes(ctx, a, p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"README.md": "modified", "new/added.txt": "added", "old.txt": "deleted", "keep.txt": "deleted",
		"bin.dat": "modified", "link": "added,refused", "suid": "added,refused"}
	if got := kinds(cs); !mapsEqual(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	for _, c := range cs.Changes {
		switch c.Path {
		case "README.md":
			if !strings.Contains(c.Diff, "-world\n+there\n") || !strings.HasPrefix(c.Diff, "--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,2 @@\n") {
				t.Errorf("diff:\n%s", c.Diff)
			}
		case "bin.dat":
			if !c.Binary || c.Diff != "" || c.Hash == "" {
				t.Errorf("binary change %+v", c)
			}
		}
	}
	// B's view is untouched by A's changes.
	if cs, _ := v.Changes(ctx, b, p); len(cs.Changes) != 0 {
		t.Fatalf("B sees changes %v", kinds(cs))
	}
	// The user edits README.md meanwhile: applying it is refused.
	write(t, filepath.Join(src, "README.md"), "hello\nuser\n")
	r, err := v.Apply(ctx, a, p, ApplyOptions{Review: cs.Review, Paths: []string{"README.md", "new/added.txt", "old.txt", "link", "suid"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Done, []string{"new/added.txt", "old.txt"}) || len(r.Conflict) != 1 || r.Conflict[0].Path != "README.md" || len(r.Refused) != 2 {
		t.Fatalf("apply: %+v", r)
	}
	if read(t, filepath.Join(src, "README.md")) != "hello\nuser\n" || read(t, filepath.Join(src, "new/added.txt")) != "new\n" {
		t.Fatal("apply wrote the wrong files")
	}
	if _, err := os.Lstat(filepath.Join(src, "old.txt")); !os.IsNotExist(err) {
		t.Fatal("old.txt not deleted")
	}
	if _, err := os.Lstat(filepath.Join(src, "link")); !os.IsNotExist(err) {
		t.Fatal("a link was applied")
	}
	if read(t, filepath.Join(src, "keep.txt")) != "keep\n" {
		t.Fatal("a change not chosen was applied")
	}
	if _, err := v.Apply(ctx, a, p, ApplyOptions{Review: cs.Review, Paths: []string{"../etc/passwd"}}); err == nil {
		t.Fatal("a path that is not a change was accepted")
	}
	// Forced, it goes in.
	if r, err := v.Apply(ctx, a, p, ApplyOptions{Review: cs.Review, Paths: []string{"README.md"}, Force: true}); err != nil || len(r.Done) != 1 {
		t.Fatalf("forced apply: %+v %v", r, err)
	}
	if read(t, filepath.Join(src, "README.md")) != "hello\nthere\n" {
		t.Fatal("forced apply did not write")
	}
	// Discard the rest but the refused ones: the view gets the folder back.
	if _, err := v.Discard(ctx, a, p, []string{"keep.txt", "bin.dat", "link"}); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(va, "keep.txt")) != "keep\n" {
		t.Fatal("discard did not restore keep.txt")
	}
	cs, _ = v.Changes(ctx, a, p)
	if got := kinds(cs); !mapsEqual(got, map[string]string{"suid": "added,refused"}) {
		t.Fatalf("after apply and discard: %v", got)
	}
	if err := v.Drop(ctx, a, p, false); err == nil {
		t.Fatal("a view with changes dropped")
	}
	if err := v.Drop(ctx, b, p, false); err != nil || v.Has(b, p.Name) {
		t.Fatalf("drop: %v", err)
	}
}

// A symlink the agent puts where a folder was must not lead Apply's reads
// or writes outside: the view and the folder are opened as roots.
func TestApplyThroughSwappedDirectory(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	paths := config.Paths{Root: filepath.Join(root, "data")}
	src := filepath.Join(root, "repo")
	secret := filepath.Join(root, "secret")
	write(t, filepath.Join(secret, "key"), "SECRET\n")
	write(t, filepath.Join(src, "d/f.txt"), "f\n")
	p, err := Add(paths.ProjectsJSON(), src, "repo", paths.Root)
	if err != nil {
		t.Fatal(err)
	}
	v := Views{Paths: paths, Chown: func(string, int, int) error { return nil }}
	a := agents.Agent{ID: "id-a", Name: "A", Slug: "a"}
	if err := v.Ensure(ctx, a, p); err != nil {
		t.Fatal(err)
	}
	va := v.Dir(a, p.Name)
	os.RemoveAll(filepath.Join(va, "d"))
	if err := os.Symlink(secret, filepath.Join(va, "d")); err != nil {
		t.Fatal(err)
	}
	cs, err := v.Changes(ctx, a, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(cs); !mapsEqual(got, map[string]string{"d": "added,refused,host", "d/f.txt": "deleted"}) {
		t.Fatalf("changes %v", got)
	}
	for _, c := range cs.Changes {
		if strings.Contains(c.Diff, "SECRET") {
			t.Fatal("the diff read through the link")
		}
	}
	if _, err := v.Apply(ctx, a, p, ApplyOptions{Review: cs.Review}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(src, "d")); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(filepath.Join(src, "d")); st.Mode()&os.ModeSymlink != 0 {
		t.Fatal("the link was applied")
	}
}

func TestUnifiedDiff(t *testing.T) {
	tests := []struct{ a, b, want string }{
		{"", "x\n", "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n"},
		{"x\n", "", "--- a\n+++ b\n@@ -1 +0,0 @@\n-x\n"},
		{"1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nV\n6\n7\n8\n9\n", "--- a\n+++ b\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+V\n 6\n 7\n 8\n"},
		{"a", "b", "--- a\n+++ b\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n"},
	}
	for _, tt := range tests {
		if got := unifiedDiff("a", "b", tt.a, tt.b); got != tt.want {
			t.Errorf("diff(%q, %q) =\n%s\nwant\n%s", tt.a, tt.b, got, tt.want)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
