//go:build linux

package e2e

import (
	"archive/tar"
	"cmp"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/provision/initramfs"
	"github.com/osaurus/osaurus-sandbox/vm"
	"github.com/osaurus/osaurus-sandbox/vm/qemu"
)

// bareTimeout bounds one bare boot; it takes seconds.
var bareTimeout = 3 * time.Minute

// bareMarker is what internal/bareinit prints when the kernel started it.
const bareMarker = "osaurus-bare-init started uptime="

// BenchmarkBootVsBare measures, in the same run and interleaved, the
// product's start against two bare boots of a minimal initramfs whose /init
// (internal/bareinit) only reports that it started:
//
//	(a) today's limit: the Debian cloud kernel (the test guest's modular
//	    manifest) under the product's old QEMU flags, frozen below in
//	    oldBareArgs so later driver changes don't move it;
//	(b) the product's own kernel (the test guest's manifest.json) under the
//	    product's current flags, qemu.Driver.BareArgs (whichever machine
//	    type the driver picks);
//	(c) the product: vm.Boot on the provisioned test guest (the same own
//	    kernel) to the first successful exec of `true`.
//
// Bare boots are timed from QEMU's start to /init's report. It prints the
// medians, c/b and c/a (the targets: ≤ 1.25 and ≤ 1.0), a
// breakdown of the product's boot and the idle cost of a running VM.
// OSAURUS_BENCH_RUNS sets the number of rounds (default 9: a single
// round's kernel → /init alone varies by up to 0.2 s under TCG, and the
// median of fewer moves with it); each round boots all three, in an order
// that rotates from round to round.
func BenchmarkBootVsBare(b *testing.B) {
	requireGuest(b)
	runs := 9
	if s := os.Getenv("OSAURUS_BENCH_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("OSAURUS_BENCH_RUNS=%q: want a positive whole number", s)
		}
		runs = n
	}
	if len(env.state.Modules) > 0 {
		b.Fatalf("the test guest's manifest.json names kernel modules (%d resolved): (b) and (c) need the product's own kernel, which has everything built in; run `make kernel test-guest`", len(env.state.Modules))
	}
	debian := debianKernel(b)
	bareImg := buildBareInitramfs(b)
	for b.Loop() {
		load0 := loadAverage()
		var old, own []bareResult
		var prod []prodResult
		var idle idleCost
		// An uncounted first boot settles the accelerator: "auto" may try
		// KVM and fall back to TCG, which would skew one product run.
		first, _ := runProduct(b, false)
		accel := first.accel
		for i := range runs {
			// Each variant goes first, second and third in turn, so none
			// always runs right after another's teardown.
			for k := range 3 {
				switch (i + k) % 3 {
				case 0:
					r, c := runProduct(b, i == runs-1)
					prod = append(prod, r)
					if i == runs-1 {
						idle = c
					}
				case 1:
					old = append(old, runBare(b, bareImg, debian, accel, oldBareArgs))
				case 2:
					own = append(own, runBare(b, bareImg, env.layout.Kernel(), accel, newBareArgs))
				}
			}
		}
		report(b, old, own, prod, idle, load0, loadAverage())
	}
}

// loadAverage is the host's 1, 5 and 15 minute load averages.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// debianKernel extracts (a)'s kernel: the one the test guest's modular
// manifest names (the other manifest beside manifest.json, the Debian cloud
// kernel with its modules, which images bringing their own kernel take).
func debianKernel(b *testing.B) string {
	dir := os.Getenv("OSAURUS_TEST_GUEST")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		m, err := provision.ParseManifest(data, "file://"+p)
		if err != nil || m.Modules == nil {
			continue // not a manifest, or one without modules: not (a)'s
		}
		u, err := url.Parse(m.Kernel.URL)
		if err != nil || u.Scheme != "file" {
			continue
		}
		out := filepath.Join(b.TempDir(), "vmlinuz-debian")
		if err := extractKernel(u.Path, m.Kernel, out); err != nil {
			b.Fatalf("the Debian kernel from %s: %v", p, err)
		}
		return out
	}
	b.Fatalf("no manifest in %s names a kernel with modules: (a) boots the Debian cloud kernel the test guest keeps beside the product's own; run `make test-guest`", dir)
	return ""
}

