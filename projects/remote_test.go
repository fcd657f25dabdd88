package projects

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
)

func writeMode(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
}

// An upload carries the folder's files and folders, never a link's
// target or a special file, and arrives as a project of the receiving
// data folder whose copy no one else may enter.
func TestUploadRoundTrip(t *testing.T) {
	src, data, secret := t.TempDir(), t.TempDir(), t.TempDir()
	writeMode(t, filepath.Join(src, "README.md"), "hello\n", 0o644)
	writeMode(t, filepath.Join(src, "bin/run.sh"), "#!/bin/sh\n", 0o755)
	writeMode(t, filepath.Join(src, ".git/config"), "[core]\n", 0o644)
	os.MkdirAll(filepath.Join(src, "empty"), 0o755)
	writeMode(t, filepath.Join(secret, "key"), "SECRET", 0o600)
	os.Symlink(filepath.Join(secret, "key"), filepath.Join(src, "key"))
	os.Symlink(secret, filepath.Join(src, "outside"))
	syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644)

	var buf bytes.Buffer
	st, err := SendUpload(context.Background(), src, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 3 || len(st.Skipped) != 3 {
		t.Errorf("stats %+v", st)
	}
	list := filepath.Join(data, "projects.json")
	p, err := ReceiveUpload(context.Background(), &buf, list, data, "app", "me@laptop:"+src)
	if err != nil {
		t.Fatal(err)
	}
	if p.UploadedFrom == "" || !strings.HasPrefix(p.Path, data) {
		t.Errorf("project %+v", p)
	}
	for rel, want := range map[string]string{"README.md": "hello\n", "bin/run.sh": "#!/bin/sh\n", ".git/config": "[core]\n"} {
		if b, err := os.ReadFile(filepath.Join(p.Path, rel)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", rel, b, err)
		}
	}
	if st, err := os.Stat(filepath.Join(p.Path, "bin/run.sh")); err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh lost its exec bit: %v %v", st.Mode(), err)
	}
	for _, rel := range []string{"key", "outside", "fifo"} {
		if _, err := os.Lstat(filepath.Join(p.Path, rel)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was uploaded: %v", rel, err)
		}
	}
	if st, err := os.Stat(p.Path); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the copy's mode: %v %v", st.Mode(), err)
	}
	// The same name again is refused, and the copy stays.
	buf.Reset()
	SendUpload(context.Background(), src, &buf)
	if _, err := ReceiveUpload(context.Background(), &buf, list, data, "app", "x"); !errors.Is(err, ErrExists) {
		t.Errorf("a second upload as app: %v", err)
	}
	if err := RemoveUpload(p, data); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the copy is still there: %v", err)
	}
	// A project of the machine's own folder is never deleted.
	if err := RemoveUpload(Project{Name: "x", Path: src}, data); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(src, "README.md")); err != nil {
		t.Error(err)
	}
}

// What arrives is hostile: names that leave the folder, links, devices
// and lies about sizes make nothing outside the data folder's upload
// folder, and no project.
func TestReceiveUploadRefuses(t *testing.T) {
	type ent struct {
		name, link string
		typ        byte
		body       string
		size       int64
	}
	for _, tt := range []struct {
		name string
		ents []ent
		want string
	}{
		{"dotdot", []ent{{name: "../escape", typ: tar.TypeReg, body: "x"}}, "not a relative path"},
		{"absolute", []ent{{name: "/tmp/escape", typ: tar.TypeReg, body: "x"}}, "not a relative path"},
		{"inner dotdot", []ent{{name: "a/../../escape", typ: tar.TypeReg, body: "x"}}, "not a relative path"},
		{"symlink", []ent{{name: "l", typ: tar.TypeSymlink, link: "/etc/passwd"}}, "only folders and regular files"},
		{"hardlink", []ent{{name: "l", typ: tar.TypeLink, link: "/etc/passwd"}}, "only folders and regular files"},
		{"device", []ent{{name: "d", typ: tar.TypeChar}}, "only folders and regular files"},
		{"too big", []ent{{name: "big", typ: tar.TypeReg, size: MaxUploadBytes + 1}}, "too big to upload"},
		{"twice", []ent{{name: "a", typ: tar.TypeReg, body: "x"}, {name: "a", typ: tar.TypeReg, body: "y"}}, "exists"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := t.TempDir()
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, e := range tt.ents {
				size := int64(len(e.body))
				if e.size != 0 {
					size = e.size
				}
				tw.WriteHeader(&tar.Header{Typeflag: e.typ, Name: e.name, Linkname: e.link, Size: size, Mode: 0o4755})
				io.WriteString(tw, e.body)
			}
			tw.Flush()
			_, err := ReceiveUpload(context.Background(), &buf, filepath.Join(data, "projects.json"), data, "app", "x")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if l, _ := Load(filepath.Join(data, "projects.json")); len(l) != 0 {
				t.Errorf("registered %v", l)
			}
			ents, _ := os.ReadDir(Uploads(data))
			if len(ents) != 0 {
				t.Errorf("left %v in the upload folder", ents)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(data), "escape")); err == nil {
				t.Error("wrote outside")
			}
		})
	}
}

