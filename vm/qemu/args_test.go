//go:build linux

package qemu

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/vm"
)

func testSpec() vm.Spec {
	return vm.Spec{
		Kernel: "/k", Initramfs: "/i", RootDisk: "/r.img", RunDir: "/run/x",
		ConsoleLog: "/log/console.log", CPUs: 2, MemoryMiB: 2048,
		Network: vm.NetworkOutbound,
		Shares: []vm.Share{
			{Tag: "workspace", HostPath: "/h/ws", GuestPath: "/workspace"},
			{Tag: "output", HostPath: "/h/out", GuestPath: "/output"},
		},
	}
}

// flagValues returns every value given to flag.
func flagValues(args []string, flag string) []string {
	var v []string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			v = append(v, args[i+1])
		}
	}
	return v
}

func TestArgs(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*vm.Spec, *plan)
		want   []string // "flag=value" pairs that must appear
		absent []string // substrings no argument may contain
	}{
		{
			name: "tcg with shares, NAT and virtio-serial",
			want: []string{
				"-machine=q35,accel=tcg", "-cpu=max", "-smp=2", "-m=2048M",
				"-object=memory-backend-memfd,id=mem,size=2048M,share=on",
				"-device=vhost-user-fs-pci,chardev=fs0,tag=workspace",
				"-device=vhost-user-fs-pci,chardev=fs1,tag=output",
				"-chardev=socket,id=fs1,path=/run/x/fs1.sock",
				"-netdev=user,id=net0,net=10.0.2.0/24,host=10.0.2.2,dns=10.0.2.3",
				"-device=virtio-net-pci,netdev=net0",
				"-device=virtserialport,chardev=agent,name=" + AgentPortName,
				"-chardev=file,id=console,path=/log/console.log,append=on",
				"-drive=file=/r.img,if=none,id=root,format=raw,cache=writeback,discard=unmap",
			},
			absent: []string{"vhost-vsock"},
		},
		{
			name:   "network none has no NIC at all",
			mutate: func(s *vm.Spec, _ *plan) { s.Network = vm.NetworkNone },
			absent: []string{"netdev", "virtio-net"},
		},
		{
			name:   "kvm uses the host CPU",
			mutate: func(_ *vm.Spec, p *plan) { p.accel = vm.AccelKVM },
			want:   []string{"-machine=q35,accel=kvm", "-cpu=host"},
		},
		{
			name:   "vsock replaces virtio-serial",
			mutate: func(_ *vm.Spec, p *plan) { p.vsockCID = 42 },
			want:   []string{"-device=vhost-vsock-pci,guest-cid=42"},
			absent: []string{"virtserialport", "virtio-serial"},
		},
		{
			name:   "q35 keeps qboot and a NUMA node for the shared memory",
			mutate: func(_ *vm.Spec, p *plan) { p.firmware = "/q.rom" },
			want:   []string{"-bios=/q.rom", "-numa=node,memdev=mem", "-device=virtio-blk-pci,drive=root", "-device=virtio-rng-pci", "-device=virtio-serial-pci"},
			absent: []string{"microvm", "-device,", "rng-device"},
		},
		{
			name:   "microvm puts every device on virtio-mmio",
			mutate: func(_ *vm.Spec, p *plan) { p.machine = vm.MachineMicroVM; p.firmware = "/q.rom" },
			want: []string{
				"-machine=microvm,accel=tcg,acpi=off,pcie=off,pit=on,pic=on,rtc=on,x-option-roms=off,memory-backend=mem",
				"-object=memory-backend-memfd,id=mem,size=2048M,share=on",
				"-global=virtio-mmio.force-legacy=false",
				"-device=virtio-blk-device,drive=root",
				"-device=virtio-rng-device",
				"-device=vhost-user-fs-device,chardev=fs0,tag=workspace",
				"-device=vhost-user-fs-device,chardev=fs1,tag=output",
				"-device=virtio-net-device,netdev=net0",
				"-device=virtio-serial-device",
				"-device=virtserialport,chardev=agent,name=" + AgentPortName,
			},
			// No PCI, and microvm's own firmware rather than q35's.
			absent: []string{"-pci", "q35", "/q.rom", "-numa"},
		},
		{
			name:   "microvm with vsock",
			mutate: func(_ *vm.Spec, p *plan) { p.machine = vm.MachineMicroVM; p.vsockCID = 42 },
			want:   []string{"-device=vhost-vsock-device,guest-cid=42"},
			absent: []string{"-pci", "virtio-serial"},
		},
		{
			name:   "arm64 ignores the machine type",
			mutate: func(_ *vm.Spec, p *plan) { p.arch = "arm64"; p.machine = vm.MachineMicroVM },
			want:   []string{"-machine=virt,accel=tcg", "-device=virtio-blk-pci,drive=root"},
			absent: []string{"microvm", "-device,", "rng-device"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec()
			p := plan{arch: "amd64", machine: vm.MachineQ35, accel: vm.AccelTCG, layout: newLayout(spec.RunDir, len(spec.Shares)), consoleTT: "ttyS0"}
			if tc.mutate != nil {
				tc.mutate(&spec, &p)
			}
			args := p.args(spec)
			for _, w := range tc.want {
				flag, val, _ := strings.Cut(w, "=")
				if !slices.Contains(flagValues(args, flag), val) {
					t.Errorf("missing %s %s in %q", flag, val, args)
				}
			}
			for _, a := range tc.absent {
				for _, arg := range args {
					if strings.Contains(arg, a) {
						t.Errorf("argument %q contains %q", arg, a)
					}
				}
			}
		})
	}
}

