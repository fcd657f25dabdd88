//go:build linux

package files

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

var bg = context.Background()

func TestReadFileSelections(t *testing.T) {
	e := newTestEnv(t)
	p := filepath.Join(e.base, "lines.txt")
	writeFile(t, p, "one\ntwo\nthree\nfour\nfive", 0o644) // last line unterminated
	empty := filepath.Join(e.base, "empty")
	writeFile(t, empty, "", 0o644)
	tests := []struct {
		name      string
		req       agentproto.ReadFileRequest
		data      string
		lines     int
		truncated bool
	}{
		{name: "whole", req: agentproto.ReadFileRequest{Path: p}, data: "one\ntwo\nthree\nfour\nfive"},
		{name: "byte range", req: agentproto.ReadFileRequest{Path: p, Offset: 4, Length: 3}, data: "two"},
		{name: "offset to end", req: agentproto.ReadFileRequest{Path: p, Offset: 19}, data: "five"},
		{name: "offset past end", req: agentproto.ReadFileRequest{Path: p, Offset: 100}, data: ""},
		{name: "max bytes", req: agentproto.ReadFileRequest{Path: p, MaxBytes: 5}, data: "one\nt", truncated: true},
		{name: "length within cap", req: agentproto.ReadFileRequest{Path: p, Length: 3, MaxBytes: 3}, data: "one"},
		{name: "length over cap, file ends at cap", req: agentproto.ReadFileRequest{Path: p, Offset: 19, Length: 10, MaxBytes: 4}, data: "five"},
		{name: "lines 2-3", req: agentproto.ReadFileRequest{Path: p, StartLine: 2, LineCount: 2}, data: "two\nthree\n", lines: 5},
		{name: "from line 4", req: agentproto.ReadFileRequest{Path: p, StartLine: 4}, data: "four\nfive", lines: 5},
		{name: "line count only", req: agentproto.ReadFileRequest{Path: p, LineCount: 1}, data: "one\n", lines: 5},
		{name: "past last line", req: agentproto.ReadFileRequest{Path: p, StartLine: 9}, data: "", lines: 5},
		{name: "tail 2", req: agentproto.ReadFileRequest{Path: p, TailLines: 2}, data: "four\nfive", lines: 5},
		{name: "tail more than file", req: agentproto.ReadFileRequest{Path: p, TailLines: 50}, data: "one\ntwo\nthree\nfour\nfive", lines: 5},
		{name: "tail capped keeps the end", req: agentproto.ReadFileRequest{Path: p, TailLines: 2, MaxBytes: 6}, data: "r\nfive", lines: 5, truncated: true},
		{name: "huge tail is bounded, same answer", req: agentproto.ReadFileRequest{Path: p, TailLines: 1 << 62}, data: "one\ntwo\nthree\nfour\nfive", lines: 5},
		{name: "huge tail under a byte cap keeps the end", req: agentproto.ReadFileRequest{Path: p, TailLines: 1 << 62, MaxBytes: 6}, data: "r\nfive", lines: 5, truncated: true},
		{name: "lines capped keep the start", req: agentproto.ReadFileRequest{Path: p, StartLine: 1, LineCount: 3, MaxBytes: 6}, data: "one\ntw", lines: 5, truncated: true},
		{name: "empty file lines", req: agentproto.ReadFileRequest{Path: empty, TailLines: 3}, data: "", lines: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := e.svc.ReadFile(bg, &tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if string(r.Data) != tc.data || r.TotalLines != tc.lines || r.Truncated != tc.truncated {
				t.Errorf("got %q lines %d truncated %v, want %q %d %v", r.Data, r.TotalLines, r.Truncated, tc.data, tc.lines, tc.truncated)
			}
			if want := int64(23); tc.req.Path == p && r.Size != want {
				t.Errorf("size %d, want %d", r.Size, want)
			}
		})
	}
	for _, bad := range []agentproto.ReadFileRequest{
		{Path: p, Offset: 1, StartLine: 1},
		{Path: p, TailLines: 1, StartLine: 1},
		{Path: p, Offset: -1},
	} {
		if _, err := e.svc.ReadFile(bg, &bad); !errors.Is(err, agentproto.ErrInvalid) {
			t.Errorf("%+v: err = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := e.svc.ReadFile(bg, &agentproto.ReadFileRequest{Path: e.base}); !errors.Is(err, agentproto.ErrIsDir) {
		t.Errorf("read dir: err = %v, want ErrIsDir", err)
	}
	if _, err := e.svc.ReadFile(bg, &agentproto.ReadFileRequest{Path: filepath.Join(e.base, "missing")}); !errors.Is(err, agentproto.ErrNotFound) {
		t.Errorf("read missing: err = %v, want ErrNotFound", err)
	}
}

func TestFileOpsRunAsUser(t *testing.T) {
	e := newTestEnv(t)
	alice := agentproto.Identity{User: "alice"}
	bobFile := filepath.Join(e.home("bob"), "secret")
	writeFile(t, bobFile, "bob's", 0o644)

	// The kernel checks alice's rights: bob's home is 0700.
	if _, err := e.svc.ReadFile(bg, &agentproto.ReadFileRequest{Identity: alice, Path: bobFile}); !errors.Is(err, agentproto.ErrPermission) {
		t.Fatalf("alice reads in bob's 0700 home: err = %v, want ErrPermission", err)
	}
	if _, err := e.svc.WriteFile(bg, &agentproto.WriteFileRequest{Identity: alice, Path: filepath.Join(e.home("bob"), "x"), Data: []byte("x")}); !errors.Is(err, agentproto.ErrPermission) {
		t.Fatalf("alice writes in bob's home: err = %v, want ErrPermission", err)
	}
	if _, err := e.svc.List(bg, &agentproto.ListRequest{Identity: alice, Path: e.home("bob")}); !errors.Is(err, agentproto.ErrPermission) {
		t.Fatalf("alice lists bob's home: err = %v, want ErrPermission", err)
	}
	if _, err := e.svc.WriteFile(bg, &agentproto.WriteFileRequest{Identity: alice, Path: e.db.Passwd, Data: []byte("pwned")}); !errors.Is(err, agentproto.ErrPermission) {
		t.Fatalf("alice replaces a root-owned file: err = %v, want ErrPermission", err)
	}
	// Group rights count: a devs-group directory is writable for alice.
	shared := filepath.Join(e.base, "shared")
	mustMkdir(t, shared, 0o770, 0)
	os.Chown(shared, 0, 3000)
	if _, err := e.svc.WriteFile(bg, &agentproto.WriteFileRequest{Identity: alice, Path: filepath.Join(shared, "f"), Data: []byte("x")}); err != nil {
		t.Fatalf("alice writes in a devs dir: %v", err)
	}

	// Relative paths start at the home; new files belong to the user.
	w, err := e.svc.WriteFile(bg, &agentproto.WriteFileRequest{Identity: alice, Path: "a/b/c.txt", Data: []byte("hello"), MakeParents: true})
	if err != nil || w.Size != 5 {
		t.Fatalf("write = %+v, %v", w, err)
	}
	for _, p := range []string{"a", "a/b", "a/b/c.txt"} {
		if uid := ownerOf(t, filepath.Join(e.home("alice"), p)); uid != aliceUID {
			t.Errorf("%s owned by %d, want alice", p, uid)
		}
	}
	st, err := e.svc.Stat(bg, &agentproto.PathRequest{Identity: alice, Path: "a/b/c.txt"})
	if err != nil || st.Type != "file" || st.Size != 5 || st.Mode != 0o644 || st.UID != aliceUID || st.GID != aliceUID || st.Name != "c.txt" {
		t.Fatalf("stat = %+v, %v", st, err)
	}

	// Replacing keeps the mode unless one is given; append adds.
	target := filepath.Join(e.home("alice"), "script.sh")
	if _, err := e.svc.WriteFile(bg, &agentproto.WriteFileRequest{Identity: alice, Path: target, Data: []byte("#!/bin/sh\n"), Mode: 0o750}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.WriteFile(bg, &agentproto.WriteFileRequest{Identity: alice, Path: target, Data: []byte("#!/bin/sh\necho\n")}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o750 {
		t.Errorf("mode after replace %v, want 0750", fi.Mode())
	}
	if w, err := e.svc.WriteFile(bg, &agentproto.WriteFileRequest{Identity: alice, Path: target, Data: []byte("exit 0\n"), Append: true}); err != nil || w.Size != 22 {
		t.Fatalf("append = %+v, %v", w, err)
	}
	if b, _ := os.ReadFile(target); string(b) != "#!/bin/sh\necho\nexit 0\n" {
		t.Fatalf("content %q", b)
	}
	ents, _ := os.ReadDir(e.home("alice"))
	for _, d := range ents {
		if strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("temp file left behind: %s", d.Name())
		}
	}

	// Writing through a symlink replaces its target, not the link.
	os.Symlink("script.sh", filepath.Join(e.home("alice"), "link"))
	if _, err := e.svc.WriteFile(bg, &agentproto.WriteFileRequest{Identity: alice, Path: "link", Data: []byte("new\n")}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "new\n" {
		t.Fatalf("target content %q", b)
	}
	if st, _ := e.svc.Stat(bg, &agentproto.PathRequest{Identity: alice, Path: "link"}); st.Type != "symlink" || st.SymlinkTarget != "script.sh" {
		t.Fatalf("link after write: %+v", st)
	}
	if _, err := e.svc.WriteFile(bg, &agentproto.WriteFileRequest{Identity: alice, Path: "a", Data: nil}); !errors.Is(err, agentproto.ErrIsDir) {
		t.Fatalf("write over a dir: err = %v, want ErrIsDir", err)
	}
}

func TestDirectoryOps(t *testing.T) {
	e := newTestEnv(t)
	alice := agentproto.Identity{User: "alice"}
	h := e.home("alice")
	if _, err := e.svc.Mkdir(bg, &agentproto.PathRequest{Identity: alice, Path: "d", Mode: 0o777}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(h, "d")); fi.Mode().Perm() != 0o777 {
		t.Errorf("mkdir mode %v, want 0777 despite the umask", fi.Mode())
	}
	if _, err := e.svc.Mkdir(bg, &agentproto.PathRequest{Identity: alice, Path: "d"}); !errors.Is(err, agentproto.ErrExists) {
		t.Errorf("mkdir existing: err = %v, want ErrExists", err)
	}
	if _, err := e.svc.Mkdir(bg, &agentproto.PathRequest{Identity: alice, Path: "d/x/y/z", Parents: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Mkdir(bg, &agentproto.PathRequest{Identity: alice, Path: "d/x/y/z", Parents: true}); err != nil {
		t.Errorf("mkdir -p existing: %v", err)
	}
	if _, err := e.svc.Mkdir(bg, &agentproto.PathRequest{Identity: alice, Path: "nope/q"}); !errors.Is(err, agentproto.ErrNotFound) {
		t.Errorf("mkdir without parents: err = %v, want ErrNotFound", err)
	}
	writeFile(t, filepath.Join(h, "d", "b.txt"), "b", 0o644)
	writeFile(t, filepath.Join(h, "d", "a.txt"), "a", 0o644)
	os.Symlink("/", filepath.Join(h, "d", "rootlink"))

	r, err := e.svc.List(bg, &agentproto.ListRequest{Identity: alice, Path: "d", MaxDepth: 10})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, en := range r.Entries {
		paths = append(paths, en.Path+":"+en.Type)
	}
	want := "a.txt:file b.txt:file rootlink:symlink x:dir x/y:dir x/y/z:dir"
	if got := strings.Join(paths, " "); got != want || r.Truncated {
		t.Fatalf("list = %s (truncated %v), want %s", got, r.Truncated, want)
	}
	r, _ = e.svc.List(bg, &agentproto.ListRequest{Identity: alice, Path: "d"})
	if len(r.Entries) != 4 {
		t.Errorf("default depth lists %d entries, want 4 direct children", len(r.Entries))
	}
	r, _ = e.svc.List(bg, &agentproto.ListRequest{Identity: alice, Path: "d", MaxDepth: 10, MaxEntries: 2})
	if len(r.Entries) != 2 || !r.Truncated {
		t.Errorf("max entries: %d entries, truncated %v", len(r.Entries), r.Truncated)
	}
	if _, err := e.svc.List(bg, &agentproto.ListRequest{Identity: alice, Path: "d/a.txt"}); !errors.Is(err, agentproto.ErrNotDir) {
		t.Errorf("list a file: err = %v, want ErrNotDir", err)
	}

	if _, err := e.svc.Move(bg, &agentproto.MoveRequest{Identity: alice, Src: "d/a.txt", Dst: "d/b.txt"}); !errors.Is(err, agentproto.ErrExists) {
		t.Errorf("move onto existing: err = %v, want ErrExists", err)
	}
	if _, err := e.svc.Move(bg, &agentproto.MoveRequest{Identity: alice, Src: "d/a.txt", Dst: "d/b.txt", Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(h, "d", "b.txt")); string(b) != "a" {
		t.Errorf("after overwrite move b.txt = %q", b)
	}
	if _, err := e.svc.Move(bg, &agentproto.MoveRequest{Identity: alice, Src: "d/missing", Dst: "d/q"}); !errors.Is(err, agentproto.ErrNotFound) {
		t.Errorf("move missing: err = %v, want ErrNotFound", err)
	}

	if _, err := e.svc.Remove(bg, &agentproto.PathRequest{Identity: alice, Path: "d/x"}); !errors.Is(err, agentproto.ErrNotEmpty) {
		t.Errorf("remove non-empty dir: err = %v, want ErrNotEmpty", err)
	}
	if _, err := e.svc.Remove(bg, &agentproto.PathRequest{Identity: alice, Path: "d/rootlink", Recursive: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatal("recursive remove of a symlink to / followed it")
	}
	if _, err := e.svc.Remove(bg, &agentproto.PathRequest{Identity: alice, Path: "d", Recursive: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(h, "d")); !os.IsNotExist(err) {
		t.Errorf("d still exists: %v", err)
	}
	if _, err := e.svc.Remove(bg, &agentproto.PathRequest{Identity: alice, Path: "d"}); !errors.Is(err, agentproto.ErrNotFound) {
		t.Errorf("remove missing: err = %v, want ErrNotFound", err)
	}
}

// Beneath Identity.Root no path may lead out: not "..", not an absolute
// path elsewhere, not a symlink to /etc or to a sibling directory.
func TestRootEscape(t *testing.T) {
	e := newTestEnv(t)
	ws := filepath.Join(e.base, "ws")
	sibling := filepath.Join(e.base, "sibling")
	mustMkdir(t, filepath.Join(ws, "sub"), 0o755, aliceUID)
	mustMkdir(t, sibling, 0o777, aliceUID)
	writeFile(t, filepath.Join(sibling, "file"), "outside", 0o666)
	writeFile(t, filepath.Join(ws, "sub", "in.txt"), "inside", 0o644)
	for link, target := range map[string]string{
		"etc":      "/etc",
		"sib":      "../sibling",
		"sibfile":  "../sibling/file",
		"hostname": "/etc/hostname",
		"inner":    "sub/in.txt",
	} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, user := range []string{"alice", ""} { // root is confined too
		id := agentproto.Identity{User: user, Root: ws}
		for _, p := range []string{"etc/passwd", "sib/file", "sibfile", "hostname", "../sibling/file", "sub/../../sibling/file", "/etc/passwd", filepath.Join(sibling, "file")} {
			if _, err := e.svc.ReadFile(bg, &agentproto.ReadFileRequest{Identity: id, Path: p}); !errors.Is(err, agentproto.ErrEscape) {
				t.Errorf("user %q read %s: err = %v, want ErrEscape", user, p, err)
			}
			if _, err := e.svc.WriteFile(bg, &agentproto.WriteFileRequest{Identity: id, Path: p, Data: []byte("x")}); !errors.Is(err, agentproto.ErrEscape) {
				t.Errorf("user %q write %s: err = %v, want ErrEscape", user, p, err)
			}
		}
		for _, p := range []string{"etc/x", "sib/new", "../new"} {
			if _, err := e.svc.WriteFile(bg, &agentproto.WriteFileRequest{Identity: id, Path: p, Data: []byte("x")}); !errors.Is(err, agentproto.ErrEscape) {
				t.Errorf("user %q write new %s: err = %v, want ErrEscape", user, p, err)
			}
		}
		if _, err := e.svc.List(bg, &agentproto.ListRequest{Identity: id, Path: "sib"}); !errors.Is(err, agentproto.ErrEscape) {
			t.Errorf("user %q list sib: err = %v, want ErrEscape", user, err)
		}
		if _, err := e.svc.Mkdir(bg, &agentproto.PathRequest{Identity: id, Path: "sib/d"}); !errors.Is(err, agentproto.ErrEscape) {
			t.Errorf("user %q mkdir sib/d: err = %v, want ErrEscape", user, err)
		}
		if _, err := e.svc.Move(bg, &agentproto.MoveRequest{Identity: id, Src: "sub/in.txt", Dst: "sib/stolen"}); !errors.Is(err, agentproto.ErrEscape) {
			t.Errorf("user %q move out: err = %v, want ErrEscape", user, err)
		}
		if _, err := e.svc.Remove(bg, &agentproto.PathRequest{Identity: id, Path: "sib/file"}); !errors.Is(err, agentproto.ErrEscape) {
			t.Errorf("user %q remove outside: err = %v, want ErrEscape", user, err)
		}
		// Paths inside work, relative or absolute, through inner links too.
		for _, p := range []string{"sub/in.txt", filepath.Join(ws, "sub/in.txt"), "inner", "sub/../sub/in.txt"} {
			r, err := e.svc.ReadFile(bg, &agentproto.ReadFileRequest{Identity: id, Path: p})
			if err != nil || string(r.Data) != "inside" {
				t.Errorf("user %q read %s: %+v, %v", user, p, r, err)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(sibling, "file")); string(b) != "outside" {
		t.Fatalf("sibling file changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(sibling, "new")); err == nil {
		t.Fatal("file created outside the root")
	}
	id := agentproto.Identity{User: "alice", Root: ws}
	if _, err := e.svc.WriteFile(bg, &agentproto.WriteFileRequest{Identity: id, Path: "sub/new.txt", Data: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	if st, err := e.svc.Stat(bg, &agentproto.PathRequest{Identity: id, Path: "sib"}); err != nil || st.Type != "symlink" {
		t.Errorf("stat of the escaping link itself = %+v, %v", st, err)
	}
	if _, err := e.svc.ReadFile(bg, &agentproto.ReadFileRequest{Identity: agentproto.Identity{Root: "relative/root"}, Path: "x"}); !errors.Is(err, agentproto.ErrInvalid) {
		t.Errorf("relative root: err = %v, want ErrInvalid", err)
	}
}

// The cost of a file operation on a fresh credential-switched thread,
// against the same operation as root on the calling thread.
func BenchmarkStat(b *testing.B) {
	for _, user := range []string{"", "alice"} {
		b.Run("user="+user, func(b *testing.B) {
			e := newTestEnv(b)
			req := &agentproto.PathRequest{Identity: agentproto.Identity{User: user}, Path: e.home("alice")}
			for b.Loop() {
				if _, err := e.svc.Stat(bg, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Every operation checks in one order: the host's block (writes only),
// then its arguments, then the user; so the error a caller gets for a
// request wrong in several ways is the same for each operation.
func TestFileOpChecksInOrder(t *testing.T) {
	e := newTestEnv(t)
	errBlocked := errors.New("blocked by the host")
	e.svc.cfg.Limit = func(user string) error {
		if user == "alice" {
			return errBlocked
		}
		return nil
	}
	ctx := context.Background()
	alice := agentproto.Identity{User: "alice"}
	nobody := agentproto.Identity{User: "nobody-here"}
	bob := agentproto.Identity{User: "bob"}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"write: block before a bad mode", func() error {
			_, err := e.svc.WriteFile(ctx, &agentproto.WriteFileRequest{Identity: alice, Path: "x", Mode: 0o10000})
			return err
		}, errBlocked},
		{"write: bad mode before the user", func() error {
			_, err := e.svc.WriteFile(ctx, &agentproto.WriteFileRequest{Identity: nobody, Path: "x", Mode: 0o10000})
			return err
		}, agentproto.ErrInvalid},
		{"mkdir: block before a bad mode", func() error {
			_, err := e.svc.Mkdir(ctx, &agentproto.PathRequest{Identity: alice, Path: "d", Mode: 0o10000})
			return err
		}, errBlocked},
		{"mkdir: bad mode before the user", func() error {
			_, err := e.svc.Mkdir(ctx, &agentproto.PathRequest{Identity: nobody, Path: "d", Mode: 0o10000})
			return err
		}, agentproto.ErrInvalid},
		{"move: block", func() error {
			_, err := e.svc.Move(ctx, &agentproto.MoveRequest{Identity: alice, Src: "a", Dst: "b"})
			return err
		}, errBlocked},
		{"read: bad range before the user", func() error {
			_, err := e.svc.ReadFile(ctx, &agentproto.ReadFileRequest{Identity: nobody, Path: "x", Offset: -1})
			return err
		}, agentproto.ErrInvalid},
		{"read: not blocked (reads are not writes)", func() error {
			_, err := e.svc.ReadFile(ctx, &agentproto.ReadFileRequest{Identity: alice, Path: "missing"})
			return err
		}, fs.ErrNotExist},
		{"list: bad depth before the user", func() error {
			_, err := e.svc.List(ctx, &agentproto.ListRequest{Identity: nobody, MaxDepth: -1})
			return err
		}, agentproto.ErrInvalid},
		{"stat: unknown user", func() error {
			_, err := e.svc.Stat(ctx, &agentproto.PathRequest{Identity: nobody, Path: "x"})
			return err
		}, agentproto.ErrNoSuchUser},
		{"remove: a path outside the root", func() error {
			_, err := e.svc.Remove(ctx, &agentproto.PathRequest{Identity: agentproto.Identity{User: bob.User, Root: e.home("bob")}, Path: "/etc/passwd"})
			return err
		}, agentproto.ErrEscape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
		})
	}
}
