//go:build linux

// Package qemu is the Linux VM driver: QEMU for the machine, virtiofsd for
// the shared folders, a virtio-serial port (or vsock where the host has
// vhost-vsock) for the guest agent.
package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/vm"
)

// Config locates the tools and where the driver remembers what it learned.
type Config struct {
	QEMU      string // path; default: qemu-system-<arch> from PATH
	Virtiofsd string // path; default: the first of the known install places
	// StateDir keeps accel.json, the outcome of trying KVM on this host
	// (DefaultStateDir: shared by every data dir of the user). Without it
	// the driver tries KVM on every boot.
	StateDir string
	// KVMBootTimeout bounds a KVM attempt. A KVM guest reaches its agent in
	// a second or two; past this, "auto" falls back to TCG.
	KVMBootTimeout time.Duration
	// TCGBootTimeout bounds a boot under emulation.
	TCGBootTimeout time.Duration
	// KillWithParent makes QEMU and virtiofsd die with this process (tests).
	KillWithParent bool
	// NoVsock keeps the agent on virtio-serial even where the host offers
	// vhost-vsock (tests whose stand-in QEMU speaks only a unix socket).
	NoVsock bool
}

// Driver boots VMs under QEMU.
type Driver struct {
	cfg Config

	// kvmOpens reports whether /dev/kvm can be opened; tests replace it.
	kvmOpens func() bool

	mu    sync.Mutex
	broke accelRecord // KVMBroken: learned this run or read from accel.json
}

// New returns a driver. It doesn't look for the binaries yet; Start does,
// and says how to install what is missing.
func New(cfg Config) *Driver {
	if cfg.KVMBootTimeout == 0 {
		cfg.KVMBootTimeout = 20 * time.Second
	}
	if cfg.TCGBootTimeout == 0 {
		cfg.TCGBootTimeout = 3 * time.Minute
	}
	d := &Driver{cfg: cfg, kvmOpens: kvmUsable}
	d.broke = d.loadAccel()
	return d
}

// Name implements vm.Driver.
func (d *Driver) Name() string { return "qemu" }

// ErrMissingTool is returned when QEMU or virtiofsd isn't installed.
var ErrMissingTool = agentproto.Class(agentproto.ErrUnsupported, "required program not found")

// DefaultStateDir is where drivers keep what they learned about the host:
// the user's cache folder, so that a KVM that hangs costs one timed-out
// attempt per host rather than one per data dir. Deleting it is harmless.
func DefaultStateDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "osaurus-sandbox", "qemu")
}

// accelRecord is accel.json.
type accelRecord struct {
	KVMBroken bool      `json:"kvmBroken"`
	Reason    string    `json:"reason,omitempty"`
	Host      string    `json:"host,omitempty"` // hostKey when it was learned
	At        time.Time `json:"at"`
}

// accelRetryAfter: a verdict this old is tried again; a KVM attempt that
// timed out on a host that was merely overloaded is not held forever.
const accelRetryAfter = 7 * 24 * time.Hour

func (d *Driver) accelPath() string {
	if d.cfg.StateDir == "" {
		return ""
	}
	return filepath.Join(d.cfg.StateDir, "accel.json")
}

// hostKey names what whether KVM works depends on: the host kernel and
// the QEMU binary.
func (d *Driver) hostKey() string {
	var u unix.Utsname
	key := "kernel ?"
	if unix.Uname(&u) == nil {
		key = "kernel " + unix.ByteSliceToString(u.Release[:])
	}
	if q, err := findProgram(d.cfg.QEMU, []string{qemuBinary()}, ""); err == nil {
		if st, err := os.Stat(q); err == nil {
			key += fmt.Sprintf(", %s (%d bytes, %s)", q, st.Size(), st.ModTime().UTC().Format(time.RFC3339))
		}
	}
	return key
}

// loadAccel reads what an earlier run learned. A record made under another
// host kernel or QEMU, or long ago, is stale: KVM may work now.
func (d *Driver) loadAccel() accelRecord {
	var r accelRecord
	p := d.accelPath()
	if p == "" {
		return r
	}
	b, err := os.ReadFile(p)
	if err != nil || json.Unmarshal(b, &r) != nil || r.Host != d.hostKey() || time.Since(r.At) > accelRetryAfter {
		return accelRecord{}
	}
	return r
}

