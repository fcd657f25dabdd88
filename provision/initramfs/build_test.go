package initramfs

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/provision/kmod"
)

func testSpec() Spec {
	return Spec{
		Init: []byte("\x7fELF fake agent"),
		Modules: []kmod.Module{
			{Name: "virtio", Data: []byte("virtio object")},
			{Name: "virtio_ring", Data: []byte("ring object")},
			{Name: "virtio_pci", Data: []byte("pci object")},
		},
		Files: []File{
			{Path: "/etc/osaurus/agent.json", Mode: 0o600, Data: []byte(`{"cid":3}`)},
			{Path: "/var/run", Mode: fs.ModeDir | 0o755},
			{Path: "/sbin/init", Mode: fs.ModeSymlink, Data: []byte("/init")},
		},
	}
}

func buildEntries(t *testing.T, spec Spec) map[string]entry {
	t.Helper()
	var buf bytes.Buffer
	if err := Build(&buf, spec); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if spec.Gzip {
		zr, err := gzip.NewReader(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	m := map[string]entry{}
	for _, e := range readNewc(t, b) {
		m["/"+e.Name] = e
	}
	return m
}

func TestBuildLayout(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			spec := testSpec()
			spec.Gzip = gz
			got := buildEntries(t, spec)
			for _, tt := range []struct {
				path string
				mode uint32
				data string
			}{
				{"/init", 0o100755, "\x7fELF fake agent"},
				{"/dev", 0o040755, ""},
				{"/dev/console", 0o020600, ""},
				{"/proc", 0o040555, ""},
				{"/sys", 0o040555, ""},
				{"/newroot", 0o040755, ""},
				{"/tmp", 0o041777, ""},
				{"/lib/modules", 0o040755, ""},
				{"/lib/modules/01-virtio.ko", 0o100644, "virtio object"},
				{"/lib/modules/02-virtio_ring.ko", 0o100644, "ring object"},
				{"/lib/modules/03-virtio_pci.ko", 0o100644, "pci object"},
				{"/lib/modules/order", 0o100644, "01-virtio.ko\n02-virtio_ring.ko\n03-virtio_pci.ko\n"},
				{"/etc", 0o040755, ""},
				{"/etc/osaurus/agent.json", 0o100600, `{"cid":3}`},
				{"/var/run", 0o040755, ""},
				{"/sbin/init", 0o120777, "/init"},
			} {
				e, ok := got[tt.path]
				if !ok {
					t.Errorf("%s missing", tt.path)
					continue
				}
				if e.Mode != tt.mode || e.Data != tt.data {
					t.Errorf("%s: mode %o data %q, want mode %o data %q", tt.path, e.Mode, e.Data, tt.mode, tt.data)
				}
			}
		})
	}
}

func TestBuildNoModules(t *testing.T) {
	spec := testSpec()
	spec.Modules = nil
	got := buildEntries(t, spec)
	if e, ok := got[ModulesOrder]; !ok || e.Data != "" {
		t.Fatalf("order file %+v present=%v, want present and empty", e, ok)
	}
}

func TestBuildManyModules(t *testing.T) {
	spec := testSpec()
	spec.Modules = nil
	for i := range 120 {
		spec.Modules = append(spec.Modules, kmod.Module{Name: fmt.Sprintf("m%d", i), Data: []byte{byte(i)}})
	}
	got := buildEntries(t, spec)
	order := strings.Split(strings.TrimSuffix(got[ModulesOrder].Data, "\n"), "\n")
	if len(order) != 120 || order[0] != "001-m0.ko" || order[119] != "120-m119.ko" {
		t.Fatalf("order has %d lines, first %q last %q", len(order), order[0], order[len(order)-1])
	}
	// File names must sort in load order for anyone listing the directory.
	for i, f := range order {
		e, ok := got[ModulesDir+"/"+f]
		if !ok || e.Data != string([]byte{byte(i)}) {
			t.Fatalf("%s missing or wrong", f)
		}
		if i > 0 && order[i-1] >= f {
			t.Fatalf("%s does not sort after %s", f, order[i-1])
		}
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Spec)
		want   error
	}{
		{"no init", func(s *Spec) { s.Init = nil }, ErrNoInit},
		{"file replaces init", func(s *Spec) {
			s.Files = append(s.Files, File{Path: "/init", Mode: 0o755, Data: []byte("x")})
		}, ErrExists},
		{"file replaces order", func(s *Spec) {
			s.Files = append(s.Files, File{Path: "lib/modules/order", Mode: 0o644})
		}, ErrExists},
		{"file replaces dir", func(s *Spec) {
			s.Files = append(s.Files, File{Path: "/dev", Mode: 0o644})
		}, ErrExists},
		{"escaping path", func(s *Spec) {
			s.Files = append(s.Files, File{Path: "../x", Mode: 0o644})
		}, ErrInvalidPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := testSpec()
			tt.modify(&spec)
			if err := Build(io.Discard, spec); !errors.Is(err, tt.want) {
				t.Fatalf("Build: %v, want %v", err, tt.want)
			}
		})
	}
	spec := testSpec()
	spec.Modules[1].Name = "../evil"
	if err := Build(io.Discard, spec); err == nil {
		t.Error("Build accepted a module name with a slash")
	}
	spec = testSpec()
	spec.Files[0].Mode |= fs.ModeNamedPipe
	if err := Build(io.Discard, spec); err == nil {
		t.Error("Build accepted a named pipe")
	}
}

func TestBuildExtractWithCpio(t *testing.T) {
	var buf bytes.Buffer
	if err := Build(&buf, testSpec()); err != nil {
		t.Fatal(err)
	}
	dir := extract(t, buf.Bytes())
	order, err := os.ReadFile(filepath.Join(dir, "lib/modules/order"))
	if err != nil {
		t.Fatal(err)
	}
	want := testSpec().Modules
	lines := strings.Fields(string(order))
	if len(lines) != len(want) {
		t.Fatalf("order lists %d modules, want %d", len(lines), len(want))
	}
	for i, name := range lines {
		b, err := os.ReadFile(filepath.Join(dir, "lib/modules", name))
		if err != nil || !bytes.Equal(b, want[i].Data) {
			t.Errorf("%s: %q (%v), want data of %s", name, b, err, want[i].Name)
		}
	}
	st, err := os.Stat(filepath.Join(dir, "init"))
	if err != nil || st.Mode() != 0o755 {
		t.Fatalf("init: %v %v, want mode 0755", st, err)
	}
}

func BenchmarkBuild(b *testing.B) {
	// Roughly the real payload: a 10 MB agent and 1.3 MB of modules.
	spec := Spec{Init: bytes.Repeat([]byte{0x90}, 10<<20)}
	for i := range 16 {
		spec.Modules = append(spec.Modules, kmod.Module{Name: fmt.Sprintf("m%d", i), Data: bytes.Repeat([]byte{byte(i)}, 80<<10)})
	}
	b.SetBytes(int64(len(spec.Init) + 16*80<<10))
	for b.Loop() {
		if err := Build(io.Discard, spec); err != nil {
			b.Fatal(err)
		}
	}
}
