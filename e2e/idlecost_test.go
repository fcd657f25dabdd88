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
	b.ReportMetric(appCPU/float64(b.N)*100, "app-cpu-%")
	b.ReportMetric(float64(procRSS(a.pid)>>10), "app-rss-MiB")
	b.ReportMetric(vmCPU/float64(b.N)*100, "vm-cpu-%")
	b.ReportMetric(float64(vmRSS>>10), "vm-rss-MiB")
	b.ReportMetric(busyLoopCPU(b)*100, "busy-poll-cpu-%")
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
