package ext4

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testSize keeps test images quick to lay out; the sparseness test uses the
// real default.
const testSize int64 = 1 << 30

// entry is one tar member for a test archive.
type entry struct {
	name     string
	typ      byte
	mode     int64
	uid, gid int
	data     []byte
	link     string // symlink or hard link target
	mtime    time.Time
}

func makeTar(t testing.TB, entries []entry, compress bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if compress {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, e := range entries {
		mt := e.mtime
		if mt.IsZero() {
			mt = time.Unix(1700000000, 0)
		}
		hdr := &tar.Header{
			Name:     e.name,
			Typeflag: e.typ,
			Mode:     e.mode,
			Uid:      e.uid,
			Gid:      e.gid,
			Linkname: e.link,
			ModTime:  mt,
			Format:   tar.FormatPAX,
		}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.data))
		}
		if e.typ == tar.TypeChar {
			hdr.Devmajor, hdr.Devminor = 1, 3
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("tar header %s: %v", e.name, err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				t.Fatalf("tar data %s: %v", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// e2tool finds an e2fsprogs binary; they live in sbin, which is often not
// on a non-root PATH.
func e2tool(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/opt/homebrew/opt/e2fsprogs/sbin", "/usr/local/opt/e2fsprogs/sbin"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("%s not found: install e2fsprogs (apt-get install -y e2fsprogs, or brew install e2fsprogs)", name)
	return ""
}

func fsck(t testing.TB, img string) {
	t.Helper()
	out, err := exec.Command(e2tool(t, "e2fsck"), "-fn", img).CombinedOutput()
	if err != nil {
		t.Fatalf("e2fsck -fn reports problems (%v):\n%s", err, out)
	}
}

func debugfs(t testing.TB, img, request string) []byte {
	t.Helper()
	cmd := exec.Command(e2tool(t, "debugfs"), "-R", request, img)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("debugfs -R %q: %v\n%s", request, err, stderr.String())
	}
	if strings.Contains(stderr.String(), "File not found") {
		t.Fatalf("debugfs -R %q: %s", request, stderr.String())
	}
	return out
}

type inodeStat struct {
	typ        string
	mode       uint32
	uid, gid   int
	size       int64
	mtime      int64
	fastTarget string
}

var (
	reType   = regexp.MustCompile(`Type: (\S+)\s+Mode:\s+(\d+)`)
	reOwner  = regexp.MustCompile(`User:\s+(\d+)\s+Group:\s+(\d+).*Size: (\d+)`)
	reMtime  = regexp.MustCompile(`(?m)^\s*mtime: 0x([0-9a-f]+)`)
	reTarget = regexp.MustCompile(`Fast link dest: "(.*)"`)
)

func stat(t testing.TB, img, p string) inodeStat {
	t.Helper()
	out := string(debugfs(t, img, fmt.Sprintf("stat %q", "/"+p)))
	var st inodeStat
	m := reType.FindStringSubmatch(out)
	o := reOwner.FindStringSubmatch(out)
	mt := reMtime.FindStringSubmatch(out)
	if m == nil || o == nil || mt == nil {
		t.Fatalf("cannot parse debugfs stat of %s:\n%s", p, out)
	}
	st.typ = m[1]
	mode, _ := strconv.ParseUint(m[2], 8, 32)
	st.mode = uint32(mode)
	st.uid, _ = strconv.Atoi(o[1])
	st.gid, _ = strconv.Atoi(o[2])
	st.size, _ = strconv.ParseInt(o[3], 10, 64)
	st.mtime, _ = strconv.ParseInt(mt[1], 16, 64)
	if tm := reTarget.FindStringSubmatch(out); tm != nil {
		st.fastTarget = tm[1]
	}
	return st
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestBuildFromTar(t *testing.T) {
	big := randomBytes(24<<20+123, 1)
	// Zero blocks in the middle of a file must read back as zeros even
	// though the sparse backend never writes them.
	copy(big[8<<20:], make([]byte, 1<<20))
	longTarget := "../../" + strings.Repeat("very-long-directory-name/", 4) + "target"
	mtime := time.Unix(1600000000, 0)

	entries := []entry{
		{name: "./", typ: tar.TypeDir, mode: 0o755},
		{name: "./etc/", typ: tar.TypeDir, mode: 0o755},
		{name: "./etc/hostname", typ: tar.TypeReg, mode: 0o644, data: []byte("from-tar\n")},
		{name: "./etc/passwd", typ: tar.TypeReg, mode: 0o644, data: []byte("root:x:0:0:root:/root:/bin/sh\n"), mtime: mtime},
		{name: "./etc/shadow", typ: tar.TypeReg, mode: 0o640, gid: 42, data: []byte("root:*:19000:0:99999:7:::\n")},
		{name: "./etc/localtime", typ: tar.TypeSymlink, link: "/usr/share/zoneinfo/Etc/UTC"},
		{name: "./tmp/", typ: tar.TypeDir, mode: 0o1777},
		{name: "./var/mail/", typ: tar.TypeDir, mode: 0o2775, gid: 8},
		{name: "./home/alice/", typ: tar.TypeDir, mode: 0o750, uid: 1000, gid: 1000},
		{name: "./home/bob/", typ: tar.TypeDir, mode: 0o700, uid: 100000, gid: 100000},
		{name: "./home/alice/.profile", typ: tar.TypeReg, mode: 0o600, uid: 1000, gid: 1000, data: []byte("export A=1\n")},
		{name: "usr/bin/passwd", typ: tar.TypeReg, mode: 0o4755, data: []byte("\x7fELF passwd")},
		{name: "usr/bin/wall", typ: tar.TypeReg, mode: 0o2755, gid: 5, data: []byte("\x7fELF wall")},
		{name: "usr/bin/perl", typ: tar.TypeReg, mode: 0o755, data: []byte("\x7fELF perl")},
		{name: "usr/bin/perl5.36", typ: tar.TypeLink, mode: 0o755, link: "usr/bin/perl"},
		{name: "usr/bin/sh", typ: tar.TypeSymlink, link: "dash"},
		{name: "lib", typ: tar.TypeSymlink, link: "usr/lib"},
		{name: "usr/lib/deep/a/b/c/d/e/f/g/long-link", typ: tar.TypeSymlink, link: longTarget},
		{name: "usr/lib/empty", typ: tar.TypeReg, mode: 0o644},
		{name: "usr/lib/big.bin", typ: tar.TypeReg, mode: 0o644, data: big},
		{name: "usr/share/doc/ünï code.txt", typ: tar.TypeReg, mode: 0o644, data: []byte("utf-8 name")},
		// Parents that are symlinks are followed inside the image, even
		// when the target is absolute or climbs above the root.
		{name: "lib/modules/6.1/modules.dep", typ: tar.TypeReg, mode: 0o644, data: []byte("deps")},
		{name: "usr/sbin/", typ: tar.TypeDir, mode: 0o755},
		{name: "sbin", typ: tar.TypeSymlink, link: "/usr/sbin"},
		{name: "evil", typ: tar.TypeSymlink, link: "../../../.."},
		{name: "evil/etc/evil-file", typ: tar.TypeReg, mode: 0o644, data: []byte("confined")},
		{name: "dev/null", typ: tar.TypeChar, mode: 0o666},
		{name: "run/initctl", typ: tar.TypeFifo, mode: 0o600},
		// Directory entry after its contents: attributes and time still apply.
		{name: "./usr/bin/", typ: tar.TypeDir, mode: 0o755, mtime: mtime},
	}
	// One directory spanning many blocks.
	for i := range 1500 {
		entries = append(entries, entry{
			name: fmt.Sprintf("usr/lib/many/module-%04d.py", i), typ: tar.TypeReg, mode: 0o644,
			data: []byte(fmt.Sprintf("# module %d\n", i)),
		})
	}
	extra := []File{
		{Path: "/usr/local/bin/osaurus-agent", Mode: 0o755, Data: []byte("\x7fELF agent")},
		{Path: "etc/hostname", Mode: 0o644, Data: []byte("sandbox\n")},
		{Path: "etc/osaurus/agent.json", Mode: 0o600, UID: 0, GID: 0, Data: []byte(`{"a":1}`)},
		{Path: "sbin/osaurus-init", Mode: 0o700, Data: []byte("#!/bin/sh\n")},
		{Path: "lib/systemd/system/osaurus.service", Mode: 0o644, Data: []byte("[Unit]\n")},
	}

	type want struct {
		path     string
		typ      string
		mode     uint32
		uid, gid int
		data     []byte
		target   string
		mtime    time.Time
	}
	wants := []want{
		{path: "etc/hostname", typ: "regular", mode: 0o644, data: []byte("sandbox\n")},
		{path: "etc/passwd", typ: "regular", mode: 0o644, data: []byte("root:x:0:0:root:/root:/bin/sh\n"), mtime: mtime},
		{path: "etc/shadow", typ: "regular", mode: 0o640, gid: 42, data: []byte("root:*:19000:0:99999:7:::\n")},
		{path: "etc/localtime", typ: "symlink", target: "/usr/share/zoneinfo/Etc/UTC"},
		{path: "tmp", typ: "directory", mode: 0o1777},
		{path: "var", typ: "directory", mode: 0o755},
		{path: "var/mail", typ: "directory", mode: 0o2775, gid: 8},
		{path: "home/alice", typ: "directory", mode: 0o750, uid: 1000, gid: 1000},
		{path: "home/bob", typ: "directory", mode: 0o700, uid: 100000, gid: 100000},
		{path: "home/alice/.profile", typ: "regular", mode: 0o600, uid: 1000, gid: 1000, data: []byte("export A=1\n")},
		{path: "usr/bin/passwd", typ: "regular", mode: 0o4755, data: []byte("\x7fELF passwd")},
		{path: "usr/bin/wall", typ: "regular", mode: 0o2755, gid: 5, data: []byte("\x7fELF wall")},
		{path: "usr/bin/perl5.36", typ: "regular", mode: 0o755, data: []byte("\x7fELF perl")},
		{path: "usr/bin/sh", typ: "symlink", target: "dash"},
		{path: "usr/bin", typ: "directory", mode: 0o755, mtime: mtime},
		{path: "lib", typ: "symlink", target: "usr/lib"},
		{path: "usr/lib/deep/a/b/c/d/e/f/g", typ: "directory", mode: 0o755},
		{path: "usr/lib/deep/a/b/c/d/e/f/g/long-link", typ: "symlink", target: longTarget},
		{path: "usr/lib/empty", typ: "regular", mode: 0o644, data: []byte{}},
		{path: "usr/lib/big.bin", typ: "regular", mode: 0o644, data: big},
		{path: "usr/lib/many/module-0000.py", typ: "regular", mode: 0o644, data: []byte("# module 0\n")},
		{path: "usr/lib/many/module-1499.py", typ: "regular", mode: 0o644, data: []byte("# module 1499\n")},
		{path: "usr/share/doc/ünï code.txt", typ: "regular", mode: 0o644, data: []byte("utf-8 name")},
		{path: "usr/lib/modules/6.1/modules.dep", typ: "regular", mode: 0o644, data: []byte("deps")},
		{path: "etc/evil-file", typ: "regular", mode: 0o644, data: []byte("confined")},
		{path: "usr/sbin/osaurus-init", typ: "regular", mode: 0o700, data: []byte("#!/bin/sh\n")},
		{path: "usr/lib/systemd/system/osaurus.service", typ: "regular", mode: 0o644, data: []byte("[Unit]\n")},
		{path: "usr/local/bin/osaurus-agent", typ: "regular", mode: 0o755, data: []byte("\x7fELF agent")},
		{path: "etc/osaurus", typ: "directory", mode: 0o755},
		{path: "etc/osaurus/agent.json", typ: "regular", mode: 0o600, data: []byte(`{"a":1}`)},
	}
	wantRes := Result{
		Files:           1500 + 11 + 1 + len(extra), // tar regular files (less the shadowed etc/hostname), the copied link, extras
		Dirs:            29,
		Symlinks:        6,
		HardlinksCopied: 1,
		Skipped:         2,
	}

	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", compress), func(t *testing.T) {
			dir := t.TempDir()
			img := filepath.Join(dir, "root.img")
			res, err := BuildFromTar(context.Background(), img, bytes.NewReader(makeTar(t, entries, compress)),
				Options{Size: testSize, Label: "osaurus-root", Extra: extra})
			if err != nil {
				t.Fatalf("BuildFromTar: %v", err)
			}
			if res != wantRes {
				t.Errorf("Result = %+v, want %+v", res, wantRes)
			}
			fsck(t, img)
			if out := debugfs(t, img, "stats"); !strings.Contains(string(out), "Filesystem volume name:   osaurus-root") {
				t.Errorf("label not set:\n%s", out)
			}
			for _, w := range wants {
				t.Run(w.path, func(t *testing.T) {
					st := stat(t, img, w.path)
					if st.typ != w.typ {
						t.Fatalf("type = %s, want %s", st.typ, w.typ)
					}
					if w.typ == "symlink" {
						target := st.fastTarget
						if target == "" {
							target = string(debugfs(t, img, fmt.Sprintf("cat %q", "/"+w.path)))
						}
						if target != w.target {
							t.Errorf("symlink target = %q, want %q", target, w.target)
						}
						return
					}
					if st.mode != w.mode || st.uid != w.uid || st.gid != w.gid {
						t.Errorf("mode/uid/gid = %#o %d:%d, want %#o %d:%d", st.mode, st.uid, st.gid, w.mode, w.uid, w.gid)
					}
					if !w.mtime.IsZero() && st.mtime != w.mtime.Unix() {
						t.Errorf("mtime = %d, want %d", st.mtime, w.mtime.Unix())
					}
					if w.data != nil {
						got := debugfs(t, img, fmt.Sprintf("cat %q", "/"+w.path))
						if st.size != int64(len(w.data)) || !bytes.Equal(got, w.data) {
							t.Errorf("content differs: size %d, read %d bytes, want %d bytes", st.size, len(got), len(w.data))
						}
					}
				})
			}
			for _, absent := range []string{"dev/null", "run/initctl"} {
				out, _ := exec.Command(e2tool(t, "debugfs"), "-R", "stat /"+absent, img).CombinedOutput()
				if !strings.Contains(string(out), "File not found") {
					t.Errorf("%s should have been skipped, debugfs says:\n%s", absent, out)
				}
			}
		})
	}
}

