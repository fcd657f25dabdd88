//go:build linux

package qemu

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/osaurus/osaurus-sandbox/vm"
)

// AgentPortName is the virtio-serial port the guest agent serves on.
const AgentPortName = "org.osaurus.agent.0"

// AgentVsockPort is the vsock port the guest agent listens on.
const AgentVsockPort = 1024

// layout names the files of one running VM inside spec.RunDir.
type layout struct {
	agentSock string
	qmpSock   string
	pidFile   string
	fsSocks   []string // one per share, same order
	fsPids    []string
}

func newLayout(runDir string, shares int) layout {
	l := layout{
		agentSock: runDir + "/agent.sock",
		qmpSock:   runDir + "/qmp.sock",
		pidFile:   runDir + "/qemu.pid",
	}
	for i := range shares {
		l.fsSocks = append(l.fsSocks, fmt.Sprintf("%s/fs%d.sock", runDir, i))
		l.fsPids = append(l.fsPids, fmt.Sprintf("%s/fs%d.pid", runDir, i))
	}
	return l
}

// plan is one QEMU invocation, decided before anything starts.
type plan struct {
	arch      string // GOARCH of host and guest
	accel     string // vm.AccelKVM or vm.AccelTCG
	vsockCID  uint32 // 0: use virtio-serial for the agent
	firmware  string // optional -bios, e.g. qboot for fast x86 boots
	machine   string // x86_64: vm.MachineQ35 or vm.MachineMicroVM
	layout    layout
	consoleTT string // kernel console device
	lpj       int64  // x86 under TCG with our kernel: preset loops_per_jiffy, 0 for none
}

// kernelCmdline is what the guest kernel gets.
func (p plan) kernelCmdline(spec vm.Spec) string {
	var port string
	var vsock uint32
	if p.vsockCID != 0 {
		vsock = AgentVsockPort
	} else {
		port = AgentPortName
	}
	words := []string{
		"console=" + p.consoleTT,
		// quiet: a serial console under TCG costs boot time per line.
		"quiet", "loglevel=3",
		// A panicking guest must end the VM, not hang it; with -no-reboot
		// QEMU then exits and the driver reports why.
		"panic=-1",
		// Under TCG on a busy host the kernel's IO-APIC timer check can
		// misfire and panic; a VM's timer needs no such check.
		"no_timer_check",
		"rdinit=/init",
	}
	if p.arch != "arm64" && p.machine == vm.MachineMicroVM {
		// microvm has no reset register or keyboard controller: a
		// restart goes straight to a triple fault, which QEMU under
		// -no-reboot takes as the end of the VM.
		words = append(words, "reboot=t")
	}
	if p.lpj > 0 {
		// Under TCG the guest finds its TSC unsynchronised and calibrates
		// each secondary CPU's delay loop the slow way (0.45 s of a 1.7 s
		// boot to /init). x86 times its delays with the TSC, so a preset
		// value changes nothing else.
		words = append(words, "lpj="+strconv.FormatInt(p.lpj, 10))
	}
	words = append(words, spec.BootParams(port, vsock).Encode())
	if spec.Cmdline != "" {
		words = append(words, spec.Cmdline)
	}
	return strings.Join(words, " ")
}

