package squashfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"
)

// needTool fails (never skips) when an external tool is missing.
func needTool(t testing.TB, name, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s not found: apt-get install -y %s", name, pkg)
	}
}

// machineCode returns a few MiB of real x86-64 code (this test binary), the
// kind of input the BCJ filters are made for.
func machineCode(t testing.TB) []byte {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	return b[:min(len(b), 400<<10)]
}

// armCode returns n bytes shaped like ARM and Thumb code: branch-with-link
// instructions calling a handful of functions from many places, so their
// relative offsets differ while their targets repeat. The ARM BCJ filters
// make such data compress better, so mksquashfs -Xbcj arm,armthumb picks
// them for these blocks.
func armCode(n int) []byte {
	buf := make([]byte, 0, n)
	targets := []uint32{0x1000, 0x2340, 0x8000, 0x10450}
	for i := 0; len(buf)+8 <= n; i++ {
		pos := uint32(len(buf))
		target := targets[i%len(targets)]
		switch i % 3 {
		case 0: // ARM BL: 24-bit word offset from pos+8
			off := (target - (pos + 8)) >> 2
			buf = append(buf, byte(off), byte(off>>8), byte(off>>16), 0xEB)
		case 1: // Thumb BL pair: 22-bit halfword offset from pos+4
			off := (target - (pos + 4)) >> 1
			buf = append(buf, byte(off>>11), 0xF0|byte(off>>19)&7, byte(off), 0xF8|byte(off>>8)&7)
		default: // an ordinary instruction
			buf = append(buf, byte(i), 0x30, 0xA0, 0xE1)
		}
	}
	return append(buf, make([]byte, n-len(buf))...)
}

func TestUnxzAgainstXZ(t *testing.T) {
	needTool(t, "xz", "xz-utils")
	code := append(machineCode(t)[:300<<10], armCode(100<<10)...)
	// An odd length, so a filter's unprocessed tail is exercised.
	code = code[:len(code)-3]
	tests := []struct{ filter, check, block string }{
		{"", "crc64", ""},
		{"--x86", "crc32", ""},
		{"--x86", "crc64", "--block-size=150KiB"},
		{"--x86", "sha256", ""},
		{"--x86", "none", ""},
		{"--arm", "crc32", ""},
		{"--armthumb", "crc32", "--block-size=150KiB"},
	}
	for _, tt := range tests {
		name := strings.Trim(fmt.Sprintf("%s_%s_%s", tt.filter, tt.check, tt.block), "-_")
		t.Run(name, func(t *testing.T) {
			args := []string{"--check=" + tt.check}
			if tt.block != "" {
				args = append(args, tt.block)
			}
			if tt.filter != "" {
				args = append(args, tt.filter, "--lzma2=preset=1")
			}
			enc, err := xzCLI(code, args...)
			if err != nil {
				t.Fatalf("xz %v: %v", args, err)
			}
			got, err := unxz(enc, len(code))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, code) {
				t.Fatalf("decoded %d bytes differ from the %d encoded", len(got), len(code))
			}
		})
	}
}

