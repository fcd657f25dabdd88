package remotes

import (
	"os"
	"path/filepath"
	"testing"
)

// The record of uploads keeps one folder per context and project, and
// forgets one set to "".
func TestLinks(t *testing.T) {
	l := Links{Path: LinksPath(filepath.Join(t.TempDir(), "config"))}
	box := Context{Name: "box", URL: "ssh://me@box"}
	if _, ok, err := l.Get(box, "app"); ok || err != nil {
		t.Fatalf("no file: %v %v", ok, err)
	}
	if err := l.Set(box, "app", "/home/me/app"); err != nil {
		t.Fatal(err)
	}
	if err := l.Set(Context{Name: "other", URL: "ssh://other"}, "app", "/elsewhere"); err != nil {
		t.Fatal(err)
	}
	if err := l.Set(box, "app", "/home/me/app2"); err != nil {
		t.Fatal(err)
	}
	if k, ok, err := l.Get(box, "app"); !ok || err != nil || k.Dir != "/home/me/app2" || k.URL != "ssh://me@box" {
		t.Fatalf("box's app: %+v %v %v", k, ok, err)
	}
	if st, err := os.Stat(l.Path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the record's mode: %v %v", st, err)
	}
	if err := l.Set(box, "app", ""); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := l.Get(box, "app"); ok {
		t.Fatal("app kept after it was forgotten")
	}
	if all, _ := l.Load(); len(all) != 1 || all[0].Context != "other" {
		t.Fatalf("left: %+v", all)
	}
}