// args builds QEMU's command line.
func (p plan) args(spec vm.Spec) []string {
	mem := strconv.Itoa(spec.MemoryMiB)
	a := []string{
		"-name", "osaurus-sandbox",
		"-nodefaults", "-no-user-config", "-nographic",
		"-no-reboot",
	}
	switch p.arch {
	case "arm64":
		a = append(a, "-machine", "virt,accel="+p.accel)
		if p.accel == vm.AccelKVM {
			a = append(a, "-cpu", "host")
		} else {
			a = append(a, "-cpu", "max")
		}
	default:
		if p.machine == vm.MachineMicroVM {
			// microvm: virtio on MMIO transports, no PCI bus to scan,
			// its own firmware (qboot), no option ROMs. No ACPI: with it
			// the guest takes microvm for hardware-reduced ACPI, which
			// has no PIT or PIC, and under TCG (no kvmclock) finds no
			// timer and hangs. Without it QEMU names the transports on
			// the kernel command line (auto-kernel-cmdline) and the
			// kernel takes CPUs and interrupts from the MP table. pit
			// and pic are asked for: "auto" leaves them out under TCG.
			a = append(a, "-machine", "microvm,accel="+p.accel+",acpi=off,pcie=off,pit=on,pic=on,rtc=on,x-option-roms=off,memory-backend=mem",
				// QEMU's virtio-mmio is legacy (version 1) by default,
				// which virtiofsd's vhost-user refuses.
				"-global", "virtio-mmio.force-legacy=false")
		} else {
			// q35, not pc (i440fx): the guest kernel evaluates the PCI
			// host bridge's ACPI _PRT each time it enables a PCI device.
			// QEMU before 9.2 builds pc's _PRT in AML with a 128-step loop,
			// which the kernel's interpreter runs under TCG in 0.2-0.8 s per
			// device: six virtio functions made virtio_pci's probe take
			// seconds (3.9 s against 0.15 s with q35's static table, same
			// loaded machine). q35's PCIe root bus holds the same devices.
			a = append(a, "-machine", "q35,accel="+p.accel)
		}
		if p.accel == vm.AccelKVM {
			a = append(a, "-cpu", "host")
		} else {
			a = append(a, "-cpu", "max")
		}
		if p.firmware != "" && p.machine != vm.MachineMicroVM {
			a = append(a, "-bios", p.firmware)
		}
	}
	a = append(a,
		"-smp", strconv.Itoa(spec.CPUs),
		"-m", mem+"M",
		// vhost-user-fs needs guest RAM shared with virtiofsd.
		"-object", "memory-backend-memfd,id=mem,size="+mem+"M,share=on",
	)
	if p.machine != vm.MachineMicroVM {
		// microvm takes the backend as a machine property: it has no NUMA.
		a = append(a, "-numa", "node,memdev=mem")
	}
	a = append(a,
		"-kernel", spec.Kernel,
		"-initrd", spec.Initramfs,
		"-append", p.kernelCmdline(spec),
		"-chardev", "file,id=console,path="+spec.ConsoleLog+",append=on",
		"-serial", "chardev:console",
		"-drive", "file="+spec.RootDisk+",if=none,id=root,format=raw,cache=writeback,discard=unmap",
		"-device", p.virtio("virtio-blk")+",drive=root",
		"-device", p.virtio("virtio-rng"),
		"-qmp", "unix:"+p.layout.qmpSock+",server=on,wait=off",
		"-pidfile", p.layout.pidFile,
	)
	for i, sh := range spec.Shares {
		id := "fs" + strconv.Itoa(i)
		a = append(a,
			"-chardev", "socket,id="+id+",path="+p.layout.fsSocks[i],
			"-device", p.virtio("vhost-user-fs")+",chardev="+id+",tag="+sh.Tag,
		)
	}
	if spec.Network == vm.NetworkOutbound {
		// slirp's defaults are the layout the guest expects: guest
		// 10.0.2.15/24, gateway 10.0.2.2 (the host's loopback), DNS 10.0.2.3.
		a = append(a,
			"-netdev", "user,id=net0,net=10.0.2.0/24,host=10.0.2.2,dns=10.0.2.3",
			"-device", p.virtio("virtio-net")+",netdev=net0",
		)
	}
	if p.vsockCID != 0 {
		a = append(a, "-device", p.virtio("vhost-vsock")+",guest-cid="+strconv.FormatUint(uint64(p.vsockCID), 10))
	} else {
		a = append(a,
			"-device", p.virtio("virtio-serial"),
			"-chardev", "socket,id=agent,path="+p.layout.agentSock+",server=on,wait=off",
			"-device", "virtserialport,chardev=agent,name="+AgentPortName,
		)
	}
	return a
}

// virtio names the QEMU device of a virtio kind on this plan's transport:
// PCI functions on q35 and arm64's virt, MMIO transports on microvm.
func (p plan) virtio(kind string) string {
	if p.arch != "arm64" && p.machine == vm.MachineMicroVM {
		return kind + "-device"
	}
	return kind + "-pci"
}

// ownKernelHZ is the tick rate of the product's own kernel
// (assets/kernel/common.config: CONFIG_HZ_100).
const ownKernelHZ = 100

// hostLPJ is loops_per_jiffy for a guest tick of hz at the host's CPU
// clock (the TSC a TCG guest sees runs at the host's), from the first
// "cpu MHz" line of cpuinfo; 0 when it can't be read.
func hostLPJ(cpuinfo string, hz int) int64 {
	for line := range strings.SplitSeq(cpuinfo, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) != "cpu MHz" {
			continue
		}
		mhz, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || mhz <= 0 {
			return 0
		}
		return int64(mhz * 1e6 / float64(hz))
	}
	return 0
}

// qemuBinary is the system emulator for the host's architecture.
func qemuBinary() string {
	if runtime.GOARCH == "arm64" {
		return "qemu-system-aarch64"
	}
	return "qemu-system-x86_64"
}
