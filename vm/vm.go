// Package vm boots the sandbox VM through a hypervisor driver and connects
// to the guest agent inside it.
//
// A Driver knows one hypervisor (QEMU on Linux, Apple's Virtualization
// framework on macOS). It only starts the VM and exposes the raw agent
// channel; everything above that (handshake, state events, graceful stop,
// failing calls fast when the VM dies) lives here and is shared.
package vm

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/vm/bootparams"
)

// Sentinel errors.
var (
	// ErrVMDied wraps every failure caused by the hypervisor going away.
	ErrVMDied = agentproto.Class(agentproto.ErrUnavailable, "the VM died")
	// ErrBootTimeout: the guest agent never answered.
	ErrBootTimeout = agentproto.Class(agentproto.ErrTimeout, "the guest agent did not answer in time")
	// ErrNoVM: there is no running VM to attach to.
	ErrNoVM = agentproto.Class(agentproto.ErrUnavailable, "no running VM found")
	// ErrUnsupported: the host can't run this spec (missing hypervisor
	// feature, OS too old, ...). The message says what is needed.
	ErrUnsupported = agentproto.Class(agentproto.ErrUnsupported, "unsupported on this host")
)

// Network modes.
const (
	NetworkOutbound = "outbound" // one NIC behind the hypervisor's NAT
	NetworkNone     = "none"     // no NIC at all
)

// How the guest configures its NIC under NetworkOutbound.
const (
	// NetworkConfigStatic: the NAT layout is fixed on the kernel command
	// line (QEMU: 10.0.2.15/24 via 10.0.2.2, DNS 10.0.2.3). No DHCP round
	// trip, so the fastest boot. Only for NATs whose layout we choose.
	NetworkConfigStatic = "static"
	// NetworkConfigDHCP: the guest asks the NAT's DHCP server. vz always
	// uses it, since macOS picks the NAT's subnet.
	NetworkConfigDHCP = "dhcp"
)

// Accelerator choices for drivers that have a choice (QEMU).
const (
	AccelAuto = "auto"
	AccelKVM  = "kvm"
	AccelTCG  = "tcg"
)

// Machine types for drivers that have a choice (QEMU on x86_64). Empty is
// the driver's default.
const (
	MachineQ35     = "q35"     // PCIe and ACPI: finds what any kernel's modules drive
	MachineMicroVM = "microvm" // virtio-mmio, no PCI or ACPI: needs virtio-mmio built in
)

// Share is a host folder exposed to the guest over VirtioFS.
type Share struct {
	Tag       string // device tag, e.g. "workspace"
	HostPath  string
	GuestPath string // mount point, e.g. /workspace
}

// Spec is everything needed to boot the VM once.
type Spec struct {
	Kernel     string // kernel image (bzImage on x86, uncompressed Image on arm64 vz)
	Initramfs  string // newc cpio with the guest agent as /init
	Cmdline    string // extra kernel command line words
	RootDisk   string // raw ext4 image, attached as the first virtio disk (/dev/vda)
	Shares     []Share
	Network    string // NetworkOutbound or NetworkNone
	CPUs       int
	MemoryMiB  int
	ConsoleLog string // the guest console is appended here
	RunDir     string // sockets and pid files; keep the path short (unix socket limit)
	Accel      string // AccelAuto (default), AccelKVM or AccelTCG; ignored by vz
	Debug      bool   // verbose guest agent logging
	// NetworkConfig is NetworkConfigStatic or NetworkConfigDHCP; "" is the
	// driver's default (QEMU: static, vz: DHCP). Ignored for NetworkNone.
	NetworkConfig string
	// Machine is MachineQ35, MachineMicroVM or "" for the driver's
	// default; ignored by vz and on arm64.
	Machine string
	// ModularKernel: the kernel loads its drivers as modules from the
	// initramfs (the image's manifest has a modules artifact), so it may
	// lack what a machine without PCI needs built in (a distribution
	// kernel has virtio-mmio only as a module). The default machine is
	// then one its modules find. The provisioner knows this, not the
	// kernel file, so whoever makes the spec says it.
	ModularKernel bool
}

