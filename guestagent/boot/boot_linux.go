//go:build linux

package boot

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent"
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"github.com/osaurus/osaurus-sandbox/guestagent/exec"
	"github.com/osaurus/osaurus-sandbox/guestagent/network"
	"github.com/osaurus/osaurus-sandbox/vm/bootparams"
	"golang.org/x/sys/unix"
)

// Boot contract with the initramfs builder and the host.
const (
	// ModulesDir holds the kernel modules; ModulesDir/order lists their
	// file names (relative to ModulesDir) one per line, dependencies
	// first. No order file means no modules.
	ModulesDir = "/lib/modules"
	newRoot    = "/newroot"
	// Hostname is the guest's host name.
	Hostname = "sandbox"

	rootWait  = 10 * time.Second
	nicWait   = 5 * time.Second
	dhcpWait  = 15 * time.Second
	fatalWait = 3 * time.Second
)

// boot carries the state of the boot sequence.
type boot struct {
	log      *log.Logger
	warnings []string
}

func (b *boot) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.log.Print("warning: ", msg)
	b.warnings = append(b.warnings, msg)
}

// fatal reports a failure the VM cannot run with and powers off, so the
// host sees the VM exit instead of waiting for an agent that never comes.
func (b *boot) fatal(format string, args ...any) {
	b.log.Printf("FATAL: "+format, args...)
	b.log.Print("FATAL: powering off")
	time.Sleep(fatalWait) // let the console drain
	unix.Sync()
	unix.Reboot(offCommand())
	select {} // PID 1 must not return
}

// offCommand is the reboot(2) command that ends the VM. An x86 machine
// without ACPI (QEMU's microvm) can't power off: the kernel only halts
// and QEMU runs on, so there the guest resets, which QEMU, started with
// -no-reboot, takes as the end.
func offCommand() int {
	if runtime.GOARCH == "amd64" {
		if _, err := os.Stat("/sys/firmware/acpi"); err != nil {
			return unix.LINUX_REBOOT_CMD_RESTART
		}
	}
	return unix.LINUX_REBOOT_CMD_POWER_OFF
}

