package initramfs

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// sample writes an archive exercising every entry type.
func sample(t testing.TB, opts ...Option) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, opts...)
	steps := []func() error{
		func() error { return w.AddDir("/etc", 0o700) },
		func() error { return w.AddFile("/etc/hostname", 0o644, []byte("sandbox\n")) },
		func() error {
			return w.AddFile("usr/local/bin/tool", 0o755|fs.ModeSetuid, []byte("#!/bin/sh\necho hi\n"))
		},
		func() error {
			return w.AddFileReader("/usr/local/share/big", 0o600, strings.NewReader(strings.Repeat("x", 5000)), 5000)
		},
		func() error { return w.AddFile("/empty", 0o644, nil) },
		func() error { return w.AddSymlink("/bin", "usr/local/bin") },
		func() error { return w.AddDir("/tmp", 0o777|fs.ModeSticky) },
		func() error { return w.AddCharDevice("/dev/console", 0o600, 5, 1) },
	}
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestWriterEntries(t *testing.T) {
	got := readNewc(t, sample(t))
	want := []struct {
		name string
		mode uint32
		data string
	}{
		{"etc", 0o040700, ""},
		{"etc/hostname", 0o100644, "sandbox\n"},
		{"usr", 0o040755, ""},
		{"usr/local", 0o040755, ""},
		{"usr/local/bin", 0o040755, ""},
		{"usr/local/bin/tool", 0o104755, "#!/bin/sh\necho hi\n"},
		{"usr/local/share", 0o040755, ""},
		{"usr/local/share/big", 0o100600, strings.Repeat("x", 5000)},
		{"empty", 0o100644, ""},
		{"bin", 0o120777, "usr/local/bin"},
		{"tmp", 0o041777, ""},
		{"dev", 0o040755, ""},
		{"dev/console", 0o020600, ""},
	}
	if len(got) != len(want) {
		var names []string
		for _, e := range got {
			names = append(names, e.Name)
		}
		t.Fatalf("archive has %d entries %v, want %d", len(got), names, len(want))
	}
	inodes := map[uint32]string{}
	for i, w := range want {
		e := got[i]
		if e.Name != w.name || e.Mode != w.mode || e.Data != w.data {
			t.Errorf("entry %d = %s %o (%d bytes), want %s %o (%d bytes)", i, e.Name, e.Mode, len(e.Data), w.name, w.mode, len(w.data))
		}
		if e.UID != 0 || e.GID != 0 || e.Mtime != 0 {
			t.Errorf("%s: uid %d gid %d mtime %d, want root-owned with mtime 0", e.Name, e.UID, e.GID, e.Mtime)
		}
		// The kernel hard-links regular files sharing an inode when nlink > 1.
		if e.Mode&0o170000 != 0o040000 && e.Nlink != 1 {
			t.Errorf("%s: nlink %d, want 1", e.Name, e.Nlink)
		}
		if prev, dup := inodes[e.Ino]; dup || e.Ino == 0 {
			t.Errorf("%s: inode %d already used by %q", e.Name, e.Ino, prev)
		}
		inodes[e.Ino] = e.Name
	}
	if c := got[len(got)-1]; c.RdevMajor != 5 || c.RdevMinor != 1 {
		t.Errorf("dev/console is %d:%d, want 5:1", c.RdevMajor, c.RdevMinor)
	}
}

func TestWriterDeterministic(t *testing.T) {
	if !bytes.Equal(sample(t), sample(t)) {
		t.Fatal("same input gave different archives")
	}
}

func TestWriterGzip(t *testing.T) {
	plain := sample(t)
	zr, err := gzip.NewReader(bytes.NewReader(sample(t, WithGzip(gzip.BestSpeed))))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain) {
		t.Fatal("gzip archive does not decompress to the plain archive")
	}
}

func TestWriterAddDirIdempotent(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, step := range []func() error{
		func() error { return w.AddFile("/a/b/f", 0o644, []byte("x")) },
		func() error { return w.AddDir("/a", 0o755) },
		func() error { return w.AddDir("a/b/", fs.ModeDir|0o755) },
		func() error { return w.AddFile("/a/b/g", 0o644, nil) },
		w.Close,
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, e := range readNewc(t, buf.Bytes()) {
		names = append(names, e.Name)
	}
	if want := []string{"a", "a/b", "a/b/f", "a/b/g"}; !slices.Equal(names, want) {
		t.Fatalf("entries %v, want %v", names, want)
	}
}

func TestWriterErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(w *Writer) error
		add   func(w *Writer) error
		want  error
	}{
		{"duplicate file", func(w *Writer) error { return w.AddFile("/init", 0o755, nil) },
			func(w *Writer) error { return w.AddFile("init", 0o644, nil) }, ErrExists},
		{"file over dir", func(w *Writer) error { return w.AddDir("/dev", 0o755) },
			func(w *Writer) error { return w.AddSymlink("/dev", "x") }, ErrExists},
		{"dir with other mode", func(w *Writer) error { return w.AddFile("/a/b", 0o644, nil) },
			func(w *Writer) error { return w.AddDir("/a", 0o700) }, ErrExists},
		{"dir over file", func(w *Writer) error { return w.AddFile("/a", 0o644, nil) },
			func(w *Writer) error { return w.AddDir("/a", 0o644) }, ErrExists},
		{"parent is a file", func(w *Writer) error { return w.AddFile("/a", 0o644, nil) },
			func(w *Writer) error { return w.AddFile("/a/b", 0o644, nil) }, ErrInvalidPath},
		{"parent is a symlink", func(w *Writer) error { return w.AddSymlink("/bin", "usr/bin") },
			func(w *Writer) error { return w.AddFile("/bin/sh", 0o755, nil) }, ErrInvalidPath},
		{"empty path", nil, func(w *Writer) error { return w.AddFile("", 0o644, nil) }, ErrInvalidPath},
		{"root", nil, func(w *Writer) error { return w.AddDir("/", 0o755) }, ErrInvalidPath},
		{"dot dot", nil, func(w *Writer) error { return w.AddFile("../etc/passwd", 0o644, nil) }, ErrInvalidPath},
		{"inner dot dot", nil, func(w *Writer) error { return w.AddFile("/a/../../b", 0o644, nil) }, ErrInvalidPath},
		{"trailer name", nil, func(w *Writer) error { return w.AddFile("TRAILER!!!", 0o644, nil) }, ErrInvalidPath},
		{"after close", func(w *Writer) error { return w.Close() },
			func(w *Writer) error { return w.AddFile("/x", 0o644, nil) }, ErrClosed},
		{"short reader", nil,
			func(w *Writer) error { return w.AddFileReader("/x", 0o644, strings.NewReader("abc"), 4) }, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWriter(io.Discard)
			if tt.setup != nil {
				if err := tt.setup(w); err != nil {
					t.Fatal(err)
				}
			}
			if err := tt.add(w); !errors.Is(err, tt.want) {
				t.Fatalf("got error %v, want %v", err, tt.want)
			}
		})
	}
}

