package provisiontest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TarGz builds a gzip'd tar of files, in order (see File).
func TarGz(t testing.TB, files ...File) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if _, err := gz.Write(tarBytes(t, files)); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func tarBytes(t testing.TB, files []File) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.Name, Mode: f.Mode, ModTime: time.Unix(1700000000, 0), Typeflag: tar.TypeReg, Size: int64(len(f.Data))}
		switch {
		case strings.HasSuffix(f.Name, "/"):
			h.Typeflag, h.Size = tar.TypeDir, 0
			if h.Mode == 0 {
				h.Mode = 0o755
			}
		case f.Linkname != "":
			h.Typeflag, h.Size, h.Linkname, h.Mode = tar.TypeSymlink, 0, f.Linkname, 0o777
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(f.Data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// NeedTool fails the test (never skips it) when an external tool is
// missing, saying which Debian package provides it.
func NeedTool(t testing.TB, tool, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		t.Fatalf("%s not found: apt-get install -y %s", tool, pkg)
	}
}

// Squashfs builds a SquashFS image of files with mksquashfs and returns it.
// args are extra mksquashfs options, e.g. "-comp", "xz", "-Xbcj", "x86".
func Squashfs(t testing.TB, files []File, args ...string) []byte {
	t.Helper()
	NeedTool(t, "mksquashfs", "squashfs-tools")
	src := t.TempDir()
	for _, f := range files {
		p := filepath.Join(src, filepath.FromSlash(f.Name))
		if strings.HasSuffix(f.Name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if f.Linkname != "" {
			if err := os.Symlink(f.Linkname, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(f.Data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(t.TempDir(), "img.sqfs")
	cmd := exec.Command("mksquashfs", append([]string{src, img, "-noappend", "-quiet", "-no-progress", "-all-root"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mksquashfs: %v\n%s", err, out)
	}
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// DiskFile reads path from an ext4 image with debugfs. ok is false when
// the file does not exist.
func DiskFile(t testing.TB, img, path string) (data string, ok bool) {
	t.Helper()
	NeedTool(t, "debugfs", "e2fsprogs")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("debugfs", "-R", "cat "+path, img)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("debugfs cat %s %s: %v\n%s", img, path, err, stderr.String())
	}
	if strings.Contains(stderr.String(), "not found") {
		return "", false
	}
	// debugfs prints its banner on stderr and an error there, with exit
	// status 0, for anything else it cannot do.
	if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) > 1 {
		t.Fatalf("debugfs cat %s %s: %s", img, path, stderr.String())
	}
	return stdout.String(), true
}

// Module returns a minimal ELF object with the .modinfo section of a kernel
// module called name that depends on depends: enough for provisioning to
// resolve and pack it, not to load it.
func Module(name string, depends ...string) []byte {
	info := []byte("name=" + name + "\x00depends=" + strings.Join(depends, ",") + "\x00")
	names := []byte("\x00.modinfo\x00.shstrtab\x00")
	const hdrSize, secSize = 64, 64
	infoOff := uint64(hdrSize)
	namesOff := infoOff + uint64(len(info))
	secOff := (namesOff + uint64(len(names)) + 7) &^ 7

	var b bytes.Buffer
	h := elf.Header64{
		Type: uint16(elf.ET_REL), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Shoff: secOff, Ehsize: hdrSize, Shentsize: secSize, Shnum: 3, Shstrndx: 2,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	binary.Write(&b, binary.LittleEndian, h)
	b.Write(info)
	b.Write(names)
	b.Write(make([]byte, secOff-uint64(b.Len())))
	for _, s := range []elf.Section64{
		{},
		{Name: 1, Type: uint32(elf.SHT_PROGBITS), Flags: uint64(elf.SHF_ALLOC), Off: infoOff, Size: uint64(len(info)), Addralign: 1},
		{Name: 10, Type: uint32(elf.SHT_STRTAB), Off: namesOff, Size: uint64(len(names)), Addralign: 1},
	} {
		binary.Write(&b, binary.LittleEndian, s)
	}
	return b.Bytes()
}

// DiskType reports the type of path in an ext4 image as debugfs names it
// ("regular", "directory", "symlink", ...); ok is false when it does not
// exist. Unlike DiskFile it works for symlinks.
func DiskType(t testing.TB, img, path string) (typ string, ok bool) {
	t.Helper()
	NeedTool(t, "debugfs", "e2fsprogs")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("debugfs", "-R", "stat "+path, img)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("debugfs stat %s %s: %v\n%s", img, path, err, stderr.String())
	}
	if strings.Contains(stderr.String(), "not found") {
		return "", false
	}
	for _, f := range strings.Fields(stdout.String()) {
		if typ == "next" {
			return f, true
		}
		if f == "Type:" {
			typ = "next"
		}
	}
	t.Fatalf("debugfs stat %s %s: no type in %q", img, path, stdout.String())
	return "", false
}
