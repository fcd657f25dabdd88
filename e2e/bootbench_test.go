//go:build linux

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
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
)

// bareTimeout bounds one bare boot; it takes seconds.
var bareTimeout = 3 * time.Minute

// bareMarker is what internal/bareinit prints when the kernel started it.
const bareMarker = "osaurus-bare-init started uptime="

// BenchmarkBootVsBare measures the limit and the product in the same run,
// interleaved: the bare kernel (the product's own QEMU binary, machine,
// firmware, CPU, memory and kernel flags from qemu.Driver.BareArgs, with a
// minimal initramfs whose /init only reports that it started) timed from
// QEMU's start to that report, and the product from vm.Boot to the first
// successful exec. It prints the medians, their ratio, a breakdown of the
// product's boot and the idle cost of a running VM.
// OSAURUS_BENCH_RUNS sets the number of pairs (default 5).
func BenchmarkBootVsBare(b *testing.B) {
	requireGuest(b)
	runs := 5
	if s := os.Getenv("OSAURUS_BENCH_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("OSAURUS_BENCH_RUNS=%q: want a positive whole number", s)
		}
		runs = n
	}
	bareImg := buildBareInitramfs(b)
	for b.Loop() {
		var bare []bareResult
		var prod []prodResult
		var idle idleCost
		// An uncounted first boot settles the accelerator: "auto" may try
		// KVM and fall back to TCG, which would skew one product run.
		runProduct(b, false)
		for i := range runs {
			// The bare boot uses the accelerator the product's boot used.
			r, c := runProduct(b, i == runs-1)
			prod = append(prod, r)
			bare = append(bare, runBare(b, bareImg, r.accel))
			if i == runs-1 {
				idle = c
			}
		}
		report(b, bare, prod, idle)
	}
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
	total  time.Duration // QEMU start → /init's report read by the host
	kernel time.Duration // guest uptime when /init ran
}

// runBare boots the minimal initramfs once. The console log is watched
// with inotify, so the report is seen the moment QEMU writes it.
func runBare(b *testing.B, img, accel string) bareResult {
	spec := bootSpec(b, bootOpts{})
	spec.Accel = accel
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
	qemuPath, args, err := newDriver().BareArgs(spec)
	if err != nil {
		b.Fatal(err)
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
	var res bareResult
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
			sec, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				b.Fatalf("bare boot: bad report %q", v)
			}
			res.kernel = secs(sec)
			break wait
		case err := <-exited:
			b.Fatalf("bare boot: qemu exited before /init reported: %v\n%s\nconsole:\n%s", err, qlog.String(), console())
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
		accel:  info.Accel,
		total:  done.Sub(start),
		phases: g.BootPhases,
		hello:  secs(g.UptimeSeconds),
		exec:   done.Sub(booted),
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
	m.Kill()
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

func report(b *testing.B, bare []bareResult, prod []prodResult, idle idleCost) {
	pick := func(f func(i int) time.Duration, n int) time.Duration {
		var ds []time.Duration
		for i := range n {
			ds = append(ds, f(i))
		}
		return median(ds)
	}
	bareTotal := pick(func(i int) time.Duration { return bare[i].total }, len(bare))
	bareKernel := pick(func(i int) time.Duration { return bare[i].kernel }, len(bare))
	prodTotal := pick(func(i int) time.Duration { return prod[i].total }, len(prod))
	ratio := prodTotal.Seconds() / bareTotal.Seconds()
	ms := func(d time.Duration) string { return fmt.Sprintf("%7.0f ms", float64(d)/float64(time.Millisecond)) }
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nboot benchmark (%s): medians of %d interleaved runs each\n", prod[0].accel, len(prod))
	fmt.Fprintf(&sb, "  bare kernel, QEMU start → /init report  %s   (kernel → /init %s)\n", ms(bareTotal), ms(bareKernel))
	fmt.Fprintf(&sb, "  product, start → first exec             %s\n", ms(prodTotal))
	fmt.Fprintf(&sb, "  ratio                                    %7.2f\n", ratio)
	fmt.Fprintf(&sb, "  runs (bare / product, ms):")
	for i := range prod {
		fmt.Fprintf(&sb, " %.0f/%.0f", float64(bare[i].total)/1e6, float64(prod[i].total)/1e6)
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
	row("mounts (proc, shares, …)", func(p prodResult) time.Duration { return step(p, "root", "mounts") })
	row("network", func(p prodResult) time.Duration { return step(p, "mounts", "network") })
	row("agent start → hello answered", func(p prodResult) time.Duration { return p.hello - phase(p, "network") })
	row("first exec after hello", func(p prodResult) time.Duration { return p.exec })
	row("(kernel start → hello at host)", func(p prodResult) time.Duration { return p.handshake })
	// Each module's own load time (they overlap), median over the runs.
	took := map[string][]time.Duration{}
	for _, p := range prod {
		for _, ph := range p.phases {
			if name, ok := strings.CutPrefix(ph.Name, "module "); ok {
				took[name] = append(took[name], secs(ph.Took))
			}
		}
	}
	names := slices.Collect(maps.Keys(took))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(median(took[b]), median(took[a])) })
	sb.WriteString("  module load times (concurrent, median):")
	for _, n := range names {
		fmt.Fprintf(&sb, " %s %.0f ms,", n, float64(median(took[n]))/1e6)
	}
	sb.WriteString("\n")
	fmt.Fprintf(&sb, "  idle cost over %v after boot:\n", idle.window)
	fmt.Fprintf(&sb, "    QEMU RSS %d MiB, virtiofsd RSS %d MiB, VM CPU %.1f%%\n", idle.qemuRSS/1024, idle.helpersRSS/1024, idle.qemuCPU*100)
	fmt.Fprintf(&sb, "    host process (agent client) RSS %d MiB, CPU %.1f%%\n", idle.appRSS/1024, idle.appCPU*100)
	fmt.Print(sb.String())
	b.ReportMetric(ratio, "ratio")
	b.ReportMetric(float64(bareTotal)/1e6, "bare-ms")
	b.ReportMetric(float64(prodTotal)/1e6, "product-ms")
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
