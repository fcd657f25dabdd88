// Package core is the part of the vz driver that does not call Apple's
// Virtualization framework: checking a spec against the host's limits and
// the files it names, composing the kernel command line, and turning the
// framework's state changes into a vm.Process. It builds on every OS, so
// it is tested on Linux; the darwin-only package vm/vz only makes the
// framework calls.
package core

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/vm"
)

// AgentPort is the vsock port the guest agent listens on.
const AgentPort uint32 = 1024

// MaxTagLen is the longest VirtioFS tag the framework accepts (bytes).
const MaxTagLen = 36

// Limits are the host's bounds on a VM's size, as the framework reports
// them on this Mac.
type Limits struct {
	MinCPUs, MaxCPUs     uint
	MinMemory, MaxMemory uint64 // bytes
}

// Plan is what the driver configures, already checked.
type Plan struct {
	Kernel      string
	Initrd      string
	Cmdline     string
	CPUs        uint
	MemoryBytes uint64
	RootDisk    string
	Shares      []vm.Share
	NAT         bool   // a NIC behind the framework's NAT; none otherwise
	ConsoleLog  string // "" for no console device
}

// NewPlan checks spec against the host limits and the files it names and
// returns the settings to apply. goarch is the host's architecture (the
// kernel format depends on it). Errors name the spec field; a spec this
// Mac can't run (too many CPUs, too much memory) wraps vm.ErrUnsupported.
// When spec.ConsoleLog is set, the file is created if missing, since the
// framework only appends to it.
func NewPlan(spec vm.Spec, lim Limits, goarch string) (Plan, error) {
	if err := spec.Validate(); err != nil {
		return Plan{}, err
	}
	if spec.Network == vm.NetworkOutbound && spec.NetworkConfig == vm.NetworkConfigStatic {
		return Plan{}, fmt.Errorf("%w: vm spec: network config: %q, vz's NAT is configured by DHCP only (macOS picks its subnet)",
			vm.ErrUnsupported, spec.NetworkConfig)
	}
	cpus := uint(spec.CPUs)
	switch {
	case cpus < lim.MinCPUs:
		return Plan{}, fmt.Errorf("vm spec: cpus: %d, vz needs at least %d", cpus, lim.MinCPUs)
	case cpus > lim.MaxCPUs:
		return Plan{}, fmt.Errorf("%w: vm spec: cpus: %d, this Mac allows at most %d", vm.ErrUnsupported, cpus, lim.MaxCPUs)
	}
	mem := uint64(spec.MemoryMiB) << 20
	switch {
	case mem < lim.MinMemory:
		return Plan{}, fmt.Errorf("vm spec: memory: %d MiB, vz needs at least %d MiB", spec.MemoryMiB, lim.MinMemory>>20)
	case mem > lim.MaxMemory:
		return Plan{}, fmt.Errorf("%w: vm spec: memory: %d MiB, this Mac allows at most %d MiB", vm.ErrUnsupported, spec.MemoryMiB, lim.MaxMemory>>20)
	}
	if err := CheckKernel(spec.Kernel, goarch); err != nil {
		return Plan{}, err
	}
	if err := checkRegular("initramfs", spec.Initramfs); err != nil {
		return Plan{}, err
	}
	if err := CheckRawDisk(spec.RootDisk); err != nil {
		return Plan{}, err
	}
	if err := checkShares(spec.Shares); err != nil {
		return Plan{}, err
	}
	if spec.ConsoleLog != "" {
		if err := touch(spec.ConsoleLog); err != nil {
			return Plan{}, fmt.Errorf("vm spec: console log: %w", err)
		}
	}
	return Plan{
		Kernel:      spec.Kernel,
		Initrd:      spec.Initramfs,
		Cmdline:     Cmdline(spec),
		CPUs:        cpus,
		MemoryBytes: mem,
		RootDisk:    spec.RootDisk,
		Shares:      append([]vm.Share(nil), spec.Shares...),
		NAT:         spec.Network == vm.NetworkOutbound,
		ConsoleLog:  spec.ConsoleLog,
	}, nil
}