func TestBuildFromTarRejectsEscapes(t *testing.T) {
	tests := []struct {
		name    string
		entries []entry
		extra   []File
	}{
		{name: "dotdot prefix", entries: []entry{{name: "../etc/passwd", typ: tar.TypeReg, mode: 0o644}}},
		{name: "dot then dotdot", entries: []entry{{name: "./../x", typ: tar.TypeReg, mode: 0o644}}},
		{name: "climbs after descending", entries: []entry{{name: "usr/../../x", typ: tar.TypeDir, mode: 0o755}}},
		{name: "absolute dotdot", entries: []entry{{name: "/../x", typ: tar.TypeSymlink, link: "y"}}},
		{name: "hard link target", entries: []entry{{name: "usr/x", typ: tar.TypeLink, link: "../../etc/shadow"}}},
		{name: "extra file", extra: []File{{Path: "../agent", Mode: 0o755}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			img := filepath.Join(dir, "root.img")
			_, err := BuildFromTar(context.Background(), img, bytes.NewReader(makeTar(t, tt.entries, false)),
				Options{Size: testSize, Extra: tt.extra})
			if !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("err = %v, want ErrUnsafePath", err)
			}
			assertDirEmpty(t, dir)
		})
	}
}

func TestCleanPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"./usr/bin/x", "usr/bin/x"},
		{"usr/bin/x", "usr/bin/x"},
		{"/usr//bin/./x", "usr/bin/x"},
		{"./", ""},
		{"usr/lib/../bin/", "usr/bin"},
	}
	for _, tt := range tests {
		got, err := cleanPath(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("cleanPath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func assertDirEmpty(t *testing.T, dir string) {
	t.Helper()
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind: %s", e.Name())
	}
}

func TestBuildFromTarIsSparse(t *testing.T) {
	img := filepath.Join(t.TempDir(), "root.img")
	tarball := makeTar(t, []entry{
		{name: "etc/os-release", typ: tar.TypeReg, mode: 0o644, data: []byte("ID=debian\n")},
		{name: "usr/lib/blob", typ: tar.TypeReg, mode: 0o644, data: randomBytes(4<<20, 2)},
	}, true)
	if _, err := BuildFromTar(context.Background(), img, bytes.NewReader(tarball), Options{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != DefaultSize {
		t.Errorf("apparent size = %d, want %d", fi.Size(), DefaultSize)
	}
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Fatalf("no Stat_t for %s", img)
	}
	// 4 MiB of content plus metadata; a non-sparse image would be 8 GiB and
	// eagerly zeroed tables alone would be hundreds of MiB.
	allocated := sys.Blocks * 512
	if allocated > 32<<20 {
		t.Errorf("image occupies %d MiB on disk, want < 32 MiB", allocated>>20)
	}
	t.Logf("8 GiB image occupies %.1f MiB", float64(allocated)/(1<<20))
	fsck(t, img)
}

// cancelAfter cancels ctx once n bytes have been read through it.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n -= n
	if c.n <= 0 {
		c.cancel()
	}
	return n, err
}

func TestBuildFromTarCancel(t *testing.T) {
	var entries []entry
	for i := range 200 {
		entries = append(entries, entry{name: fmt.Sprintf("f%03d", i), typ: tar.TypeReg, mode: 0o644, data: randomBytes(64<<10, uint64(i))})
	}
	tarball := makeTar(t, entries, false)

	tests := []struct {
		name     string
		existing bool // a previous image at dst must survive the failed build
		reader   func(cancel context.CancelFunc) io.Reader
	}{
		{name: "before start", reader: func(cancel context.CancelFunc) io.Reader {
			cancel()
			return bytes.NewReader(tarball)
		}},
		{name: "mid stream", reader: func(cancel context.CancelFunc) io.Reader {
			return &cancelAfter{r: bytes.NewReader(tarball), n: len(tarball) / 2, cancel: cancel}
		}},
		{name: "mid stream keeps old image", existing: true, reader: func(cancel context.CancelFunc) io.Reader {
			return &cancelAfter{r: bytes.NewReader(tarball), n: len(tarball) / 2, cancel: cancel}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			img := filepath.Join(dir, "root.img")
			if tt.existing {
				if err := os.WriteFile(img, []byte("old image"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := BuildFromTar(ctx, img, tt.reader(cancel), Options{Size: testSize})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if tt.existing {
				got, err := os.ReadFile(img)
				if err != nil || string(got) != "old image" {
					t.Fatalf("previous image clobbered: %q, %v", got, err)
				}
				if err := os.Remove(img); err != nil {
					t.Fatal(err)
				}
			}
			assertDirEmpty(t, dir)
		})
	}
}

func TestBuildFromTarErrors(t *testing.T) {
	tests := []struct {
		name    string
		entries []entry
		opts    Options
		wantErr error
	}{
		{name: "too small", opts: Options{Size: 64 << 20}, wantErr: ErrInvalidOptions},
		{name: "label too long", opts: Options{Size: testSize, Label: "a-label-longer-than-16"}, wantErr: ErrInvalidOptions},
		{name: "extra is a symlink", opts: Options{Size: testSize, Extra: []File{{Path: "x", Mode: fs.ModeSymlink | 0o777}}}, wantErr: ErrInvalidOptions},
		{name: "dangling hard link", entries: []entry{{name: "a", typ: tar.TypeLink, link: "missing"}}, opts: Options{Size: testSize}},
		{name: "duplicate file", entries: []entry{
			{name: "a", typ: tar.TypeReg, mode: 0o644},
			{name: "./a", typ: tar.TypeReg, mode: 0o644},
		}, opts: Options{Size: testSize}, wantErr: ErrDuplicateEntry},
		{name: "duplicate extra", opts: Options{Size: testSize, Extra: []File{{Path: "a", Mode: 0o644}, {Path: "/a", Mode: 0o644}}}, wantErr: ErrInvalidOptions},
		{name: "file under a file", entries: []entry{
			{name: "a", typ: tar.TypeReg, mode: 0o644},
			{name: "a/b", typ: tar.TypeReg, mode: 0o644},
		}, opts: Options{Size: testSize}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			img := filepath.Join(dir, "root.img")
			_, err := BuildFromTar(context.Background(), img, bytes.NewReader(makeTar(t, tt.entries, false)), tt.opts)
			if err == nil {
				t.Fatal("BuildFromTar succeeded, want error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			assertDirEmpty(t, dir)
		})
	}
}

// benchTree is ~5,000 small files in 100 directories plus a few MiB-sized
// ones, roughly the shape of a package-heavy part of a root filesystem.
func benchTree(tb testing.TB) ([]byte, int64) {
	var entries []entry
	var total int64
	for d := range 100 {
		for f := range 50 {
			data := randomBytes(200+(d*50+f)%4000, uint64(d*50+f))
			entries = append(entries, entry{name: fmt.Sprintf("usr/lib/pkg%03d/mod%02d.py", d, f), typ: tar.TypeReg, mode: 0o644, data: data})
			total += int64(len(data))
		}
		entries = append(entries, entry{name: fmt.Sprintf("usr/lib/pkg%03d/link", d), typ: tar.TypeSymlink, link: "mod00.py"})
	}
	for i := range 4 {
		data := randomBytes(3<<20, uint64(10000+i))
		entries = append(entries, entry{name: fmt.Sprintf("usr/lib/libbig%d.so", i), typ: tar.TypeReg, mode: 0o755, data: data})
		total += int64(len(data))
	}
	return makeTar(tb, entries, true), total
}

func BenchmarkBuildFromTar(b *testing.B) {
	tarball, total := benchTree(b)
	dir := b.TempDir()
	b.SetBytes(total)
	for b.Loop() {
		if _, err := BuildFromTar(context.Background(), filepath.Join(dir, "root.img"), bytes.NewReader(tarball), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
