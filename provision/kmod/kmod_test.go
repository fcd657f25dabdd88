package kmod

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// mod returns a fake module file for a MapFS.
func mod(t testing.TB, name, depends string) *fstest.MapFile {
	return &fstest.MapFile{Data: fakeModule(t, "license=GPL", "depends="+depends, "name="+name), Mode: 0o644}
}

func names(mods []Module) []string {
	var out []string
	for _, m := range mods {
		out = append(out, m.Name)
	}
	return out
}

func TestResolve(t *testing.T) {
	base := func() fstest.MapFS {
		return fstest.MapFS{
			"kernel/drivers/virtio/virtio.ko":             mod(t, "virtio", ""),
			"kernel/drivers/virtio/virtio_ring.ko":        mod(t, "virtio_ring", ""),
			"kernel/drivers/virtio/virtio_pci.ko":         mod(t, "virtio_pci", "virtio_ring,virtio"),
			"kernel/drivers/net/virtio_net.ko":            mod(t, "virtio_net", "virtio_ring,virtio,net_failover"),
			"kernel/drivers/net/net_failover.ko":          mod(t, "net_failover", "failover"),
			"kernel/net/core/failover.ko":                 mod(t, "failover", ""),
			"kernel/drivers/char/hw_random/virtio-rng.ko": mod(t, "virtio_rng", "virtio,virtio_ring"),
			"kernel/fs/fuse/virtiofs.ko":                  mod(t, "virtiofs", "fuse,virtio,virtio_ring,ext4"),
			"kernel/fs/fuse/fuse.ko":                      mod(t, "fuse", ""),
			"modules.builtin":                             {Data: []byte("kernel/fs/ext4/ext4.ko\nkernel/crypto/crc32c_generic.ko\n")},
			"modules.order":                               {Data: []byte("kernel/fs/fuse/fuse.ko\n")},
		}
	}
	tests := []struct {
		name   string
		fsys   func() fstest.MapFS
		wanted []string
		want   []string
	}{
		{
			name:   "dependencies first",
			fsys:   base,
			wanted: []string{"virtio_net"},
			want:   []string{"virtio_ring", "virtio", "failover", "net_failover", "virtio_net"},
		},
		{
			name:   "no duplicates across wanted modules",
			fsys:   base,
			wanted: []string{"virtio_pci", "virtio_net", "virtio_pci", "virtio"},
			want:   []string{"virtio_ring", "virtio", "virtio_pci", "failover", "net_failover", "virtio_net"},
		},
		{
			name:   "dash and underscore are the same",
			fsys:   base,
			wanted: []string{"virtio-rng", "virtio_rng", "virtio-pci"},
			want:   []string{"virtio", "virtio_ring", "virtio_rng", "virtio_pci"},
		},
		{
			name:   "built-in modules skipped, also as dependencies",
			fsys:   base,
			wanted: []string{"ext4", "crc32c-generic", "virtiofs"},
			want:   []string{"fuse", "virtio", "virtio_ring", "virtiofs"},
		},
		{
			name: "built-in from modules.builtin.modinfo",
			fsys: func() fstest.MapFS {
				m := base()
				delete(m, "modules.builtin")
				m["modules.builtin.modinfo"] = &fstest.MapFile{Data: []byte("ext4.license=GPL\x00ext4.file=fs/ext4\x00")}
				return m
			},
			wanted: []string{"virtiofs"},
			want:   []string{"fuse", "virtio", "virtio_ring", "virtiofs"},
		},
		{
			name: "compressed modules",
			fsys: func() fstest.MapFS {
				m := base()
				for _, c := range []struct {
					p  string
					fn func(testing.TB, []byte) []byte
					to string
				}{
					{"kernel/drivers/virtio/virtio.ko", compressXZ, ".xz"},
					{"kernel/drivers/virtio/virtio_ring.ko", compressZstd, ".zst"},
					{"kernel/drivers/virtio/virtio_pci.ko", compressGzip, ".gz"},
				} {
					m[c.p+c.to] = &fstest.MapFile{Data: c.fn(t, m[c.p].Data)}
					delete(m, c.p)
				}
				return m
			},
			wanted: []string{"virtio_pci"},
			want:   []string{"virtio_ring", "virtio", "virtio_pci"},
		},
		{
			name: "name from file when modinfo has none",
			fsys: func() fstest.MapFS {
				m := base()
				m["kernel/fs/fuse/fuse.ko"] = &fstest.MapFile{Data: fakeModule(t, "license=GPL")}
				return m
			},
			wanted: []string{"fuse"},
			want:   []string{"fuse"},
		},
		{
			name: "stale modules.dep falls back to scanning",
			fsys: func() fstest.MapFS {
				m := base()
				m["modules.dep"] = &fstest.MapFile{Data: []byte("kernel/gone/virtio.ko:\nkernel/drivers/virtio/virtio_ring.ko:\n")}
				return m
			},
			wanted: []string{"virtio_pci"},
			want:   []string{"virtio_ring", "virtio", "virtio_pci"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := tt.fsys()
			got, err := Resolve(fsys, tt.wanted...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(got), tt.want) {
				t.Fatalf("load order = %v, want %v", names(got), tt.want)
			}
			for _, m := range got {
				if _, err := parseModinfo(m.Data); err != nil {
					t.Errorf("%s: Data is not a decompressed module: %v", m.Name, err)
				}
			}
		})
	}
}