// Cmdline is the kernel command line: the console on the first virtio
// console port (hvc0), the agent's boot parameters with the vsock
// transport, then the spec's extra words. The NIC is always configured by
// DHCP: the framework's NAT hands out addresses from a subnet macOS picks
// (usually 192.168.64.0/24), so no static layout is right.
func Cmdline(spec vm.Spec) string {
	spec.NetworkConfig = vm.NetworkConfigDHCP
	words := []string{"console=hvc0", spec.BootParams("", AgentPort).Encode()}
	if extra := strings.TrimSpace(spec.Cmdline); extra != "" {
		words = append(words, extra)
	}
	return strings.Join(words, " ")
}

// ErrKernelFormat: the kernel file is not one the framework boots.
var ErrKernelFormat = agentproto.Class(agentproto.ErrUnsupported, "kernel format not bootable by vz")

// CheckKernel checks that path holds a kernel vz can boot on goarch. On
// arm64 that is an uncompressed Linux Image: the framework does not
// decompress, and a gzip'd Image fails without a useful message.
func CheckKernel(path, goarch string) error {
	head, err := readHead(path, 64)
	if err != nil {
		return fmt.Errorf("vm spec: kernel: %w", err)
	}
	if bytes.HasPrefix(head, []byte{0x1f, 0x8b}) {
		return fmt.Errorf("vm spec: kernel %s: gzip-compressed; %w: vz needs the uncompressed Image (gunzip it first)", path, ErrKernelFormat)
	}
	// The arm64 boot protocol puts "ARM\x64" at offset 56 of the Image.
	if goarch == "arm64" && (len(head) < 60 || string(head[56:60]) != "ARM\x64") {
		return fmt.Errorf("vm spec: kernel %s: %w: not an arm64 Linux Image (no ARM\\x64 magic at offset 56)", path, ErrKernelFormat)
	}
	return nil
}

// ErrDiskFormat: the root disk is not a raw image the framework accepts.
var ErrDiskFormat = agentproto.Class(agentproto.ErrUnsupported, "root disk not usable by vz")

// CheckRawDisk checks that path is a raw disk image whose size is a
// multiple of 512 bytes, which the framework requires.
func CheckRawDisk(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("vm spec: root disk: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("vm spec: root disk %s: %w: not a regular file", path, ErrDiskFormat)
	}
	if size := fi.Size(); size == 0 || size%512 != 0 {
		want := (size + 511) / 512 * 512
		if want == 0 {
			want = 512
		}
		return fmt.Errorf("vm spec: root disk %s: %w: size %d is not a positive multiple of 512 bytes; grow it with: truncate -s %d %s",
			path, ErrDiskFormat, size, want, path)
	}
	head, err := readHead(path, 4)
	if err != nil {
		return fmt.Errorf("vm spec: root disk: %w", err)
	}
	if string(head) == "QFI\xfb" {
		return fmt.Errorf("vm spec: root disk %s: %w: a qcow2 image; vz takes raw images only (qemu-img convert -O raw)", path, ErrDiskFormat)
	}
	return nil
}

func checkShares(shares []vm.Share) error {
	seen := map[string]bool{}
	for _, sh := range shares {
		switch {
		case len(sh.Tag) > MaxTagLen:
			return fmt.Errorf("vm spec: share %q: tag longer than %d bytes", sh.Tag, MaxTagLen)
		case seen[sh.Tag]:
			return fmt.Errorf("vm spec: share %q: tag used twice", sh.Tag)
		}
		seen[sh.Tag] = true
		fi, err := os.Stat(sh.HostPath)
		if err != nil {
			return fmt.Errorf("vm spec: share %q: %w", sh.Tag, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("vm spec: share %q: %s is not a directory", sh.Tag, sh.HostPath)
		}
	}
	return nil
}

func checkRegular(field, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("vm spec: %s: %w", field, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("vm spec: %s %s: not a regular file", field, path)
	}
	return nil
}

func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, n)
	m, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return head[:m], nil
}

func touch(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}