// RunInit is the agent as the VM's PID 1: it boots the guest from the
// initramfs into the root disk and serves the host forever.
func RunInit(agentVersion string) {
	unix.Umask(0o022)
	os.Setenv("PATH", exec.BasePath)
	var clock guestagent.PhaseClock
	clock.Mark("init") // the kernel handed over to /init
	b := &boot{log: log.New(os.Stderr, "sandbox-agent: ", 0)}
	// The reaper comes first: as PID 1 every orphan in the VM is ours.
	reaper, err := exec.NewReaper()
	if err != nil {
		b.fatal("%v", err)
	}
	b.mountEarly()
	b.log.Printf("starting (version %s)", agentVersion)
	// Only a log line per stray signal: off the boot's path.
	go catchFatalSignals(b.log)

	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		b.fatal("read kernel command line: %v", err)
	}
	params, err := bootparams.Parse(string(cmdline))
	if err != nil {
		b.warn("%v", err) // Parse returns what it understood so far
	}
	clock.Mark("early")
	moduleTimes, deferred := b.loadModules(ModulesDir, params)
	clock.Mark("modules")
	// The network needs the NIC's driver (a module, with a kernel that
	// has them) and nothing from the root disk but resolv.conf.
	networkUp := b.startNetwork(params.Network)
	b.switchRoot(params.RootDevice)
	go warmUp(reaper)
	cgroupsMade := b.startCgroups()
	clock.Mark("root")
	sharesMounted := b.startShares(params.Shares)
	b.setupRoot(params)
	b.closeFUSE()
	// Without them agents read each other's temporary files and write
	// the root disk past their quotas: no VM is better than that one.
	if err := account.EnablePrivateTmp(); err != nil {
		b.fatal("private temporary directories: %v", err)
	}
	if err := noServiceStarts(""); err != nil {
		b.fatal("%v", err)
	}
	clock.Mark("mounts")
	networkUp()
	sharesMounted()
	clock.Mark("network")
	cgroups := cgroupsMade()

	uptime, err := guestagent.Uptime()
	if err != nil {
		b.warn("uptime: %v", err)
	}
	modulesReady := make(chan struct{})
	netPolicy := network.NewNetPolicy(b.log)
	netPolicy.AfterModules(modulesReady)
	svc, err := guestagent.NewService(guestagent.Config{
		AgentVersion: agentVersion,
		Reaper:       reaper,
		SetClock:     true,
		Reseed:       true,
		BootSeconds:  uptime,
		Warnings:     b.warnings,
		BootPhases:   append(clock.Phases, moduleTimes...),
		PowerOff:     func(reboot bool) { powerOff(b.log, params, reboot) },
		Logger:       b.log,
		Debug:        params.Debug,
		NetPolicy:    netPolicy,
		// The network policy's modules load once the host is connected,
		// off boot's critical path; the policy waits for them.
		AfterFirstHello: func() {
			b.loadDeferredModules(deferred, modulesReady)
			// Off the boot's path, and out of the first commands' way:
			// only a search without ripgrep runs the disk's copy, and the
			// replacement is atomic. Comparing the two 6 MiB files takes
			// CPU time a booting guest under TCG doesn't have to spare.
			time.AfterFunc(agentCopyDelay, func() {
				if err := refreshAgentCopy(); err != nil {
					b.log.Printf("%s: %v (sandbox_search_files without ripgrep needs it)", AgentCopy, err)
				}
			})
		},
		Cgroups: cgroups,
	})
	if err != nil {
		b.fatal("%v", err)
	}
	if params.SerialPort == "" && params.VsockPort == 0 {
		b.fatal("no transport on the kernel command line (osaurus.port= or osaurus.vsock=)")
	}
	ctx := context.Background()
	if params.SerialPort != "" {
		go svc.ServeSerial(ctx, params.SerialPort)
	}
	if params.VsockPort != 0 {
		go func() {
			if err := svc.ServeVsock(ctx, params.VsockPort); err != nil {
				svc.AddWarning("%v", err)
			}
		}()
	}
	b.log.Printf("ready after %.2fs (serial %q, vsock %d, %d warnings)", uptime, params.SerialPort, params.VsockPort, len(b.warnings))
	select {}
}

type mountSpec struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
}

func (b *boot) mount(m mountSpec, mode os.FileMode) error {
	if err := os.MkdirAll(m.target, mode); err != nil {
		return err
	}
	if err := unix.Mount(m.source, m.target, m.fstype, m.flags, m.data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
	}
	return nil
}