// extractKernel copies the kernel of artifact a, read from file, to out.
func extractKernel(file string, a provision.Artifact, out string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	switch a.Format {
	case provision.FormatRaw:
	case provision.FormatTarGz, provision.FormatGzip:
		z, err := gzip.NewReader(f)
		if err != nil {
			return err
		}
		r = z
	case provision.FormatTar:
	default:
		return fmt.Errorf("format %q: the benchmark reads raw, gzip, tar and tar.gz kernels", a.Format)
	}
	if a.Format == provision.FormatTar || a.Format == provision.FormatTarGz {
		tr := tar.NewReader(r)
		for {
			h, err := tr.Next()
			if err != nil {
				return fmt.Errorf("member %s: %w", a.Member, err)
			}
			if path.Clean(strings.TrimPrefix(h.Name, "./")) == path.Clean(a.Member) {
				r = tr
				break
			}
		}
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return os.WriteFile(out, data, 0o644)
}

// buildBareInitramfs builds internal/bareinit as a static binary and packs
// it as /init with provision/initramfs, as the product packs its agent.
func buildBareInitramfs(b *testing.B) string {
	dir := b.TempDir()
	bin := filepath.Join(dir, "bareinit")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "github.com/osaurus/osaurus-sandbox/internal/bareinit")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build bareinit: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		b.Fatal(err)
	}
	img := filepath.Join(dir, "bare.img")
	f, err := os.Create(img)
	if err != nil {
		b.Fatal(err)
	}
	if err := initramfs.Build(f, initramfs.Spec{Init: data}); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return img
}

type bareResult struct {
	total   time.Duration // QEMU start → /init's report read by the host
	kernel  time.Duration // guest uptime when /init ran
	release string        // the kernel's release, as /init saw it
	machine string        // QEMU's -machine
}

// bareArgs builds a bare boot's QEMU command line.
type bareArgs func(vm.Spec) (qemu string, args []string, err error)

// newBareArgs is (b)'s: the product's current flags.
func newBareArgs(spec vm.Spec) (string, []string, error) { return newDriver().BareArgs(spec) }