// fakeFetch serves content by path, as a far side would (or lie).
func fakeFetch(content map[string]string) FetchFunc {
	return func(_ context.Context, c Change) (io.ReadCloser, error) {
		b, ok := content[c.Path]
		if !ok {
			return nil, errors.New("no such content")
		}
		return io.NopCloser(strings.NewReader(b)), nil
	}
}

// The local side of a remote apply trusts no path, type or byte the far
// side sends beyond the review: each case is a far side that lies, or a
// folder the user changed, and nothing is written outside the folder,
// through a link, or over the user's own change.
func TestWriteAppliedTrustsNothing(t *testing.T) {
	h := hashBytes
	for _, tt := range []struct {
		name    string
		prep    func(t *testing.T, dir, outside string)
		change  Change
		content string
		opts    ApplyOptions
		want    string // "done", "refused" or "conflict"
		check   func(t *testing.T, dir, outside string)
	}{
		{name: "add", change: Change{Path: "src/new.go", Kind: Added, Type: TypeFile, Size: 3, Hash: h([]byte("new")), Mode: 0o644}, content: "new", want: "done",
			check: func(t *testing.T, dir, _ string) { wantFile(t, filepath.Join(dir, "src/new.go"), "new") }},
		{name: "modify", prep: func(t *testing.T, dir, _ string) { writeMode(t, filepath.Join(dir, "a.txt"), "old", 0o600) },
			change: Change{Path: "a.txt", Kind: Modified, Type: TypeFile, Size: 3, Hash: h([]byte("new")), OldHash: h([]byte("old"))}, content: "new", want: "done",
			check: func(t *testing.T, dir, _ string) {
				wantFile(t, filepath.Join(dir, "a.txt"), "new")
				if st, _ := os.Stat(filepath.Join(dir, "a.txt")); st.Mode().Perm() != 0o600 {
					t.Errorf("mode %v, want the file's own 0600", st.Mode())
				}
			}},
		{name: "delete", prep: func(t *testing.T, dir, _ string) { writeMode(t, filepath.Join(dir, "gone.txt"), "old", 0o644) },
			change: Change{Path: "gone.txt", Kind: Deleted, Type: TypeFile, OldHash: h([]byte("old"))}, want: "done",
			check: func(t *testing.T, dir, _ string) { wantGone(t, filepath.Join(dir, "gone.txt")) }},
		{name: "dotdot", change: Change{Path: "../escape", Kind: Added, Type: TypeFile, Size: 1, Hash: h([]byte("x"))}, content: "x", want: "refused",
			check: func(t *testing.T, dir, _ string) { wantGone(t, filepath.Join(filepath.Dir(dir), "escape")) }},
		{name: "absolute", change: Change{Path: "/tmp/escape-osaurus", Kind: Added, Type: TypeFile, Size: 1, Hash: h([]byte("x"))}, content: "x", want: "refused",
			check: func(t *testing.T, _, _ string) { wantGone(t, "/tmp/escape-osaurus") }},
		{name: "unclean", change: Change{Path: "a/./b", Kind: Added, Type: TypeFile, Size: 1, Hash: h([]byte("x"))}, content: "x", want: "refused"},
		{name: "git internals", change: Change{Path: ".git/hooks/pre-commit", Kind: Added, Type: TypeFile, Size: 1, Hash: h([]byte("x"))}, content: "x", want: "refused"},
		{name: "a link", change: Change{Path: "l", Kind: Added, Type: TypeSymlink, Size: 1, Hash: h([]byte("x"))}, content: "x", want: "refused"},
		{name: "host exec unconfirmed", change: Change{Path: ".envrc", Kind: Added, Type: TypeFile, Size: 1, Hash: h([]byte("x"))}, content: "x", want: "refused"},
		{name: "host exec confirmed", change: Change{Path: ".envrc", Kind: Added, Type: TypeFile, Size: 1, Hash: h([]byte("x"))}, content: "x",
			opts: ApplyOptions{AllowHostExec: true}, want: "done"},
		{name: "content not the hash", change: Change{Path: "a.txt", Kind: Added, Type: TypeFile, Size: 4, Hash: h([]byte("good"))}, content: "evil", want: "refused",
			check: func(t *testing.T, dir, _ string) { wantGone(t, filepath.Join(dir, "a.txt")); wantNoTemp(t, dir) }},
		{name: "content longer", change: Change{Path: "a.txt", Kind: Added, Type: TypeFile, Size: 4, Hash: h([]byte("good"))}, content: "good and more", want: "refused",
			check: func(t *testing.T, dir, _ string) { wantGone(t, filepath.Join(dir, "a.txt")); wantNoTemp(t, dir) }},
		{name: "through a local link", prep: func(t *testing.T, dir, outside string) { os.Symlink(outside, filepath.Join(dir, "sub")) },
			change: Change{Path: "sub/evil.txt", Kind: Added, Type: TypeFile, Size: 1, Hash: h([]byte("x"))}, content: "x", want: "refused",
			check: func(t *testing.T, _, outside string) { wantGone(t, filepath.Join(outside, "evil.txt")) }},
		{name: "over a local link", prep: func(t *testing.T, dir, outside string) {
			writeMode(t, filepath.Join(outside, "target"), "mine", 0o644)
			os.Symlink(filepath.Join(outside, "target"), filepath.Join(dir, "a.txt"))
		}, change: Change{Path: "a.txt", Kind: Modified, Type: TypeFile, Size: 1, Hash: h([]byte("x")), OldHash: h([]byte("mine"))}, content: "x", want: "refused",
			check: func(t *testing.T, _, outside string) { wantFile(t, filepath.Join(outside, "target"), "mine") }},
		{name: "delete through a link", prep: func(t *testing.T, dir, outside string) {
			writeMode(t, filepath.Join(outside, "keep"), "mine", 0o644)
			os.Symlink(outside, filepath.Join(dir, "d"))
		}, change: Change{Path: "d/keep", Kind: Deleted, Type: TypeFile, OldHash: h([]byte("mine"))}, want: "refused",
			check: func(t *testing.T, _, outside string) { wantFile(t, filepath.Join(outside, "keep"), "mine") }},
		{name: "user changed it", prep: func(t *testing.T, dir, _ string) { writeMode(t, filepath.Join(dir, "a.txt"), "user's", 0o644) },
			change: Change{Path: "a.txt", Kind: Modified, Type: TypeFile, Size: 3, Hash: h([]byte("new")), OldHash: h([]byte("old"))}, content: "new", want: "conflict",
			check: func(t *testing.T, dir, _ string) { wantFile(t, filepath.Join(dir, "a.txt"), "user's") }},
		{name: "user changed it, forced", prep: func(t *testing.T, dir, _ string) { writeMode(t, filepath.Join(dir, "a.txt"), "user's", 0o644) },
			change: Change{Path: "a.txt", Kind: Modified, Type: TypeFile, Size: 3, Hash: h([]byte("new")), OldHash: h([]byte("old"))}, content: "new",
			opts: ApplyOptions{Force: true}, want: "done",
			check: func(t *testing.T, dir, _ string) { wantFile(t, filepath.Join(dir, "a.txt"), "new") }},
		{name: "user added the same name", prep: func(t *testing.T, dir, _ string) { writeMode(t, filepath.Join(dir, "a.txt"), "user's", 0o644) },
			change: Change{Path: "a.txt", Kind: Added, Type: TypeFile, Size: 3, Hash: h([]byte("new"))}, content: "new", want: "conflict",
			check: func(t *testing.T, dir, _ string) { wantFile(t, filepath.Join(dir, "a.txt"), "user's") }},
		{name: "user changed a deleted file", prep: func(t *testing.T, dir, _ string) { writeMode(t, filepath.Join(dir, "a.txt"), "user's", 0o644) },
			change: Change{Path: "a.txt", Kind: Deleted, Type: TypeFile, OldHash: h([]byte("old"))}, want: "conflict",
			check: func(t *testing.T, dir, _ string) { wantFile(t, filepath.Join(dir, "a.txt"), "user's") }},
		{name: "its folder gone", change: Change{Path: "d/a.txt", Kind: Modified, Type: TypeFile, Size: 1, Hash: h([]byte("x")), OldHash: h([]byte("old"))}, content: "x", want: "conflict",
			check: func(t *testing.T, dir, _ string) { wantGone(t, filepath.Join(dir, "d")) }},
		{name: "its folder gone, forced", change: Change{Path: "d/a.txt", Kind: Modified, Type: TypeFile, Size: 1, Hash: h([]byte("x")), OldHash: h([]byte("old"))}, content: "x",
			opts: ApplyOptions{Force: true}, want: "done", check: func(t *testing.T, dir, _ string) { wantFile(t, filepath.Join(dir, "d/a.txt"), "x") }},
		{name: "already written (a far apply that failed)", prep: func(t *testing.T, dir, _ string) { writeMode(t, filepath.Join(dir, "a.txt"), "new", 0o644) },
			change: Change{Path: "a.txt", Kind: Modified, Type: TypeFile, Size: 3, Hash: h([]byte("new")), OldHash: h([]byte("old"))}, want: "done",
			check: func(t *testing.T, dir, _ string) { wantFile(t, filepath.Join(dir, "a.txt"), "new") }},
		{name: "a folder in the way", prep: func(t *testing.T, dir, _ string) { os.MkdirAll(filepath.Join(dir, "a.txt"), 0o755) },
			change: Change{Path: "a.txt", Kind: Added, Type: TypeFile, Size: 1, Hash: h([]byte("x"))}, content: "x", want: "refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			if tt.prep != nil {
				tt.prep(t, dir, outside)
			}
			r, err := WriteApplied(context.Background(), dir, []Change{tt.change}, tt.opts, fakeFetch(map[string]string{tt.change.Path: tt.content}))
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			switch {
			case len(r.Done) == 1:
				got = "done"
			case len(r.Refused) == 1:
				got = "refused"
			case len(r.Conflict) == 1:
				got = "conflict"
			}
			if got != tt.want {
				t.Fatalf("got %s, want %s: %+v", got, tt.want, r)
			}
			if tt.check != nil {
				tt.check(t, dir, outside)
			}
		})
	}
}