// mountEarly mounts /dev, /proc and /sys in the initramfs and opens the
// console; before that there is nowhere to log.
func (b *boot) mountEarly() {
	const nodev = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	var errs []error
	for _, m := range []mountSpec{
		{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755"},
		{"proc", "/proc", "proc", nodev, ""},
		{"sysfs", "/sys", "sysfs", nodev, ""},
	} {
		if err := b.mount(m, 0o755); err != nil && !errors.Is(err, unix.EBUSY) {
			errs = append(errs, err)
		}
	}
	if f, err := os.OpenFile("/dev/console", os.O_RDWR|unix.O_NOCTTY, 0); err == nil {
		unix.Dup3(int(f.Fd()), 1, 0)
		unix.Dup3(int(f.Fd()), 2, 0)
		f.Close()
	}
	if f, err := os.Open(os.DevNull); err == nil {
		unix.Dup3(int(f.Fd()), 0, 0)
		f.Close()
	}
	for _, err := range errs {
		b.warn("%v", err)
	}
}

// warmUp starts the image's shell once, beside the boot on the VM's other
// CPU. Under emulation a program's first start pays for translating the
// dynamic loader's and the C library's code, which every later command
// shares (a first `true` took 31-48 ms without this, about 20 ms after
// it); the shell's start also reads those files into the page cache.
// While it runs, the codec of the host's first calls is primed.
func warmUp(r *exec.Reaper) {
	attr := &syscall.ProcAttr{
		Dir: "/",
		Env: []string{"PATH=" + exec.BasePath},
		Sys: &syscall.SysProcAttr{Setsid: true},
	}
	_, done, err := r.Start(func() (int, error) {
		return syscall.ForkExec("/bin/sh", []string{"sh", "-c", ":"}, attr)
	})
	agentproto.PrimeCodec()
	if err == nil {
		<-done
	}
}

// loadModules loads the modules listed in dir/order that this boot's
// configuration needs, concurrently where their dependencies allow, except
// the network policy's, which it opens (the root switch deletes their
// files) and returns for loadDeferredModules. It also returns each
// module's load time for the boot breakdown.
func (b *boot) loadModules(dir string, params bootparams.Params) ([]agentproto.BootPhase, []moduleFile) {
	data, err := os.ReadFile(filepath.Join(dir, "order"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		b.warn("modules: %v", err)
		return nil, nil
	}
	skip := unneededModules(params)
	var files []string
	skipped := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		name := strings.TrimSpace(line)
		if name == "" || strings.HasPrefix(name, "#") {
			continue
		}
		if skip[moduleNameOf(name)] {
			skipped++
			continue
		}
		files = append(files, filepath.Join(dir, name))
	}
	now, later := splitDeferred(readModules(files))
	n, failed, times := loadModulesConcurrently(now)
	for _, name := range slices.Sorted(maps.Keys(failed)) {
		b.warn("module %s: %v", name, failed[name])
	}
	for i := range later {
		f, err := os.Open(later[i].path)
		if err != nil {
			b.warn("module %s: %v", later[i].name, err)
			continue
		}
		later[i].f = f
	}
	b.log.Printf("loaded %d kernel modules (%d not needed by this configuration, %d for the network policy after the handshake)", n, skipped, len(later))
	return times, later
}

// loadDeferredModules loads the network policy's modules and then closes
// ready. A failure is logged; the policy then reports that it can't be
// enforced, as on a kernel without the modules.
func (b *boot) loadDeferredModules(mods []moduleFile, ready chan<- struct{}) {
	defer close(ready)
	defer b.disableModules()
	if len(mods) == 0 {
		return
	}
	start := guestagent.BootClock()
	n, failed, _ := loadModulesConcurrently(mods)
	for _, name := range slices.Sorted(maps.Keys(failed)) {
		b.log.Printf("module %s: %v", name, failed[name])
	}
	b.log.Printf("loaded %d network policy modules in %.2fs", n, guestagent.BootClock()-start)
}

// disableModules forbids loading kernel modules until the VM stops, once
// the agent's own are in: nothing else in the guest (a package's install
// script running as root, a request for a protocol family) can add code
// to the kernel. It runs before the policy's waiters are released, so an
// agent's first command already finds module loading off.
func (b *boot) disableModules() {
	err := os.WriteFile("/proc/sys/kernel/modules_disabled", []byte("1"), 0)
	if errors.Is(err, fs.ErrNotExist) {
		return // a kernel without module support (ours): nothing can be loaded
	}
	if err != nil {
		b.log.Printf("disable module loading: %v", err) // after the hello: no warning to report it in
	}
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return loadModuleFile(f, path)
}

// loadModuleFile loads the module open as f; path's extension says
// whether it is compressed.
func loadModuleFile(f *os.File, path string) error {
	flags := 0
	switch filepath.Ext(path) {
	case ".xz", ".gz", ".zst":
		flags |= unix.MODULE_INIT_COMPRESSED_FILE
	}
	// Seek to the start: a retry reuses the file.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	err := unix.FinitModule(int(f.Fd()), "", flags)
	if err == unix.EEXIST {
		return nil // built in or loaded already
	}
	return err
}

// waitForFile polls for path until timeout. The kernel's devtmpfs thread
// makes a disk's node moments after the driver's probe returns, so the
// poll is short: a stat costs microseconds, a wait on the critical path
// costs the boot what is left of the interval.
func waitForFile(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := os.Stat(path)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// switchRoot mounts the root disk and makes it "/", moving /dev, /proc
// and /sys along. The agent keeps running from the (freed) initramfs.
func (b *boot) switchRoot(dev string) {
	if dev == "" {
		b.fatal("no root device on the kernel command line (osaurus.root=)")
	}
	if err := waitForFile(dev, rootWait); err != nil {
		b.fatal("root disk %s did not appear within %v: %v", dev, rootWait, err)
	}
	if err := b.mount(mountSpec{dev, newRoot, "ext4", 0, ""}, 0o755); err != nil {
		b.fatal("%v", err)
	}
	for _, d := range []string{"/dev", "/proc", "/sys"} {
		if err := b.mount(mountSpec{d, newRoot + d, "", unix.MS_MOVE, ""}, 0o755); err != nil {
			b.fatal("move %s: %v", d, err)
		}
	}
	if err := freeInitramfs(); err != nil {
		b.warn("free initramfs: %v", err)
	}
	steps := []struct {
		what string
		fn   func() error
	}{
		{"chdir " + newRoot, func() error { return unix.Chdir(newRoot) }},
		{"move " + newRoot + " to /", func() error { return unix.Mount(".", "/", "", unix.MS_MOVE, "") }},
		{"chroot", func() error { return unix.Chroot(".") }},
		{"chdir /", func() error { return unix.Chdir("/") }},
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			b.fatal("switch root: %s: %v", s.what, err)
		}
	}
}

// freeInitramfs deletes the initramfs files, which otherwise keep using
// RAM. It only ever touches a ramfs/tmpfs root, and not across mounts.
func freeInitramfs() error {
	var sfs unix.Statfs_t
	if err := unix.Statfs("/", &sfs); err != nil {
		return err
	}
	if sfs.Type != unix.RAMFS_MAGIC && sfs.Type != unix.TMPFS_MAGIC {
		return nil
	}
	var root unix.Stat_t
	if err := unix.Lstat("/", &root); err != nil {
		return err
	}
	ents, err := os.ReadDir("/")
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		p := "/" + e.Name()
		var st unix.Stat_t
		if p == newRoot || unix.Lstat(p, &st) != nil || st.Dev != root.Dev {
			continue
		}
		if e.IsDir() {
			var sub unix.Stat_t
			// Mount points (the moved /dev, /proc, /sys are now empty
			// directories, but be careful anyway).
			if unix.Stat(p, &sub) == nil && sub.Dev != root.Dev {
				continue
			}
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setupRoot finishes the file system layout in the new root.
func (b *boot) setupRoot(p bootparams.Params) {
	const nodev = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	// A fresh /proc with hidepid=2: users must not see each other's
	// processes, command lines or environments.
	if err := unix.Unmount("/proc", unix.MNT_DETACH); err != nil {
		b.warn("unmount /proc: %v", err)
	}
	if err := b.mount(mountSpec{"proc", "/proc", "proc", nodev, "hidepid=2"}, 0o555); err != nil {
		// Without it every agent sees every other agent's commands and
		// environments (secrets included): no VM is better than that one.
		b.fatal("%v: agents would see each other's processes, so the VM does not start", err)
	}
	if err := guestagent.HardenKernel("/proc/sys"); err != nil {
		b.fatal("kernel hardening: %v", err)
	}
	for _, m := range []struct {
		mountSpec
		mode os.FileMode
	}{
		{mountSpec{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "gid=5,mode=0620,ptmxmode=0666"}, 0o755},
		{mountSpec{"shm", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"}, 0o1777},
		{mountSpec{"run", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"}, 0o755},
	} {
		if err := b.mount(m.mountSpec, m.mode); err != nil {
			b.warn("%v", err)
		}
	}
	// devtmpfs lacks the links udev would add; shells need /dev/fd for
	// process substitution.
	for link, target := range map[string]string{
		"/dev/fd": "/proc/self/fd", "/dev/stdin": "/proc/self/fd/0",
		"/dev/stdout": "/proc/self/fd/1", "/dev/stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, link); err != nil && !errors.Is(err, fs.ErrExist) {
			b.warn("%v", err)
		}
	}
	// /run/lock is expected by Debian tools; /tmp stays on the root disk
	// (a tmpfs would take the VM's RAM) but must be world-writable.
	for dir, mode := range map[string]os.FileMode{"/run/lock": 0o777 | os.ModeSticky, "/tmp": 0o777 | os.ModeSticky} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.warn("%v", err)
		} else if err := os.Chmod(dir, mode); err != nil {
			b.warn("%v", err)
		}
	}
	if err := unix.Sethostname([]byte(Hostname)); err != nil {
		b.warn("hostname: %v", err)
	}
	if err := ensureHostsEntry("/etc/hosts", Hostname); err != nil {
		b.warn("/etc/hosts: %v", err)
	}
}

// startShares mounts the VirtioFS shares in the background and returns
// the wait for them, which passes on their warnings. Each mount waits for
// a round trip to its virtiofsd, a host process: the shares mount
// together (they never nest) and beside the rest of the root's set-up.
func (b *boot) startShares(shares []bootparams.Share) (wait func()) {
	errs := make([]error, len(shares))
	var wg sync.WaitGroup
	for i, s := range shares {
		wg.Go(func() {
			// Agents write these folders; a set-uid file or a device node
			// in them must not be honoured.
			errs[i] = b.mount(mountSpec{s.Tag, s.Mount, "virtiofs", unix.MS_NOSUID | unix.MS_NODEV, ""}, 0o755)
		})
	}
	return func() {
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				b.warn("share %s: %v", shares[i].Tag, err)
			}
		}
	}
}

// startCgroups makes the agents' cgroup tree in the background (it needs
// only the moved /sys) and returns the wait for it. PID 1 itself needs no
// oom_score_adj: the kernel never picks the global init, and a -1000 here
// would be inherited by every process.
func (b *boot) startCgroups() (wait func() *exec.Cgroups) {
	type result struct {
		c   *exec.Cgroups
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := exec.SetupCgroups(exec.CgroupMount, memTotal())
		done <- result{c, err}
	}()
	return func() *exec.Cgroups {
		r := <-done
		if r.err != nil {
			// Without cgroups one agent's fork bomb or allocation takes
			// the VM down for all, and a call's processes outlive it: no
			// VM is better.
			b.fatal("%v", r.err)
		}
		return r.c
	}
}

// agentCopyDelay is how long after the host's first hello the disk's
// copy of the agent is refreshed.
const agentCopyDelay = 3 * time.Second

// AgentCopy is the root disk's copy of the guest agent (provisioning puts
// it there): agents' processes run it, e.g. its search when the image has
// no ripgrep.
const AgentCopy = "/usr/local/bin/sandbox-agent"

// refreshAgentCopy makes the disk's copy the agent that booted: an app
// update brings a new agent in the initramfs but keeps the root disk.
func refreshAgentCopy() error {
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		return err
	}
	if cur, err := os.ReadFile(AgentCopy); err == nil && bytes.Equal(cur, self) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(AgentCopy), 0o755); err != nil {
		return err
	}
	if err := guestagent.WriteFileAtomic(AgentCopy, self); err != nil {
		return err
	}
	return os.Chmod(AgentCopy, 0o755)
}