func TestResolveData(t *testing.T) {
	plain := fakeModule(t, "depends=", "name=fuse")
	for _, tt := range []struct {
		name string
		file string
		data []byte
	}{
		{"plain", "fuse.ko", plain},
		{"xz", "fuse.ko.xz", compressXZ(t, plain)},
		{"zstd", "fuse.ko.zst", compressZstd(t, plain)},
		{"gzip", "fuse.ko.gz", compressGzip(t, plain)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(fstest.MapFS{"kernel/fs/" + tt.file: {Data: tt.data}}, "fuse")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || !bytes.Equal(got[0].Data, plain) {
				t.Fatalf("Data differs from the uncompressed module")
			}
		})
	}
}

func TestResolveUpdatesOverride(t *testing.T) {
	fsys := fstest.MapFS{
		"kernel/fs/fuse.ko":  {Data: fakeModule(t, "name=fuse", "description=in-tree")},
		"updates/fuse.ko.xz": {Data: compressXZ(t, fakeModule(t, "name=fuse", "description=update"))},
	}
	got, err := Resolve(fsys, "fuse")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !bytes.Contains(got[0].Data, []byte("description=update")) {
		t.Fatal("module under updates/ should take precedence over kernel/")
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name     string
		fsys     fstest.MapFS
		wanted   []string
		notFound bool
		mention  []string
	}{
		{
			name:     "unknown module",
			fsys:     fstest.MapFS{"kernel/a.ko": mod(t, "a", "")},
			wanted:   []string{"a", "nosuch_mod"},
			notFound: true,
			mention:  []string{"nosuch_mod"},
		},
		{
			name:     "unknown dependency",
			fsys:     fstest.MapFS{"kernel/a.ko": mod(t, "a", "missing_dep")},
			wanted:   []string{"a"},
			notFound: true,
			mention:  []string{"missing_dep", "needed by a"},
		},
		{
			name:    "not a module",
			fsys:    fstest.MapFS{"kernel/a.ko": {Data: []byte("#!/bin/sh\n")}},
			wanted:  []string{"a"},
			mention: []string{"kernel/a.ko"},
		},
		{
			name:    "ELF without modinfo",
			fsys:    fstest.MapFS{"kernel/a.ko": {Data: bytes.Replace(fakeModule(t, "name=a"), []byte(".modinfo"), []byte(".notinfo"), 1)}},
			wanted:  []string{"a"},
			mention: []string{"kernel/a.ko", ".modinfo"},
		},
		{
			name:    "corrupt xz",
			fsys:    fstest.MapFS{"kernel/a.ko.xz": {Data: compressXZ(t, fakeModule(t, "name=a"))[:40]}},
			wanted:  []string{"a"},
			mention: []string{"kernel/a.ko.xz"},
		},
		{
			name:    "dependency cycle",
			fsys:    fstest.MapFS{"kernel/a.ko": mod(t, "a", "b"), "kernel/b.ko": mod(t, "b", "a")},
			wanted:  []string{"a"},
			mention: []string{"cycle", "a -> b -> a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.fsys, tt.wanted...)
			if err == nil {
				t.Fatalf("Resolve succeeded with %v, want error", names(got))
			}
			if errors.Is(err, ErrNotFound) != tt.notFound {
				t.Errorf("errors.Is(err, ErrNotFound) = %v, want %v (err: %v)", !tt.notFound, tt.notFound, err)
			}
			for _, s := range tt.mention {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

// realModulesTree returns the kernel modules tree named by
// OSAURUS_TEST_KERNEL_MODULES, failing the test when it is not set (outside
// -short).
func realModulesTree(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("OSAURUS_TEST_KERNEL_MODULES")
	if dir == "" && testing.Short() {
		// `make unit` runs on machines without the test guest; `make test`
		// builds it and runs this for real.
		t.Skip("needs the test guest's kernel modules; `make test` runs it")
	}
	if dir == "" {
		t.Fatal("OSAURUS_TEST_KERNEL_MODULES is not set: run `make test-guest` or set OSAURUS_TEST_KERNEL_MODULES " +
			"to an extracted kernel's lib/modules/<version> directory (e.g. from `apt-get download linux-image-<ver>-cloud-amd64 && dpkg-deb -x`)")
	}
	if _, err := os.Stat(dir + "/modules.order"); err != nil {
		t.Fatalf("OSAURUS_TEST_KERNEL_MODULES=%s does not look like lib/modules/<version>: %v", dir, err)
	}
	return dir
}

func TestResolveRealKernel(t *testing.T) {
	dir := realModulesTree(t)
	mods, err := Resolve(os.DirFS(dir), GuestModules()...)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	total := 0
	for i, m := range mods {
		if _, dup := pos[m.Name]; dup {
			t.Errorf("%s listed twice", m.Name)
		}
		pos[m.Name] = i
		total += len(m.Data)
	}
	for _, m := range mods {
		mi, err := parseModinfo(m.Data)
		if err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		for _, d := range mi.depends {
			if p, ok := pos[d]; !ok || p > pos[m.Name] {
				t.Errorf("%s depends on %s, which is not loaded before it", m.Name, d)
			}
		}
	}
	builtin, err := readBuiltin(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range GuestModules() {
		if _, ok := pos[n]; !ok && !builtin[n] {
			t.Errorf("wanted module %s neither resolved nor built in", n)
		}
	}
	t.Logf("resolved %d modules, %d bytes: %s", len(mods), total, strings.Join(names(mods), " "))
}

func BenchmarkResolveRealKernel(b *testing.B) {
	fsys := os.DirFS(realModulesTree(b))
	for b.Loop() {
		if _, err := Resolve(fsys, GuestModules()...); err != nil {
			b.Fatal(err)
		}
	}
}

// noDirFS refuses to open directories, so any attempt to scan the tree fails.
type noDirFS struct{ fstest.MapFS }

func (f noDirFS) Open(name string) (fs.File, error) {
	if st, err := fs.Stat(f.MapFS, name); err == nil && st.IsDir() {
		return nil, fmt.Errorf("open %s: directory scan not expected", name)
	}
	return f.MapFS.Open(name)
}

func TestResolveModulesDepAvoidsScan(t *testing.T) {
	fsys := noDirFS{fstest.MapFS{
		"kernel/a/virtio.ko":     mod(t, "virtio", ""),
		"kernel/a/virtio_pci.ko": mod(t, "virtio_pci", "virtio"),
		"modules.dep":            {Data: []byte("kernel/a/virtio.ko:\nkernel/a/virtio_pci.ko: kernel/a/virtio.ko\n")},
	}}
	got, err := Resolve(fsys, "virtio_pci")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"virtio", "virtio_pci"}; !slices.Equal(names(got), want) {
		t.Fatalf("load order = %v, want %v", names(got), want)
	}
}

// BenchmarkResolveRealKernelXZ measures decompression cost on a tree like
// newer Debian kernels ship, with every guest module xz-compressed.
func BenchmarkResolveRealKernelXZ(b *testing.B) {
	dir := realModulesTree(b)
	mods, err := Resolve(os.DirFS(dir), GuestModules()...)
	if err != nil {
		b.Fatal(err)
	}
	fsys := fstest.MapFS{}
	size := 0
	for _, m := range mods {
		fsys["kernel/"+m.Name+".ko.xz"] = &fstest.MapFile{Data: compressXZ(b, m.Data)}
		size += len(m.Data)
	}
	b.SetBytes(int64(size))
	for b.Loop() {
		if _, err := Resolve(fsys, GuestModules()...); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHostileModuleNames: names from an image's .modinfo become file names
// on the host; anything that isn't a kernel module name is refused.
func TestHostileModuleNames(t *testing.T) {
	for _, tc := range []struct {
		name, modName, depends string
	}{
		{"path in name", "../../../../home/user/.bashrc", ""},
		{"slash", "a/b", ""},
		{"newline", "fuse\nevil", ""},
		{"dot", ".", ""},
		{"too long", strings.Repeat("a", 56), ""},
		{"hostile dependency", "fuse", "../../x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{"kernel/fs/fuse.ko": mod(t, tc.modName, tc.depends)}
			_, err := Resolve(fsys, "fuse")
			if !errors.Is(err, ErrBadName) {
				t.Fatalf("Resolve = %v, want ErrBadName", err)
			}
		})
	}
	for _, ok := range []string{"fuse", "virtio_net", "crc32c-generic", strings.Repeat("a", 55)} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q) = %v", ok, err)
		}
	}
}

func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"fuse", "../x", "a/b", "", "x\x00", "virtio-net"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if CheckName(name) != nil {
			return
		}
		// Whatever passes is a single, plain path element.
		if name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00\n") || filepath.Base(name) != name {
			t.Fatalf("CheckName accepted %q", name)
		}
	})
}