func wantFile(t *testing.T, path, want string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != want {
		t.Errorf("%s: %q %v, want %q", path, b, err, want)
	}
}

func wantGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists: %v", path, err)
	}
}

func wantNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".osaurus-apply-") {
			t.Errorf("left %s", e.Name())
		}
	}
}

// OpenChanged serves the changed file of the agent's view of an uploaded
// project, exactly as reviewed, and nothing else: no link at the path or
// on the way, no path out of the view, no other bytes, no folder of this
// machine's own.
func TestOpenChanged(t *testing.T) {
	ctx := context.Background()
	v, a, p, _, view := fixture(t, map[string]string{"a.txt": "a\n", "sub/b.txt": "b\n"})
	outside := t.TempDir()
	writeMode(t, filepath.Join(outside, "secret"), "SECRET\n", 0o644)
	write(t, filepath.Join(view, "a.txt"), "changed\n")
	os.Remove(filepath.Join(view, "sub/b.txt"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(view, "sub/b.txt"))
	os.Symlink(outside, filepath.Join(view, "through"))
	body := "changed\n"

	if _, err := v.OpenChanged(ctx, a, p, "a.txt", hashBytes([]byte(body)), int64(len(body))); !errors.Is(err, ErrInvalid) {
		t.Errorf("a project of this machine's: %v", err)
	}
	p.UploadedFrom = "laptop:/src"
	f, err := v.OpenChanged(ctx, a, p, "a.txt", hashBytes([]byte(body)), int64(len(body)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != body {
		t.Errorf("read %q", b)
	}
	secret := hashBytes([]byte("SECRET\n"))
	for _, tt := range []struct {
		rel, hash string
		size      int64
		want      error
	}{
		{"sub/b.txt", secret, 7, ErrInvalid},                                    // a link at the path
		{"through/secret", secret, 7, ErrInvalid},                               // a link on the way
		{"../repo/a.txt", hashBytes([]byte("a\n")), 2, ErrInvalid},              // out of the view
		{"sub/../a.txt", hashBytes([]byte(body)), int64(len(body)), ErrInvalid}, // not clean
		{"/etc/passwd", secret, 7, ErrInvalid},
		{"a.txt", hashBytes([]byte("a\n")), 2, errChanged},                   // not the reviewed bytes
		{"a.txt", hashBytes([]byte(body)), int64(len(body)) - 1, errChanged}, // nor size
		{"sub", secret, 7, ErrInvalid},                                       // a folder
	} {
		f, err := v.OpenChanged(ctx, a, p, tt.rel, tt.hash, tt.size)
		if f != nil {
			f.Close()
		}
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.rel, err, tt.want)
		}
	}
	if _, err := v.OpenChanged(ctx, agents.Agent{ID: "id-b", Name: "B", Slug: "b"}, p, "a.txt", hashBytes([]byte(body)), int64(len(body))); !errors.Is(err, ErrNotGranted) {
		t.Errorf("an agent with no view: %v", err)
	}
}
