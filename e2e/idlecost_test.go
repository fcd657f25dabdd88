//go:build linux

package e2e

import (
	"os"
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

// checkIdleCost measures the app (its window open, the VM running and
// idle): its own resident memory and CPU, and its VM's, over idleWindow.
// An app that polls busily fails: a busy loop costs a whole core, while
// idle measured 1-3 % here. The bound is loose because software
// rendering under Xvfb costs more on slower machines; the figure itself
// is in the log and in make bench.
func checkIdleCost(t *testing.T, appPid int) {
	t.Helper()
	kids := descendants(appPid)
	cpu := func() (app, vm float64) {
		app = procCPU(appPid)
		for _, k := range kids {
			vm += procCPU(k)
		}
		return
	}
	a0, v0 := cpu()
	// The measurement is the waiting: nothing is asked of the app.
	time.Sleep(idleWindow)
	a1, v1 := cpu()
	appCPU, vmCPU := (a1-a0)/idleWindow.Seconds(), (v1-v0)/idleWindow.Seconds()
	var vmRSS int64
	var parts []string
	for _, k := range kids {
		r := procRSS(k)
		vmRSS += r
		parts = append(parts, commOf(k)+" "+strconv.FormatInt(r>>10, 10)+" MiB")
	}
	t.Logf("idle cost over %v with the window open and the VM running: app RSS %d MiB, CPU %.1f%% of a core; VM (%s) RSS %d MiB, CPU %.1f%%",
		idleWindow, procRSS(appPid)>>10, appCPU*100, strings.Join(parts, ", "), vmRSS>>10, vmCPU*100)
	if appCPU > 0.25 {
		t.Errorf("the app used %.1f%% of a core while idle; want no busy polling (< 25%%)", appCPU*100)
	}
}
