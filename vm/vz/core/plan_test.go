package core

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/vm"
	"github.com/osaurus/osaurus-sandbox/vm/bootparams"
)

// A Mac like an M1 with 8 cores and 16 GiB, as the framework reports it.
var m1 = Limits{MinCPUs: 1, MaxCPUs: 8, MinMemory: 128 << 20, MaxMemory: 16 << 30}

// arm64Image is the start of an uncompressed arm64 Linux Image.
func arm64Image() []byte {
	b := make([]byte, 4096)
	copy(b[56:], "ARM\x64")
	return b
}

func writeFile(t *testing.T, path string, b []byte) string {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// testSpec is a valid spec with real files in a temp dir.
func testSpec(t *testing.T) vm.Spec {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	out := filepath.Join(dir, "out")
	for _, d := range []string{ws, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return vm.Spec{
		Kernel:     writeFile(t, filepath.Join(dir, "Image"), arm64Image()),
		Initramfs:  writeFile(t, filepath.Join(dir, "initramfs"), []byte("070701")),
		RootDisk:   writeFile(t, filepath.Join(dir, "root.img"), make([]byte, 8192)),
		Cmdline:    " quiet ",
		Shares:     []vm.Share{{Tag: "workspace", HostPath: ws, GuestPath: "/workspace"}, {Tag: "output", HostPath: out, GuestPath: "/output"}},
		Network:    vm.NetworkOutbound,
		CPUs:       4,
		MemoryMiB:  2048,
		ConsoleLog: filepath.Join(dir, "logs", "console.log"),
		RunDir:     dir,
	}
}

func TestNewPlan(t *testing.T) {
	spec := testSpec(t)
	p, err := NewPlan(spec, m1, "arm64")
	if err != nil {
		t.Fatal(err)
	}
	if p.CPUs != 4 || p.MemoryBytes != 2<<30 || !p.NAT || p.RootDisk != spec.RootDisk ||
		p.Kernel != spec.Kernel || p.Initrd != spec.Initramfs || len(p.Shares) != 2 || p.ConsoleLog != spec.ConsoleLog {
		t.Errorf("plan = %+v", p)
	}
	// The framework appends to the console log; it must exist beforehand.
	if _, err := os.Stat(spec.ConsoleLog); err != nil {
		t.Errorf("console log not created: %v", err)
	}

	spec.Network = vm.NetworkNone
	p, err = NewPlan(spec, m1, "arm64")
	if err != nil {
		t.Fatal(err)
	}
	if p.NAT || !strings.Contains(p.Cmdline, "osaurus.net=none") {
		t.Errorf("network none: NAT %v, cmdline %q", p.NAT, p.Cmdline)
	}
}

func TestCmdline(t *testing.T) {
	spec := testSpec(t)
	got := Cmdline(spec)
	want := "console=hvc0 osaurus.root=/dev/vda osaurus.share=workspace:/workspace osaurus.share=output:/output " +
		"osaurus.net=dhcp osaurus.vsock=1024 quiet"
	if got != want {
		t.Errorf("cmdline\n got %q\nwant %q", got, want)
	}
	// The guest agent reads the same parameters back: vsock, no serial port.
	p, err := bootparams.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if p.VsockPort != AgentPort || p.SerialPort != "" || len(p.Shares) != 2 || p.Network != bootparams.DHCPNAT {
		t.Errorf("guest sees %+v", p)
	}
	// DHCP is the only way vz's NAT works, whatever the spec's default.
	spec.NetworkConfig = vm.NetworkConfigDHCP
	if again := Cmdline(spec); again != got {
		t.Errorf("explicit DHCP: cmdline %q, want %q", again, got)
	}
}

func TestNewPlanRejects(t *testing.T) {
	for _, tc := range []struct {
		name        string
		edit        func(t *testing.T, s *vm.Spec)
		goarch      string
		unsupported bool     // wraps vm.ErrUnsupported
		is          error    // also wraps this, when set
		msg         []string // in the error
	}{
		{name: "cpus above the Mac's maximum", edit: func(_ *testing.T, s *vm.Spec) { s.CPUs = 9 },
			unsupported: true, msg: []string{"cpus: 9", "at most 8"}},
		{name: "cpus below vz's minimum", edit: func(_ *testing.T, s *vm.Spec) { s.CPUs = 1 },
			msg: []string{"cpus: 1", "at least 2"}},
		{name: "memory above the maximum", edit: func(_ *testing.T, s *vm.Spec) { s.MemoryMiB = 32768 },
			unsupported: true, msg: []string{"memory: 32768 MiB", "at most 16384 MiB"}},
		{name: "memory below the minimum", edit: func(_ *testing.T, s *vm.Spec) { s.MemoryMiB = 512 },
			msg: []string{"memory: 512 MiB", "at least 1024 MiB"}},
		{name: "spec invalid", edit: func(_ *testing.T, s *vm.Spec) { s.Network = "bridge" },
			msg: []string{"network"}},
		{name: "static network config", edit: func(_ *testing.T, s *vm.Spec) { s.NetworkConfig = vm.NetworkConfigStatic },
			unsupported: true, msg: []string{"network config", "DHCP"}},
		{name: "gzip kernel", edit: func(t *testing.T, s *vm.Spec) { writeFile(t, s.Kernel, []byte{0x1f, 0x8b, 8, 0}) },
			is: ErrKernelFormat, msg: []string{"gzip", "gunzip"}},
		{name: "not an arm64 Image", edit: func(t *testing.T, s *vm.Spec) { writeFile(t, s.Kernel, make([]byte, 4096)) },
			is: ErrKernelFormat, msg: []string{"arm64 Linux Image"}},
		{name: "missing kernel", edit: func(_ *testing.T, s *vm.Spec) { s.Kernel += ".missing" },
			is: os.ErrNotExist, msg: []string{"kernel"}},
		{name: "missing initramfs", edit: func(_ *testing.T, s *vm.Spec) { s.Initramfs += ".missing" },
			is: os.ErrNotExist, msg: []string{"initramfs"}},
		{name: "unaligned disk", edit: func(t *testing.T, s *vm.Spec) { writeFile(t, s.RootDisk, make([]byte, 1000)) },
			is: ErrDiskFormat, msg: []string{"root.img", "1000", "truncate -s 1024"}},
		{name: "empty disk", edit: func(t *testing.T, s *vm.Spec) { writeFile(t, s.RootDisk, nil) },
			is: ErrDiskFormat, msg: []string{"truncate -s 512"}},
		{name: "qcow2 disk", edit: func(t *testing.T, s *vm.Spec) {
			writeFile(t, s.RootDisk, append([]byte("QFI\xfb"), make([]byte, 508)...))
		}, is: ErrDiskFormat, msg: []string{"qcow2", "raw"}},
		{name: "disk is a directory", edit: func(_ *testing.T, s *vm.Spec) { s.RootDisk = s.Shares[0].HostPath },
			is: ErrDiskFormat, msg: []string{"regular file"}},
		{name: "missing share", edit: func(_ *testing.T, s *vm.Spec) { s.Shares[1].HostPath += ".missing" },
			is: os.ErrNotExist, msg: []string{`share "output"`}},
		{name: "share is a file", edit: func(_ *testing.T, s *vm.Spec) { s.Shares[1].HostPath = s.Kernel },
			msg: []string{`share "output"`, "not a directory"}},
		{name: "long tag", edit: func(_ *testing.T, s *vm.Spec) { s.Shares[0].Tag = strings.Repeat("t", 37) },
			msg: []string{"longer than 36"}},
		{name: "duplicate tag", edit: func(_ *testing.T, s *vm.Spec) { s.Shares[1].Tag = "workspace" },
			msg: []string{"used twice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec(t)
			tc.edit(t, &spec)
			goarch := tc.goarch
			if goarch == "" {
				goarch = "arm64"
			}
			lim := m1
			lim.MinCPUs, lim.MinMemory = 2, 1<<30
			_, err := NewPlan(spec, lim, goarch)
			if err == nil {
				t.Fatal("accepted")
			}
			if got := errors.Is(err, vm.ErrUnsupported); got != tc.unsupported {
				t.Errorf("errors.Is(err, vm.ErrUnsupported) = %v, want %v: %v", got, tc.unsupported, err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want it to wrap %v", err, tc.is)
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q lacks %q", err, m)
				}
			}
		})
	}
}

func TestCheckKernelByArch(t *testing.T) {
	dir := t.TempDir()
	bz := writeFile(t, filepath.Join(dir, "bzImage"), bytes.Repeat([]byte{0x4d, 0x5a}, 64))
	if err := CheckKernel(bz, "amd64"); err != nil {
		t.Errorf("amd64 kernel rejected on amd64: %v", err)
	}
	if err := CheckKernel(bz, "arm64"); !errors.Is(err, ErrKernelFormat) {
		t.Errorf("x86 kernel on arm64: err = %v, want ErrKernelFormat", err)
	}
	short := writeFile(t, filepath.Join(dir, "short"), []byte("ARM"))
	if err := CheckKernel(short, "arm64"); !errors.Is(err, ErrKernelFormat) {
		t.Errorf("truncated kernel: err = %v, want ErrKernelFormat", err)
	}
}