// Validate checks the fields every driver relies on.
func (s Spec) Validate() error {
	switch {
	case s.Kernel == "":
		return fmt.Errorf("vm spec: kernel: required")
	case s.Initramfs == "":
		return fmt.Errorf("vm spec: initramfs: required")
	case s.RootDisk == "":
		return fmt.Errorf("vm spec: root disk: required")
	case s.RunDir == "":
		return fmt.Errorf("vm spec: run dir: required")
	case s.CPUs < 1:
		return fmt.Errorf("vm spec: cpus: %d, want at least 1", s.CPUs)
	case s.MemoryMiB < 256:
		return fmt.Errorf("vm spec: memory: %d MiB, want at least 256", s.MemoryMiB)
	case s.Network != NetworkOutbound && s.Network != NetworkNone:
		return fmt.Errorf("vm spec: network: %q, want %q or %q", s.Network, NetworkOutbound, NetworkNone)
	}
	switch s.NetworkConfig {
	case "", NetworkConfigStatic, NetworkConfigDHCP:
	default:
		return fmt.Errorf("vm spec: network config: %q, want %q or %q", s.NetworkConfig, NetworkConfigStatic, NetworkConfigDHCP)
	}
	switch s.Accel {
	case "", AccelAuto, AccelKVM, AccelTCG:
	default:
		return fmt.Errorf("vm spec: accel: %q, want auto, kvm or tcg", s.Accel)
	}
	switch s.Machine {
	case "", MachineQ35, MachineMicroVM:
	default:
		return fmt.Errorf("vm spec: machine: %q, want %q, %q or empty for the default", s.Machine, MachineQ35, MachineMicroVM)
	}
	for _, sh := range s.Shares {
		if sh.Tag == "" || sh.HostPath == "" || sh.GuestPath == "" {
			return fmt.Errorf("vm spec: share %+v: tag, host path and guest path are required", sh)
		}
	}
	return nil
}

// BootParams renders the guest agent's boot parameters for this spec. The
// driver fills in the agent channel it provides. An empty NetworkConfig
// means static here; a driver whose NAT is DHCP-only sets it first.
func (s Spec) BootParams(serialPort string, vsockPort uint32) bootparams.Params {
	p := bootparams.Params{
		RootDevice: "/dev/vda",
		SerialPort: serialPort,
		VsockPort:  vsockPort,
		Debug:      s.Debug,
	}
	for _, sh := range s.Shares {
		p.Shares = append(p.Shares, bootparams.Share{Tag: sh.Tag, Mount: sh.GuestPath})
	}
	if s.Network == NetworkOutbound {
		p.Network = bootparams.DefaultNAT
		if s.NetworkConfig == NetworkConfigDHCP {
			p.Network = bootparams.DHCPNAT
		}
	}
	return p
}

// ProcessInfo describes a started VM.
type ProcessInfo struct {
	Driver    string // "qemu", "vz"
	Accel     string // "kvm", "tcg", "vz"
	Transport string // "virtio-serial" or "vsock"
	Pid       int    // hypervisor process, 0 when in-process (vz)
	// BootTimeout is how long to wait for the agent's first answer before
	// declaring the boot failed. It depends on the accelerator.
	BootTimeout time.Duration
	// AccelReason says, when the accelerator is not the one asked for or
	// the best the host offers, why (for example why "auto" chose TCG).
	AccelReason string
	// HypervisorStarted is when the hypervisor process was started, after
	// its helpers (virtiofsd); zero for an in-process hypervisor (vz).
	HypervisorStarted time.Time
}

// Process is a running VM as a driver sees it.
type Process interface {
	// DialAgent connects to the guest agent's channel. It may fail until
	// the guest is up; callers retry.
	DialAgent(ctx context.Context) (net.Conn, error)
	// RequestStop asks the hypervisor to stop the guest gracefully (ACPI
	// power button, vz RequestStop). Best effort.
	RequestStop() error
	// Kill stops the VM at once.
	Kill() error
	// Done is closed when the VM and all its helper processes are gone.
	Done() <-chan struct{}
	// Err says why the VM ended: nil for a clean guest power-off.
	Err() error
	Info() ProcessInfo
}

// Driver starts VMs on one hypervisor.
type Driver interface {
	Name() string
	Start(ctx context.Context, spec Spec) (Process, error)
}

// Fallbacker is implemented by drivers that can retry a boot on a slower
// but surer configuration when an attempt failed to reach the guest agent,
// whatever the reason: the hypervisor aborted, exited or the guest hung
// (QEMU: KVM → TCG). Fallback is told which attempt failed and why, and
// reports whether to try again; the driver remembers the outcome, with the
// cause, for later boots.
type Fallbacker interface {
	Fallback(failed Process, cause error) bool
}

// Pauser is implemented by processes whose hypervisor can pause the
// guest in place (QEMU's stop/cont, vz Pause/Resume): its vCPUs stop, so
// it costs no CPU, and its memory and devices stay as they are.
type Pauser interface {
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
}

// Attacher is implemented by drivers that can adopt a VM left running by an
// earlier process of the app (which crashed or was killed). Attach returns
// ErrNoVM when there is none.
type Attacher interface {
	Attach(ctx context.Context, spec Spec) (Process, error)
}