func TestKernelCmdline(t *testing.T) {
	spec := testSpec()
	spec.Cmdline = "extra=1"
	p := plan{arch: "amd64", accel: vm.AccelTCG, layout: newLayout(spec.RunDir, 2), consoleTT: "ttyS0"}
	got := p.kernelCmdline(spec)
	for _, w := range []string{"console=ttyS0", "panic=-1", "osaurus.root=/dev/vda",
		"osaurus.share=workspace:/workspace", "osaurus.share=output:/output",
		"osaurus.ip=10.0.2.15/24", "osaurus.gw=10.0.2.2", "osaurus.dns=10.0.2.3",
		"osaurus.port=" + AgentPortName, "extra=1"} {
		if !slices.Contains(strings.Fields(got), w) {
			t.Errorf("cmdline %q lacks %q", got, w)
		}
	}
	if slices.Contains(strings.Fields(got), "reboot=t") {
		t.Errorf("q35 cmdline %q has reboot=t", got)
	}
	mp := p
	mp.machine = vm.MachineMicroVM
	if got := mp.kernelCmdline(spec); !slices.Contains(strings.Fields(got), "reboot=t") {
		t.Errorf("microvm cmdline %q lacks reboot=t", got)
	}
	if strings.Contains(got, "lpj=") {
		t.Errorf("cmdline %q presets lpj without a value", got)
	}
	lp := p
	lp.lpj = 25961380
	if got := lp.kernelCmdline(spec); !slices.Contains(strings.Fields(got), "lpj=25961380") {
		t.Errorf("cmdline %q lacks the preset lpj", got)
	}
	spec.Network = vm.NetworkNone
	if got := p.kernelCmdline(spec); !strings.Contains(got, "osaurus.net=none") || strings.Contains(got, "osaurus.ip") {
		t.Errorf("network none: cmdline %q", got)
	}
}

func TestHostLPJ(t *testing.T) {
	for _, tc := range []struct {
		cpuinfo string
		want    int64
	}{
		{"processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu MHz\t\t: 2596.138\ncache size\t: 512 KB\n", 25961380},
		{"processor\t: 0\ncpu MHz\t\t: 2000.000\nprocessor\t: 1\ncpu MHz\t\t: 3000.000\n", 20000000},
		{"processor\t: 0\nBogoMIPS\t: 50.00\n", 0}, // arm64: no cpu MHz line
		{"cpu MHz\t\t: fast\n", 0},
		{"", 0},
	} {
		if got := hostLPJ(tc.cpuinfo, 100); got != tc.want {
			t.Errorf("hostLPJ(%q) = %d, want %d", tc.cpuinfo, got, tc.want)
		}
	}
}