// kvmUsable reports whether /dev/kvm can be opened; that it then actually
// boots a guest is only learned by trying.
func kvmUsable() bool {
	if runtime.GOOS != "linux" {
		return false
	}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// chooseAccel decides the accelerator for spec; auto reports whether the
// choice was automatic (and so may fall back), reason why auto chose TCG.
func (d *Driver) chooseAccel(spec vm.Spec) (accel string, auto bool, reason string) {
	switch spec.Accel {
	case vm.AccelKVM, vm.AccelTCG:
		return spec.Accel, false, ""
	}
	d.mu.Lock()
	broke := d.broke
	d.mu.Unlock()
	switch {
	case broke.KVMBroken:
		return vm.AccelTCG, true, broke.Reason
	case !d.kvmOpens():
		return vm.AccelTCG, true, "/dev/kvm is missing or can't be opened by this user"
	}
	return vm.AccelKVM, true, ""
}

// Fallback implements vm.Fallbacker: an automatic KVM attempt that failed
// to reach the agent, however it failed, is remembered as broken (for this
// host kernel and QEMU) and retried under TCG.
func (d *Driver) Fallback(failed vm.Process, cause error) bool {
	p, ok := failed.(*process)
	if !ok || !p.autoAccel || p.plan.accel != vm.AccelKVM {
		return false
	}
	rec := accelRecord{
		KVMBroken: true,
		Reason:    "a KVM attempt failed: " + oneLine(cause),
		Host:      d.hostKey(),
		At:        time.Now().UTC(),
	}
	d.mu.Lock()
	d.broke = rec
	d.mu.Unlock()
	if path := d.accelPath(); path != "" {
		b, _ := json.MarshalIndent(rec, "", "  ")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			// Best effort: without the record the next boot tries KVM
			// again and falls back again.
			_ = atomicfile.WriteFile(path, b, 0o644)
		}
	}
	return true
}