func TestWriterWrongModeType(t *testing.T) {
	w := NewWriter(io.Discard)
	if err := w.AddFile("/x", fs.ModeDir|0o755, nil); err == nil {
		t.Error("AddFile accepted a directory mode")
	}
	if err := w.AddDir("/y", fs.ModeSymlink|0o755); err == nil {
		t.Error("AddDir accepted a symlink mode")
	}
}

func TestWriterStickyError(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.AddFileReader("/x", 0o644, strings.NewReader("ab"), 10); err == nil {
		t.Fatal("short reader accepted")
	}
	if err := w.AddFile("/y", 0o644, nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("add after failure: %v, want the earlier error", err)
	}
	if err := w.Close(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Close after failure: %v, want the earlier error", err)
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n < len(p) {
		n := f.n
		f.n = 0
		return n, syscall.ENOSPC
	}
	f.n -= len(p)
	return len(p), nil
}

func TestWriterPropagatesWriteError(t *testing.T) {
	w := NewWriter(&failWriter{n: 200})
	err := w.AddFile("/a", 0o644, bytes.Repeat([]byte{1}, 1000))
	if err == nil {
		err = w.Close()
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("got %v, want ENOSPC", err)
	}
}

// requireCpio returns the path of the cpio tool, failing with an install
// hint when it is missing.
func requireCpio(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("cpio")
	if err != nil {
		t.Fatal("cpio not found: install it (`apt-get install -y cpio`, or `brew install cpio` on macOS) to check archives against GNU cpio")
	}
	return p
}

// extract unpacks an archive with the system cpio tool.
func extract(t *testing.T, archive []byte) string {
	t.Helper()
	cpio := requireCpio(t)
	dir := t.TempDir()
	cmd := exec.Command(cpio, "-idm", "--quiet", "--no-absolute-filenames")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(archive)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -idm: %v\n%s", err, out)
	}
	return dir
}

func TestWriterExtractWithCpio(t *testing.T) {
	dir := extract(t, sample(t))
	// cpio applies the archive's mode to whatever it creates, so read what
	// the umask could not have touched.
	for _, tt := range []struct {
		path string
		mode fs.FileMode
		data string
	}{
		{"etc", fs.ModeDir | 0o700, ""},
		{"etc/hostname", 0o644, "sandbox\n"},
		{"usr/local/bin/tool", fs.ModeSetuid | 0o755, "#!/bin/sh\necho hi\n"},
		{"usr/local/share/big", 0o600, strings.Repeat("x", 5000)},
		{"usr/local/share", fs.ModeDir | 0o755, ""},
		{"empty", 0o644, ""},
		{"tmp", fs.ModeDir | fs.ModeSticky | 0o777, ""},
	} {
		p := filepath.Join(dir, tt.path)
		st, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", tt.path, err)
			continue
		}
		if st.Mode() != tt.mode {
			t.Errorf("%s: mode %v, want %v", tt.path, st.Mode(), tt.mode)
		}
		if !st.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil || string(b) != tt.data {
				t.Errorf("%s: content %q (%v), want %q", tt.path, b, err, tt.data)
			}
		}
	}
	if target, err := os.Readlink(filepath.Join(dir, "bin")); err != nil || target != "usr/local/bin" {
		t.Errorf("bin: symlink to %q (%v), want usr/local/bin", target, err)
	}
	// Creating device nodes needs root, as it does for the kernel.
	if os.Geteuid() == 0 {
		st, err := os.Lstat(filepath.Join(dir, "dev/console"))
		if err != nil {
			t.Fatal(err)
		}
		rdev := uint64(st.Sys().(*syscall.Stat_t).Rdev)
		if st.Mode()&fs.ModeCharDevice == 0 || unix.Major(rdev) != 5 || unix.Minor(rdev) != 1 {
			t.Errorf("dev/console: mode %v device %d:%d, want char device 5:1", st.Mode(), unix.Major(rdev), unix.Minor(rdev))
		}
	}
}