func TestChooseAccel(t *testing.T) {
	d := New(Config{StateDir: t.TempDir()})
	d.kvmOpens = func() bool { return true }
	if a, auto, _ := d.chooseAccel(vm.Spec{Accel: vm.AccelTCG}); a != vm.AccelTCG || auto {
		t.Errorf("explicit tcg: got %s auto=%v", a, auto)
	}
	if a, auto, _ := d.chooseAccel(vm.Spec{Accel: vm.AccelKVM}); a != vm.AccelKVM || auto {
		t.Errorf("explicit kvm: got %s auto=%v", a, auto)
	}
	// A KVM attempt that failed under auto is remembered across drivers.
	failed := &process{autoAccel: true, plan: plan{accel: vm.AccelKVM}}
	if !d.Fallback(failed, errors.New("qemu exited: signal: aborted")) {
		t.Fatal("fallback from an automatic KVM attempt refused")
	}
	if a, _, why := d.chooseAccel(vm.Spec{Accel: vm.AccelAuto}); a != vm.AccelTCG || !strings.Contains(why, "signal: aborted") {
		t.Errorf("after fallback auto picked %s (reason %q)", a, why)
	}
	d2 := New(Config{StateDir: d.cfg.StateDir})
	if a, _, _ := d2.chooseAccel(vm.Spec{}); a != vm.AccelTCG {
		t.Errorf("a new driver forgot the KVM failure: picked %s", a)
	}
	// A verdict from another QEMU or host kernel, or an old one, is stale.
	for name, edit := range map[string]func(*accelRecord){
		"another host": func(r *accelRecord) { r.Host = "kernel 0.0.1, /opt/qemu (1 bytes, 2001-01-01T00:00:00Z)" },
		"a week old":   func(r *accelRecord) { r.At = time.Now().Add(-accelRetryAfter - time.Hour) },
	} {
		r := d2.broke
		edit(&r)
		b, _ := json.Marshal(r)
		if err := os.WriteFile(d.accelPath(), b, 0o644); err != nil {
			t.Fatal(err)
		}
		d3 := New(Config{StateDir: d.cfg.StateDir})
		d3.kvmOpens = func() bool { return true }
		if a, _, _ := d3.chooseAccel(vm.Spec{}); a != vm.AccelKVM {
			t.Errorf("%s: a stale record made auto pick %s, want kvm", name, a)
		}
	}
	// Explicit TCG or an explicit KVM choice never falls back.
	if d.Fallback(&process{autoAccel: false, plan: plan{accel: vm.AccelKVM}}, errors.New("x")) {
		t.Error("fell back from an explicit kvm choice")
	}
	if d.Fallback(&process{autoAccel: true, plan: plan{accel: vm.AccelTCG}}, errors.New("x")) {
		t.Error("fell back from tcg")
	}
}

func TestChooseMachine(t *testing.T) {
	tests := []struct {
		arch, machine string
		modular       bool
		want          string
		wantErr       error
	}{
		{arch: "amd64", want: DefaultMachine},
		{arch: "amd64", modular: true, want: vm.MachineQ35},
		{arch: "amd64", machine: vm.MachineQ35, want: vm.MachineQ35},
		{arch: "amd64", machine: vm.MachineMicroVM, want: vm.MachineMicroVM},
		{arch: "amd64", machine: vm.MachineQ35, modular: true, want: vm.MachineQ35},
		// microvm can't find a modular kernel's devices: refused, not
		// booted into a guest that never answers.
		{arch: "amd64", machine: vm.MachineMicroVM, modular: true, wantErr: ErrMachine},
		{arch: "arm64", machine: vm.MachineMicroVM, want: ""},
		{arch: "arm64", modular: true, want: ""},
	}
	for _, tc := range tests {
		name := fmt.Sprintf("%s %q modular=%v", tc.arch, tc.machine, tc.modular)
		got, err := chooseMachine(tc.arch, vm.Spec{Machine: tc.machine, ModularKernel: tc.modular})
		if !errors.Is(err, tc.wantErr) || got != tc.want {
			t.Errorf("%s: %q, %v; want %q, %v", name, got, err, tc.want, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "set machine to q35") {
			t.Errorf("%s: error %q does not say the fix", name, err)
		}
	}
}

// TestBareArgsFollowsMachine: the boot benchmark's bare boot runs on the
// machine type the product would use for the same spec.
func TestBareArgsFollowsMachine(t *testing.T) {
	dir := t.TempDir()
	spec := testSpec()
	spec.Shares = nil
	spec.RunDir = filepath.Join(dir, "run")
	spec.Kernel, spec.Initramfs, spec.RootDisk = filepath.Join(dir, "k"), filepath.Join(dir, "i"), filepath.Join(dir, "r")
	for _, f := range []string{spec.Kernel, spec.Initramfs, spec.RootDisk} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := New(Config{QEMU: "/bin/true", NoVsock: true})
	tests := []struct {
		machine string
		modular bool
		want    string
	}{
		{"", false, DefaultMachine},
		{vm.MachineMicroVM, false, vm.MachineMicroVM},
		{vm.MachineQ35, false, vm.MachineQ35},
		{"", true, vm.MachineQ35},
	}
	for _, tc := range tests {
		s := spec
		s.Machine, s.ModularKernel = tc.machine, tc.modular
		_, args, err := d.BareArgs(s)
		if err != nil {
			t.Fatal(err)
		}
		m := flagValues(args, "-machine")
		if len(m) != 1 || !strings.HasPrefix(m[0], tc.want+",") {
			t.Errorf("machine %q modular=%v: -machine %q, want %s", tc.machine, tc.modular, m, tc.want)
		}
	}
}