// oldBareArgs is (a)'s: the QEMU command line qemu.Driver.BareArgs built
// on 2026-11-25 (vm/qemu/args.go at 4a2e447: q35, qboot when installed,
// virtio PCI devices), copied so that (a) stays today's limit whatever the
// driver does later. Don't update it with the driver.
func oldBareArgs(spec vm.Spec) (string, []string, error) {
	bin, console, machine := "qemu-system-x86_64", "ttyS0", "q35"
	if runtime.GOARCH == "arm64" {
		bin, console, machine = "qemu-system-aarch64", "ttyAMA0", "virt"
	}
	qemuPath, err := exec.LookPath(bin)
	if err != nil {
		return "", nil, fmt.Errorf("%w (install it: apt-get install qemu-system-x86)", err)
	}
	if err := os.MkdirAll(spec.RunDir, 0o700); err != nil {
		return "", nil, err
	}
	// The driver used vsock where the host had vhost-vsock.
	var cid uint32
	if f, err := os.OpenFile("/dev/vhost-vsock", os.O_RDWR, 0); err == nil {
		f.Close()
		cid = 3 + rand.Uint32N(1<<30)
	}
	port, vsockPort := qemu.AgentPortName, uint32(0)
	if cid != 0 {
		port, vsockPort = "", qemu.AgentVsockPort
	}
	cmdline := []string{
		"console=" + console, "quiet", "loglevel=3", "panic=-1", "no_timer_check", "rdinit=/init",
		spec.BootParams(port, vsockPort).Encode(),
	}
	if spec.Cmdline != "" {
		cmdline = append(cmdline, spec.Cmdline)
	}
	mem := strconv.Itoa(spec.MemoryMiB)
	a := []string{"-name", "osaurus-sandbox", "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-machine", machine + ",accel=" + spec.Accel}
	if spec.Accel == vm.AccelKVM {
		a = append(a, "-cpu", "host")
	} else {
		a = append(a, "-cpu", "max")
	}
	if fw := "/usr/share/qemu/qboot.rom"; machine == "q35" && fileExists(fw) {
		a = append(a, "-bios", fw)
	}
	a = append(a,
		"-smp", strconv.Itoa(spec.CPUs),
		"-m", mem+"M",
		"-object", "memory-backend-memfd,id=mem,size="+mem+"M,share=on",
		"-numa", "node,memdev=mem",
		"-kernel", spec.Kernel,
		"-initrd", spec.Initramfs,
		"-append", strings.Join(cmdline, " "),
		"-chardev", "file,id=console,path="+spec.ConsoleLog+",append=on",
		"-serial", "chardev:console",
		"-drive", "file="+spec.RootDisk+",if=none,id=root,format=raw,cache=writeback,discard=unmap",
		"-device", "virtio-blk-pci,drive=root",
		"-device", "virtio-rng-pci",
		"-qmp", "unix:"+filepath.Join(spec.RunDir, "qmp.sock")+",server=on,wait=off",
		"-pidfile", filepath.Join(spec.RunDir, "qemu.pid"),
	)
	if spec.Network == vm.NetworkOutbound {
		a = append(a,
			"-netdev", "user,id=net0,net=10.0.2.0/24,host=10.0.2.2,dns=10.0.2.3",
			"-device", "virtio-net-pci,netdev=net0",
		)
	}
	if cid != 0 {
		a = append(a, "-device", "vhost-vsock-pci,guest-cid="+strconv.FormatUint(uint64(cid), 10))
	} else {
		a = append(a,
			"-device", "virtio-serial-pci",
			"-chardev", "socket,id=agent,path="+filepath.Join(spec.RunDir, "agent.sock")+",server=on,wait=off",
			"-device", "virtserialport,chardev=agent,name="+qemu.AgentPortName,
		)
	}
	return qemuPath, a, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// runBare boots the minimal initramfs once with kernel, under the
// accelerator the product's boot used. The console log is watched with
// inotify, so the report is seen the moment QEMU writes it.
func runBare(b *testing.B, img, kernel, accel string, argsFor bareArgs) bareResult {
	spec := bootSpec(b, bootOpts{})
	spec.Accel = accel
	spec.Kernel = kernel
	spec.Shares = nil
	dir := b.TempDir()
	spec.Initramfs = img
	spec.RunDir = filepath.Join(dir, "run")
	spec.ConsoleLog = filepath.Join(dir, "console.log")
	if err := os.WriteFile(spec.ConsoleLog, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	watch, err := watchFile(spec.ConsoleLog)
	if err != nil {
		b.Fatal(err)
	}
	defer watch.Close()
	qemuPath, args, err := argsFor(spec)
	if err != nil {
		b.Fatal(err)
	}
	res := bareResult{machine: "?"}
	if i := slices.Index(args, "-machine"); i >= 0 && i+1 < len(args) {
		res.machine, _, _ = strings.Cut(args[i+1], ",")
	}
	cmd := exec.Command(qemuPath, args...)
	var qlog strings.Builder
	cmd.Stdout, cmd.Stderr = &qlog, &qlog
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	timeout := time.After(bareTimeout)
	console := func() string { data, _ := os.ReadFile(spec.ConsoleLog); return string(data) }
wait:
	for {
		select {
		case _, ok := <-watch.changed:
			if !ok {
				b.Fatalf("bare boot: watching the console failed: %v", watch.err)
			}
			_, v, found := strings.Cut(console(), bareMarker)
			if !found {
				continue
			}
			v, _, complete := strings.Cut(v, "\n")
			if !complete {
				continue // the rest of the line is on its way
			}
			res.total = time.Since(start)
			f := strings.Fields(v)
			if len(f) < 2 || !strings.HasPrefix(f[1], "release=") {
				b.Fatalf("bare boot: bad report %q", v)
			}
			sec, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				b.Fatalf("bare boot: bad report %q", v)
			}
			res.kernel = secs(sec)
			res.release = strings.TrimPrefix(f[1], "release=")
			break wait
		case err := <-exited:
			b.Fatalf("bare boot: qemu exited before /init reported: %v\n%s %q\n%s\nconsole:\n%s", err, qemuPath, args, qlog.String(), console())
		case <-timeout:
			cmd.Process.Kill()
			<-exited
			b.Fatalf("bare boot: no report from /init within %v\n%s %q\n%s\nconsole:\n%s", bareTimeout, qemuPath, args, qlog.String(), console())
		}
	}
	// /init powers off; QEMU exits by itself.
	select {
	case <-exited:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-exited
	}
	return res
}

// fileWatch signals each write to a file.
type fileWatch struct {
	fd, wd  int
	changed chan struct{}
	err     error
}

func watchFile(path string) (*fileWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wd, err := unix.InotifyAddWatch(fd, path, unix.IN_MODIFY)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	w := &fileWatch{fd: fd, wd: wd, changed: make(chan struct{}, 1)}
	go w.run()
	return w, nil
}

func (w *fileWatch) run() {
	defer unix.Close(w.fd)
	defer close(w.changed)
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(w.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			w.err = err
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&unix.IN_IGNORED != 0 {
				return // Close removed the watch
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		select {
		case w.changed <- struct{}{}:
		default: // a check is already due; it will see this write too
		}
	}
}

// Close removes the watch; the kernel's IN_IGNORED event ends run.
func (w *fileWatch) Close() { unix.InotifyRmWatch(w.fd, uint32(w.wd)) }

type prodResult struct {
	accel     string
	release   string        // the guest kernel's release
	total     time.Duration // vm.Boot called → first exec returned
	virtiofsd time.Duration // vm.Boot called → QEMU started (helpers first)
	qemu      time.Duration // QEMU started → guest kernel started
	phases    []agentproto.BootPhase
	hello     time.Duration // guest uptime when it answered hello
	handshake time.Duration // kernel start → host has the hello answer
	exec      time.Duration // hello answered → first exec returned
}

type idleCost struct {
	qemuRSS, helpersRSS, appRSS int64 // KiB
	qemuCPU, appCPU             float64
	window                      time.Duration
}

// runProduct boots the product's VM as the app does and runs `true`.
// With measureIdle it then leaves the VM idle and measures what it costs.
func runProduct(b *testing.B, measureIdle bool) (prodResult, idleCost) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := bootSpec(b, bootOpts{})
	start := time.Now()
	m, err := vm.Boot(ctx, newDriver(), spec, vm.Options{})
	if err != nil {
		b.Fatalf("boot: %v\nconsole:\n%s", err, consoleTail())
	}
	booted := time.Now()
	st, err := m.Agent().Exec(ctx, agentproto.ExecRequest{Argv: []string{"true"}}, nil, nil, nil)
	if err != nil || st.Code != 0 {
		b.Fatalf("first exec: %v %+v", err, st)
	}
	done := time.Now()
	g := m.Guest()
	info := m.Info()
	// A faster boot that dropped a step (a module, a share, the network)
	// is no result: the guest reports failed steps as warnings.
	if len(g.Warnings) > 0 {
		b.Errorf("the guest booted with warnings: %q", g.Warnings)
	}
	r := prodResult{
		accel:   info.Accel,
		release: g.Kernel,
		total:   done.Sub(start),
		phases:  g.BootPhases,
		hello:   secs(g.UptimeSeconds),
		exec:    done.Sub(booted),
	}
	if !info.HypervisorStarted.IsZero() {
		r.virtiofsd = info.HypervisorStarted.Sub(start)
		// The guest's clock starts with its kernel; the host got the hello
		// answer at `booted`, when the guest's clock read UptimeSeconds.
		kernelStart := booted.Add(-r.hello)
		r.qemu = kernelStart.Sub(info.HypervisorStarted)
		r.handshake = booted.Sub(kernelStart)
	}
	var idle idleCost
	if measureIdle {
		idle = measureIdleCost(b, info.Pid, spec.RunDir)
	}
	// Stopped as the app stops it, so the next round starts from a disk
	// that was shut down cleanly, as a user's start does (a killed VM
	// leaves its journal to replay and the boot's writes unflushed).
	if err := m.Stop(ctx); err != nil {
		b.Fatalf("stop: %v", err)
	}
	<-m.Done()
	return r, idle
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// measureIdleCost samples memory and CPU of the VM and of this process
// (standing in for the app, which holds the same agent connection) over
// an idle window after boot.
func measureIdleCost(b *testing.B, qemuPid int, runDir string) idleCost {
	const window = 3 * time.Second
	var c idleCost
	c.window = window
	q0 := procCPU(qemuPid)
	var ru0, ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	// The measurement itself is the waiting: nothing happens on purpose.
	time.Sleep(window)
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	q1 := procCPU(qemuPid)
	c.qemuCPU = (q1 - q0) / window.Seconds()
	c.appCPU = (tvSec(ru1.Utime) + tvSec(ru1.Stime) - tvSec(ru0.Utime) - tvSec(ru0.Stime)) / window.Seconds()
	c.qemuRSS = procRSS(qemuPid)
	c.appRSS = procRSS(os.Getpid())
	pids, _ := filepath.Glob(filepath.Join(runDir, "fs*.pid"))
	for _, p := range pids {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			c.helpersRSS += procRSS(pid)
		}
	}
	return c
}

func tvSec(tv unix.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }

// procRSS is VmRSS of pid in KiB, 0 when unknown.
func procRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// procCPU is the user+system CPU seconds pid used so far.
func procCPU(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func report(b *testing.B, old, own []bareResult, prod []prodResult, idle idleCost, load0, load1 string) {
	pick := func(f func(i int) time.Duration, n int) time.Duration {
		var ds []time.Duration
		for i := range n {
			ds = append(ds, f(i))
		}
		return median(ds)
	}
	aTotal := pick(func(i int) time.Duration { return old[i].total }, len(old))
	aKernel := pick(func(i int) time.Duration { return old[i].kernel }, len(old))
	bTotal := pick(func(i int) time.Duration { return own[i].total }, len(own))
	bKernel := pick(func(i int) time.Duration { return own[i].kernel }, len(own))
	cTotal := pick(func(i int) time.Duration { return prod[i].total }, len(prod))
	cb := cTotal.Seconds() / bTotal.Seconds()
	ca := cTotal.Seconds() / aTotal.Seconds()
	// c/b compares the product with a bare boot of the same kernel.
	if prod[0].release != own[0].release {
		b.Errorf("the product booted kernel %s, (b) kernel %s: the test guest's manifest.json and its provisioned kernel disagree", prod[0].release, own[0].release)
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%7.0f ms", float64(d)/float64(time.Millisecond)) }
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nboot benchmark (%s): medians of %d interleaved rounds; load average %s at the start, %s at the end\n", prod[0].accel, len(prod), load0, load1)
	fmt.Fprintf(&sb, "  (a) Debian kernel %s, old flags (%s): QEMU start → /init report  %s   (kernel → /init %s)\n", old[0].release, old[0].machine, ms(aTotal), ms(aKernel))
	fmt.Fprintf(&sb, "  (b) own kernel %s, product flags (%s): QEMU start → /init report  %s   (kernel → /init %s)\n", own[0].release, own[0].machine, ms(bTotal), ms(bKernel))
	fmt.Fprintf(&sb, "  (c) product, start → first exec                                    %s\n", ms(cTotal))
	fmt.Fprintf(&sb, "  c/b %.2f (target ≤ 1.25)   c/a %.2f (target ≤ 1.0)\n", cb, ca)
	fmt.Fprintf(&sb, "  runs (a / b / c, ms):")
	for i := range prod {
		fmt.Fprintf(&sb, " %.0f/%.0f/%.0f", float64(old[i].total)/1e6, float64(own[i].total)/1e6, float64(prod[i].total)/1e6)
	}
	sb.WriteString("\n  product breakdown (medians):\n")
	row := func(name string, f func(p prodResult) time.Duration) {
		fmt.Fprintf(&sb, "    %-34s %s\n", name, ms(pick(func(i int) time.Duration { return f(prod[i]) }, len(prod))))
	}
	phase := func(p prodResult, name string) time.Duration {
		for _, ph := range p.phases {
			if ph.Name == name {
				return secs(ph.Seconds)
			}
		}
		return 0
	}
	step := func(p prodResult, from, to string) time.Duration { return phase(p, to) - phase(p, from) }
	row("virtiofsd (before QEMU starts)", func(p prodResult) time.Duration { return p.virtiofsd })
	row("QEMU start → guest kernel", func(p prodResult) time.Duration { return p.qemu })
	row("kernel → /init", func(p prodResult) time.Duration { return phase(p, "init") })
	row("early mounts, console, cmdline", func(p prodResult) time.Duration { return step(p, "init", "early") })
	row("module loading", func(p prodResult) time.Duration { return step(p, "early", "modules") })
	row("root switch", func(p prodResult) time.Duration { return step(p, "modules", "root") })
	row("mounts (proc, devices, …)", func(p prodResult) time.Duration { return step(p, "root", "mounts") })
	// The network and the shares come up beside the mounts; this is the
	// wait for them after.
	row("network and shares (the rest)", func(p prodResult) time.Duration { return step(p, "mounts", "network") })
	row("agent start → hello answered", func(p prodResult) time.Duration { return p.hello - phase(p, "network") })
	row("first exec after hello", func(p prodResult) time.Duration { return p.exec })
	row("(kernel start → hello at host)", func(p prodResult) time.Duration { return p.handshake })
	// Each module's own load time (they overlap), median over the runs;
	// none with a kernel that has everything built in.
	took := map[string][]time.Duration{}
	for _, p := range prod {
		for _, ph := range p.phases {
			if name, ok := strings.CutPrefix(ph.Name, "module "); ok {
				took[name] = append(took[name], secs(ph.Took))
			}
		}
	}
	if len(took) > 0 {
		names := slices.Collect(maps.Keys(took))
		slices.SortFunc(names, func(a, b string) int { return cmp.Compare(median(took[b]), median(took[a])) })
		sb.WriteString("  module load times (concurrent, median):")
		for _, n := range names {
			fmt.Fprintf(&sb, " %s %.0f ms,", n, float64(median(took[n]))/1e6)
		}
		sb.WriteString("\n")
	}
	fmt.Fprintf(&sb, "  idle cost over %v after boot:\n", idle.window)
	fmt.Fprintf(&sb, "    QEMU RSS %d MiB, virtiofsd RSS %d MiB, VM CPU %.1f%%\n", idle.qemuRSS/1024, idle.helpersRSS/1024, idle.qemuCPU*100)
	fmt.Fprintf(&sb, "    host process (agent client) RSS %d MiB, CPU %.1f%%\n", idle.appRSS/1024, idle.appCPU*100)
	fmt.Print(sb.String())
	b.ReportMetric(float64(aTotal)/1e6, "a-ms")
	b.ReportMetric(float64(bTotal)/1e6, "b-ms")
	b.ReportMetric(float64(cTotal)/1e6, "c-ms")
	b.ReportMetric(cb, "c/b")
	b.ReportMetric(ca, "c/a")
}

// BenchmarkProvisionFromCache measures what a Reset costs: provisioning
// the test guest again with every download in the cache (verified again
// before use) and the root disk built once already.
func BenchmarkProvisionFromCache(b *testing.B) {
	requireGuest(b)
	for b.Loop() {
		dir := b.TempDir()
		// A fresh container sharing the provisioned one's download cache,
		// as a Reset leaves it.
		if err := os.Symlink(env.layout.Cache(), filepath.Join(dir, "cache")); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := provisionTestGuest(provision.Layout{Dir: dir}); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		var disk unix.Stat_t
		unix.Stat(filepath.Join(dir, "rootfs.ext4"), &disk)
		fmt.Printf("\nprovision from cache: %.2f s (root disk %d MiB apparent, %d MiB allocated)\n",
			took.Seconds(), disk.Size>>20, disk.Blocks*512>>20)
		b.ReportMetric(took.Seconds(), "s/provision")
	}
}
