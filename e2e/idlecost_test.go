//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/provision"
)

// idleWindow is how long the idle cost is sampled: long enough for any
// periodic work (status refresh, health checks) to show.
const idleWindow = 10 * time.Second

// descendants lists the processes below pid (virtiofsd, QEMU), from the
// parent links in /proc.
func descendants(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(data), ')')
		f := strings.Fields(string(data[i+1:]))
		if len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for c, pp := range parent {
			if pp == p {
				out = append(out, c)
				walk(c)
			}
		}
	}
	walk(pid)
	return out
}

func commOf(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return strings.TrimSpace(string(b))
}

// BenchmarkAppIdle measures the app while idle (its window open, the VM
// running, nothing asked of it): its own resident memory and CPU, and its
// VM's, over idleWindow. Beside them, as the bound to read them against,
// is what a busy poll loop gets on this machine in the same run: an app
// that polls busily costs about that, while the idle app measured 1-3 %
// of a core here. A figure, not a test assertion: software rendering
// under Xvfb costs more on slower or busier machines.
//
// It also reports the idle resident memory of both kinds of owner, the
// window and the command line's background owner, after a plain start
// and after a provision that built the root disk (from the download
// cache), since building it once left ~600 MB resident for good.
func BenchmarkAppIdle(b *testing.B) {
	a := startApp(b) // on a provisioned copy: start needs no provision
	a.c.ok("start")
	kids := descendants(a.pid)
	cpu := func() (app, vm float64) {
		app = procCPU(a.pid)
		for _, k := range kids {
			vm += procCPU(k)
		}
		return
	}
	b.ResetTimer()
	var appCPU, vmCPU float64
	for range b.N {
		a0, v0 := cpu()
		// The measurement is the waiting: nothing is asked of the app.
		time.Sleep(idleWindow)
		a1, v1 := cpu()
		appCPU += (a1 - a0) / idleWindow.Seconds()
		vmCPU += (v1 - v0) / idleWindow.Seconds()
	}
	b.StopTimer()
	var vmRSS int64
	var parts []string
	for _, k := range kids {
		r := procRSS(k)
		vmRSS += r
		parts = append(parts, commOf(k)+" "+strconv.FormatInt(r>>10, 10)+" MiB")
	}
	b.Logf("VM processes: %s", strings.Join(parts, ", "))
	appRSS := procRSS(a.pid)
	a.c.run("stop")
	b.ReportMetric(appCPU/float64(b.N)*100, "app-cpu-%")
	b.ReportMetric(float64(appRSS>>10), "app-rss-MiB")
	b.ReportMetric(vmCPU/float64(b.N)*100, "vm-cpu-%")
	b.ReportMetric(float64(vmRSS>>10), "vm-rss-MiB")
	b.ReportMetric(busyLoopCPU(b)*100, "busy-poll-cpu-%")

	b.ReportMetric(float64(appRSS>>10), "window-idle-rss-after-start-MiB")
	b.ReportMetric(float64(windowIdleAfterProvision(b)>>10), "window-idle-rss-after-provision-MiB")
	b.ReportMetric(float64(ownerIdleRSS(b, false)>>10), "owner-idle-rss-after-start-MiB")
	b.ReportMetric(float64(ownerIdleRSS(b, true)>>10), "owner-idle-rss-after-provision-MiB")
}

// unprovision turns a provisioned copy into one that must be provisioned
// again, building the root disk anew: the downloads stay in the cache
// (nothing is fetched twice) but the built disks go.
func unprovision(b *testing.B) func(config.Paths) {
	return func(p config.Paths) {
		l := provision.Layout{Dir: p.ContainerDir()}
		disks, _ := filepath.Glob(filepath.Join(l.Cache(), "disk-*.ext4"))
		for _, f := range append(disks, l.StateFile(), l.RootDisk()) {
			if err := os.Remove(f); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// windowIdleAfterProvision is the window's resident memory (KiB), idle
// with its VM running, after it provisioned the VM itself.
func windowIdleAfterProvision(b *testing.B) int64 {
	a := startAppOn(b, unprovision(b))
	a.c.ok("provision")
	a.c.ok("start")
	// The measurement is the waiting: nothing is asked of the app.
	time.Sleep(idleWindow)
	rss := procRSS(a.pid)
	a.c.run("stop")
	return rss
}

// ownerIdleRSS is the command line's background owner's resident memory
// (KiB), idle with its VM running, after `start` on a provisioned copy
// or, with provisionFirst, after `provision` and `start`.
func ownerIdleRSS(b *testing.B, provisionFirst bool) int64 {
	srv := newSwitchableServer(b)
	p := copyContainer(b)
	if provisionFirst {
		unprovision(b)(p)
	}
	c := cliRun{t: b, bin: buildCLI(b), home: p.Root}
	b.Cleanup(func() { c.run("stop") })
	c.ok("config", "set", "imageManifest", srv.URL+"/manifest.json")
	if provisionFirst {
		c.ok("provision")
	}
	c.ok("start")
	owner := ownerOf(b, p)
	time.Sleep(idleWindow)
	rss := procRSS(owner)
	c.ok("stop")
	return rss
}

// ownerOf is the pid of the process that started the data folder's QEMU.
func ownerOf(b *testing.B, p config.Paths) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmd), "qemu-system") || !strings.Contains(string(cmd), p.Run()+"/") {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			return ppid
		}
	}
	b.Fatalf("no QEMU process for %s", p.Root)
	return 0
}

// busyLoopCPU is the share of a core a process that polls without pause
// gets on this machine now.
func busyLoopCPU(b *testing.B) float64 {
	b.Helper()
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	const window = 2 * time.Second
	c0 := procCPU(cmd.Process.Pid)
	time.Sleep(window)
	return (procCPU(cmd.Process.Pid) - c0) / window.Seconds()
}