// oneLine shortens an error to its first line, bounded, for status lines.
func oneLine(err error) string {
	if err == nil {
		return "unknown cause"
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func findProgram(explicit string, candidates []string, hint string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrMissingTool, explicit, err)
		}
		return explicit, nil
	}
	for _, c := range candidates {
		if strings.HasPrefix(c, "/") {
			if st, err := os.Stat(c); err == nil && st.Mode()&0o111 != 0 {
				return c, nil
			}
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s (%s)", ErrMissingTool, candidates[0], hint)
}

// virtiofsdCandidates lists where distributions put virtiofsd: the Rust
// one (its own package) first, then the C one from qemu-system-common.
var virtiofsdCandidates = []string{
	"virtiofsd", "/usr/libexec/virtiofsd", "/usr/lib/qemu/virtiofsd", "/usr/lib/virtiofsd",
}

// vsockCID picks a guest context id when the host can do vhost-vsock.
func (d *Driver) vsockCID() uint32 {
	if d.cfg.NoVsock {
		return 0
	}
	f, err := os.OpenFile("/dev/vhost-vsock", os.O_RDWR, 0)
	if err != nil {
		return 0
	}
	f.Close()
	// CIDs 0-2 are reserved; a random one avoids clashing with other VMs.
	return 3 + rand.Uint32N(1<<30)
}

// Start implements vm.Driver.
func (d *Driver) Start(ctx context.Context, spec vm.Spec) (vm.Process, error) {
	c, err := d.prepare(spec)
	if err != nil {
		return nil, err
	}
	return startProcess(ctx, c)
}

// BareArgs returns the QEMU binary and command line the driver would run
// for spec, less the shares (they need virtiofsd running). The boot
// benchmark boots a minimal initramfs with them to measure the limit on
// the very machine, firmware, CPU, memory and kernel flags the product
// uses: built by the same code, they can't drift apart.
func (d *Driver) BareArgs(spec vm.Spec) (qemu string, args []string, err error) {
	spec.Shares = nil
	c, err := d.prepare(spec)
	if err != nil {
		return "", nil, err
	}
	return c.qemu, c.plan.args(c.spec), nil
}

// prepare checks spec and the host and decides the QEMU invocation.
func (d *Driver) prepare(spec vm.Spec) (processConfig, error) {
	var none processConfig
	if err := spec.Validate(); err != nil {
		return none, err
	}
	qemuPath, err := findProgram(d.cfg.QEMU, []string{qemuBinary()}, "install it: apt-get install qemu-system-x86")
	if err != nil {
		return none, err
	}
	var fsd string
	if len(spec.Shares) > 0 {
		fsd, err = findProgram(d.cfg.Virtiofsd, virtiofsdCandidates, "install it: apt-get install qemu-system-common, or the virtiofsd package")
		if err != nil {
			return none, err
		}
	}
	for _, f := range []struct{ field, path string }{{"kernel", spec.Kernel}, {"initramfs", spec.Initramfs}, {"root disk", spec.RootDisk}} {
		if _, err := os.Stat(f.path); err != nil {
			return none, fmt.Errorf("vm spec: %s: %w", f.field, err)
		}
	}
	for _, sh := range spec.Shares {
		if st, err := os.Stat(sh.HostPath); err != nil || !st.IsDir() {
			return none, fmt.Errorf("vm spec: share %s: host folder %s: %w", sh.Tag, sh.HostPath, errors.Join(err, fs.ErrNotExist))
		}
	}
	if err := os.MkdirAll(spec.RunDir, 0o700); err != nil {
		return none, fmt.Errorf("run dir: %w", err)
	}
	if spec.ConsoleLog == "" {
		spec.ConsoleLog = filepath.Join(spec.RunDir, "console.log")
	}
	l := newLayout(spec.RunDir, len(spec.Shares))
	if len(l.agentSock) >= 104 {
		return none, fmt.Errorf("vm spec: run dir %s: path too long for a unix socket; use a shorter data dir", spec.RunDir)
	}
	machine, err := chooseMachine(runtime.GOARCH, spec)
	if err != nil {
		return none, err
	}
	accel, auto, reason := d.chooseAccel(spec)
	pl := plan{
		arch:      runtime.GOARCH,
		machine:   machine,
		accel:     accel,
		vsockCID:  d.vsockCID(),
		layout:    l,
		consoleTT: "ttyS0",
	}
	if runtime.GOARCH == "amd64" && accel == vm.AccelTCG && !spec.ModularKernel {
		if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
			pl.lpj = hostLPJ(string(b), ownKernelHZ)
		}
	}
	if runtime.GOARCH == "arm64" {
		pl.consoleTT = "ttyAMA0"
	} else if fw := "/usr/share/qemu/qboot.rom"; fileExists(fw) {
		// qboot skips SeaBIOS's device probing: a faster start under TCG.
		pl.firmware = fw
	}
	timeout := d.cfg.TCGBootTimeout
	if accel == vm.AccelKVM {
		timeout = d.cfg.KVMBootTimeout
	}
	return processConfig{
		qemu:           qemuPath,
		virtiofsd:      fsd,
		spec:           spec,
		plan:           pl,
		autoAccel:      auto,
		accelReason:    reason,
		bootTimeout:    timeout,
		killWithParent: d.cfg.KillWithParent,
	}, nil
}

// DefaultMachine is the x86_64 machine type of a spec that names none and
// whose kernel has its drivers built in (see docs/performance.md).
const DefaultMachine = vm.MachineQ35

// ErrMachine: the spec asks for a machine type its kernel can't boot on.
var ErrMachine = agentproto.Class(agentproto.ErrInvalid, "machine type unsuitable for the kernel")

// chooseMachine decides the x86_64 machine type ("" on arm64, where QEMU's
// virt is the only one). A kernel that loads its drivers as modules gets
// q35: a distribution kernel has virtio-mmio, which microvm's devices
// need, only as a module that nothing loads and that can't see the
// devices microvm names on the kernel command line.
func chooseMachine(arch string, spec vm.Spec) (string, error) {
	if arch == "arm64" {
		return "", nil
	}
	switch spec.Machine {
	case vm.MachineQ35:
		return vm.MachineQ35, nil
	case vm.MachineMicroVM:
		if spec.ModularKernel {
			return "", fmt.Errorf("vm spec: machine: %w: microvm needs virtio-mmio built into the kernel, and this image's kernel loads its drivers as modules; set machine to q35, or empty to pick automatically", ErrMachine)
		}
		return vm.MachineMicroVM, nil
	}
	if spec.ModularKernel {
		return vm.MachineQ35, nil
	}
	return DefaultMachine, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