// ensureHostsEntry makes name resolve locally; sudo and some build tools
// stall or complain when the host name does not.
func ensureHostsEntry(path, name string) error {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(data) == 0 {
		data = []byte("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 1 && !strings.HasPrefix(f[0], "#") && slices.Contains(f[1:], name) {
			return nil
		}
	}
	if data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	data = append(data, "127.0.1.1\t"+name+"\n"...)
	return guestagent.WriteFileAtomic(path, data)
}

// setupNetwork brings up lo and, when the host asked for one, the NIC nic:
// with the static layout from the command line or by DHCP. A NIC that
// can't be configured is a boot warning, not a failure: the VM still
// works offline. It touches no file, so it runs beside the root disk's
// set-up; it returns the DNS servers for resolv.conf, which is on the
// root disk.
func (b *boot) setupNetwork(n bootparams.Network, nic string) []netip.Addr {
	if err := network.LinkUp("lo"); err != nil {
		b.warn("%v", err)
	}
	if !n.Enabled() || nic == "" {
		return nil
	}
	if n.DHCP {
		return b.setupDHCP(nic)
	}
	if err := network.ConfigureInterface(nic, n.Address, n.Gateway); err != nil {
		b.warn("network: %v", err)
		return nil
	}
	b.log.Printf("network: %s %s via %s", nic, n.Address, n.Gateway)
	if n.DNS.IsValid() {
		return []netip.Addr{n.DNS}
	}
	return nil
}