func TestUnxzRejects(t *testing.T) {
	needTool(t, "xz", "xz-utils")
	data := bytes.Repeat([]byte("modules/6.12.1-0-virt/kernel/a.ko\n"), 2000)
	enc, err := xzCLI(data, "--x86", "--lzma2=preset=1", "--check=crc32")
	if err != nil {
		t.Fatal(err)
	}
	corrupt := func(i int) []byte {
		b := bytes.Clone(enc)
		b[i] ^= 0x40
		return b
	}
	tests := []struct {
		name  string
		in    []byte
		limit int
		want  error
	}{
		{"not xz", []byte("hello, this is not xz at all"), 1 << 20, ErrFormat},
		{"stream header", corrupt(7), 1 << 20, ErrFormat},
		{"block header", corrupt(13), 1 << 20, ErrFormat},
		{"payload", corrupt(len(enc) / 2), 1 << 20, ErrFormat},
		{"truncated", enc[:len(enc)/2], 1 << 20, ErrFormat},
		{"over limit", enc, len(data) - 1, ErrFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := unxz(tt.in, tt.limit); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	// A filter this reader lacks is reported as unsupported, by id.
	enc, err = xzCLI(data, "--delta=dist=2", "--lzma2=preset=1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unxz(enc, 1<<20); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "0x3") {
		t.Fatalf("delta filter: got %v, want ErrUnsupported naming filter 0x3", err)
	}
}

func xzCLI(data []byte, args ...string) ([]byte, error) {
	cmd := exec.Command("xz", append([]string{"--format=xz", "-c"}, args...)...)
	cmd.Stdin = bytes.NewReader(data)
	return cmd.Output()
}

// tree writes a directory exercising what a reader can get wrong: empty,
// fragment-only and multi-block files, block-aligned sizes, a sparse file,
// symlinks, a directory too big for one listing header, and permissions.
func tree(t testing.TB, dir string, code []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{
		"empty":                          {},
		"small.txt":                      []byte("hello squashfs\n"),
		"exact-block":                    bytes.Repeat([]byte{'b'}, 128<<10),
		"multi/blocks.bin":               code[:300<<10+123],
		"multi/code.ko":                  code,
		"multi/arm.ko":                   armCode(300 << 10),
		"modules/6.12.1-0-virt/kernel/a": []byte("module a"),
		"sparse.img":                     append(make([]byte, 512<<10), []byte("end")...),
	}
	for i := range 300 {
		files[fmt.Sprintf("many/entry-%03d", i)] = []byte(fmt.Sprint(i))
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "small.txt"), 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"link-rel":           "multi/blocks.bin",
		"multi/up":           "../small.txt",
		"link-abs":           "/modules/6.12.1-0-virt",
		"modules/build-link": "6.12.1-0-virt/kernel",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

func mksquashfs(t testing.TB, src string, args ...string) string {
	t.Helper()
	needTool(t, "mksquashfs", "squashfs-tools")
	img := filepath.Join(t.TempDir(), "img.sqfs")
	cmd := exec.Command("mksquashfs", append([]string{src, img, "-noappend", "-quiet", "-no-progress", "-all-root"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mksquashfs %v: %v\n%s", args, err, out)
	}
	return img
}

func openImage(t testing.TB, img string) *FS {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fsys, err := Open(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

func TestReadMksquashfsImages(t *testing.T) {
	src := t.TempDir()
	files := tree(t, src, machineCode(t))
	tests := []struct {
		name string
		args []string
		bcj  bool // some blocks must carry a BCJ filter
	}{
		{"gzip", []string{"-comp", "gzip"}, false},
		{"xz", []string{"-comp", "xz"}, false},
		// How Alpine builds its modloop on x86_64 and aarch64.
		{"xz-bcj-x86", []string{"-comp", "xz", "-Xbcj", "x86"}, true},
		{"xz-bcj-arm", []string{"-comp", "xz", "-Xbcj", "arm,armthumb"}, true},
		{"lz4", []string{"-comp", "lz4"}, false},
		{"zstd", []string{"-comp", "zstd"}, false},
		{"uncompressed", []string{"-noI", "-noD", "-noF", "-noX"}, false},
		{"small-blocks", []string{"-comp", "xz", "-b", "4096", "-always-use-fragments"}, false},
		{"no-fragments", []string{"-comp", "gzip", "-no-fragments"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := openImage(t, mksquashfs(t, src, tt.args...))
			var bcjBlocks atomic.Int64
			if tt.bcj {
				plain := fsys.decompress
				fsys.decompress = func(src []byte, limit int) ([]byte, error) {
					if len(src) > 12 {
						hsize := (int(src[12]) + 1) * 4
						if f, _, _, err := parseBlockHeader(src[13 : 12+hsize-4]); err == nil && len(f) > 1 {
							bcjBlocks.Add(1)
						}
					}
					return plain(src, limit)
				}
			}
			for name, want := range files {
				got, err := fs.ReadFile(fsys, name)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: read %d bytes that differ from the %d written", name, len(got), len(want))
				}
			}
			var expect []string
			for name := range files {
				expect = append(expect, name)
			}
			if err := fstest.TestFS(fsys, expect...); err != nil {
				t.Fatal(err)
			}
			if tt.bcj && bcjBlocks.Load() == 0 {
				t.Fatal("no block used a BCJ filter; the test does not cover BCJ decoding")
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	src := t.TempDir()
	tree(t, src, []byte(strings.Repeat("x", 1<<20)))
	mtime := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(src, "small.txt"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	fsys := openImage(t, mksquashfs(t, src, "-comp", "xz"))

	fi, err := fs.Stat(fsys, "small.txt")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o755|fs.ModeSetuid || fi.Size() != 15 || !fi.ModTime().Equal(mtime) {
		t.Errorf("small.txt: mode %v size %d mtime %v", fi.Mode(), fi.Size(), fi.ModTime())
	}
	for link, want := range map[string]string{"link-rel": "multi/blocks.bin", "link-abs": "/modules/6.12.1-0-virt"} {
		got, err := fsys.ReadLink(link)
		if err != nil || got != want {
			t.Errorf("ReadLink(%s) = %q, %v; want %q", link, got, err, want)
		}
		li, err := fsys.Lstat(link)
		if err != nil || li.Mode().Type() != fs.ModeSymlink {
			t.Errorf("Lstat(%s) = %v, %v; want a symlink", link, li, err)
		}
	}
	// Paths through symlinks resolve inside the image, absolute ones from its root.
	if b, err := fs.ReadFile(fsys, "link-abs/kernel/a"); err != nil || string(b) != "module a" {
		t.Errorf("read through absolute symlink: %q, %v", b, err)
	}
	if b, err := fs.ReadFile(fsys, "multi/up"); err != nil || string(b) != "hello squashfs\n" {
		t.Errorf("read through ../ symlink: %q, %v", b, err)
	}
	matches, err := fs.Glob(fsys, "modules/*/kernel/a")
	if err != nil || len(matches) != 1 || matches[0] != "modules/6.12.1-0-virt/kernel/a" {
		t.Errorf("Glob = %v, %v", matches, err)
	}
	for _, name := range []string{"missing", "small.txt/x", "many/entry-300"} {
		if _, err := fsys.Open(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Open(%s) = %v, want ErrNotExist", name, err)
		}
	}
	if _, err := fsys.Open("/abs"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Open(/abs) = %v, want ErrInvalid", err)
	}
}

func TestSymlinkEscapeAndLoop(t *testing.T) {
	src := t.TempDir()
	for link, target := range map[string]string{"out": "../../etc/passwd", "a": "b", "b": "a"} {
		if err := os.Symlink(target, filepath.Join(src, link)); err != nil {
			t.Fatal(err)
		}
	}
	fsys := openImage(t, mksquashfs(t, src, "-comp", "gzip"))
	for _, name := range []string{"out", "a"} {
		if _, err := fsys.Open(name); err == nil {
			t.Errorf("Open(%s) succeeded", name)
		}
	}
}

func TestRejectsBadImages(t *testing.T) {
	src := t.TempDir()
	tree(t, src, bytes.Repeat([]byte("code"), 1<<18))
	img, err := os.ReadFile(mksquashfs(t, src, "-comp", "xz"))
	if err != nil {
		t.Fatal(err)
	}
	lzo := mksquashfs(t, src, "-comp", "lzo")
	lzoImg, err := os.ReadFile(lzo)
	if err != nil {
		t.Fatal(err)
	}
	truncated := img[:len(img)/2]
	tests := []struct {
		name string
		img  []byte
		want error
	}{
		{"not squashfs", bytes.Repeat([]byte{0x42}, 4096), ErrFormat},
		{"short", img[:50], ErrFormat},
		{"lzo", lzoImg, ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Open(bytes.NewReader(tt.img)); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	// A truncated image opens (the superblock is intact) but reading past
	// the cut fails rather than returning short or zeroed data.
	fsys, err := Open(bytes.NewReader(truncated))
	if err == nil {
		err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				_, err = fs.ReadFile(fsys, p)
			}
			return err
		})
	}
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("truncated image: got %v, want ErrFormat", err)
	}
}

func BenchmarkReadAllXZBCJ(b *testing.B) {
	src := b.TempDir()
	tree(b, src, machineCode(b))
	fsys := openImage(b, mksquashfs(b, src, "-comp", "xz", "-Xbcj", "x86"))
	var n int64
	for b.Loop() {
		n = 0
		err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			f, err := fsys.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			k, err := io.Copy(io.Discard, f)
			n += k
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(n)
}