// setupDHCP configures nic from a DHCP lease and returns its DNS servers.
// Without a lease, nic goes back down and the guest has lo only.
func (b *boot) setupDHCP(nic string) []netip.Addr {
	ctx, cancel := context.WithTimeout(context.Background(), dhcpWait)
	defer cancel()
	start := time.Now()
	lease, err := network.RequestLease(ctx, nic, Hostname)
	if err == nil {
		err = network.ConfigureInterface(nic, lease.Address, lease.Gateway)
	}
	if err != nil {
		b.warn("network: %v; the guest has no network", err)
		if err := network.LinkDown(nic); err != nil {
			b.log.Printf("network: %v", err)
		}
		return nil
	}
	if len(lease.DNS) == 0 {
		b.warn("network: the DHCP server named no DNS server; names will not resolve")
	}
	// The lease is not renewed: the NATs we run behind (slirp, vz) hand out
	// long leases and keep an address for its MAC.
	b.log.Printf("network: %s %s (DHCP in %v)", nic, lease, time.Since(start).Round(time.Millisecond))
	return lease.DNS
}

// startNetwork runs setupNetwork in the background and returns the wait
// for it, which writes resolv.conf and passes on the warnings. The NIC is
// looked up here, before the root switch moves /sys.
func (b *boot) startNetwork(n bootparams.Network) (wait func()) {
	var nic string
	if n.Enabled() {
		var err error
		if nic, err = network.FirstInterface("/sys/class/net", nicWait); err != nil {
			b.warn("network: %v", err)
		}
	}
	nb := &boot{log: b.log}
	done := make(chan []netip.Addr, 1)
	go func() { done <- nb.setupNetwork(n, nic) }()
	return func() {
		dns := <-done
		b.warnings = append(b.warnings, nb.warnings...)
		if len(dns) > 0 {
			b.writeResolvConf(dns)
		}
	}
}

// writeResolvConf points the resolver at dns.
func (b *boot) writeResolvConf(dns []netip.Addr) {
	want := network.ResolvConf(dns)
	// The same file as last boot (the usual case) needs no write and no
	// fsync on the boot's critical path.
	if fi, err := os.Lstat("/etc/resolv.conf"); err == nil && fi.Mode().IsRegular() {
		if cur, err := os.ReadFile("/etc/resolv.conf"); err == nil && bytes.Equal(cur, want) {
			return
		}
	}
	// Replace, never write through: resolv.conf is often a symlink into a
	// resolver daemon's run directory.
	os.Remove("/etc/resolv.conf")
	if err := guestagent.RewriteBootFile("/etc/resolv.conf", want, 0o644); err != nil {
		b.warn("resolv.conf: %v", err)
	}
}

// powerOff stops every process, syncs, unmounts the shares, makes the root
// read-only and powers off or reboots.
func powerOff(lg *log.Logger, p bootparams.Params, reboot bool) {
	lg.Print("shutting down")
	unix.Kill(-1, unix.SIGTERM)
	for i := 0; i < 30 && userProcesses() > 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	unix.Kill(-1, unix.SIGKILL)
	time.Sleep(100 * time.Millisecond)
	unix.Sync()
	for _, s := range slices.Backward(p.Shares) {
		if err := unix.Unmount(s.Mount, 0); err != nil {
			unix.Unmount(s.Mount, unix.MNT_DETACH)
		}
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		lg.Printf("remount / read-only: %v", err)
	}
	unix.Sync()
	cmd := offCommand()
	if reboot {
		cmd = unix.LINUX_REBOOT_CMD_RESTART
	}
	if err := unix.Reboot(cmd); err != nil {
		lg.Printf("reboot(2): %v", err)
	}
}

// userProcesses counts live user-space processes other than the agent
// (kernel threads and zombies have no executable).
func userProcesses() int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if _, err := os.Readlink("/proc/" + e.Name() + "/exe"); err == nil {
			n++
		}
	}
	return n
}

// memTotal is the VM's memory in bytes, 0 when unknown.
func memTotal() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
