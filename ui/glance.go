package ui

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
)

// UsageReader is a Backend that can read the agents' resource use in the
// running VM (Controlled does, through the owner).
type UsageReader interface {
	Usage(ctx context.Context, req agentproto.UsageRequest) (agentproto.UsageResponse, error)
}

// Usage reads the agents' use through the owner.
func (c *Controlled) Usage(ctx context.Context, req agentproto.UsageRequest) (agentproto.UsageResponse, error) {
	return c.ctl.Usage(ctx, req)
}

// glanceEvery is how often the status at a glance is sampled while the VM
// runs (never while it doesn't).
const glanceEvery = 5 * time.Second

// glance is the top of the Container tab while the VM runs: the VM
// process's CPU and memory and each agent's use.
type glance struct {
	VM     *widget.Label
	Agents *widget.Label
	// readVM reads a process's CPU time and resident memory (Linux's
	// /proc; elsewhere it reports nothing).
	readVM func(pid int) (cpu time.Duration, rss int64, ok bool)
	// names maps Linux users (agent-SLUG) to agent names.
	names func() map[string]string

	prevAt  time.Time
	prevCPU time.Duration
	prevPid int
}

func newGlance() *glance {
	g := &glance{VM: widget.NewLabel(""), Agents: widget.NewLabel(""), readVM: procStat}
	g.Agents.Wrapping = fyne.TextWrapWord
	g.names = func() map[string]string { return nil }
	return g
}

// agentNames is the agents line while the VM doesn't run.
func (g *glance) agentNames() string {
	var names []string
	for _, n := range g.names() {
		names = append(names, n)
	}
	if len(names) == 0 {
		return "Agents: none yet; add one in the Agents tab."
	}
	sort.Strings(names)
	return "Agents: " + strings.Join(names, ", ")
}

// sample returns the two lines for a running VM with pid, and the
// agents' use (nil when unknown); call off the UI goroutine.
func (g *glance) sample(now time.Time, st control.Status, cpus, memGB int, usage *agentproto.UsageResponse) (vm, ag string) {
	vm = fmt.Sprintf("VM: %d CPUs, %d GB", cpus, memGB)
	if cpu, rss, ok := g.readVM(st.Pid); ok && st.Pid != 0 {
		if g.prevPid == st.Pid && now.After(g.prevAt) {
			pct := 100 * float64(cpu-g.prevCPU) / float64(now.Sub(g.prevAt))
			vm += fmt.Sprintf(" · using %.0f%% CPU", pct)
		}
		vm += fmt.Sprintf(" · %s memory in use", sizeText(rss))
		g.prevAt, g.prevCPU, g.prevPid = now, cpu, st.Pid
	}
	if usage == nil {
		return vm, ""
	}
	names := g.names()
	var parts []string
	for _, u := range usage.Users {
		name := names[u.User]
		if name == "" {
			continue // not an agent (diagnostics' users)
		}
		if u.Processes == 0 {
			parts = append(parts, name+": idle")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %d processes, %.0f MB", name, u.Processes, float64(u.MemoryBytes)/(1<<20)))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return vm, "Agents: none has run anything since the VM started."
	}
	return vm, "Agents: " + strings.Join(parts, " · ")
}

// followGlance samples while the VM runs, until ctx ends.
func (t *containerTab) followGlance(ctx context.Context) {
	tick := time.NewTicker(glanceEvery)
	defer tick.Stop()
	for {
		st := t.b.Status()
		if st.State == control.Running {
			cfg := t.glanceSettings()
			var usage *agentproto.UsageResponse
			if ur, ok := t.b.(UsageReader); ok {
				uctx, cancel := context.WithTimeout(ctx, glanceEvery)
				if r, err := ur.Usage(uctx, agentproto.UsageRequest{}); err == nil {
					usage = &r
				}
				cancel()
			}
			vm, ag := t.Glance.sample(t.now(), st, cfg.CPUs, cfg.MemoryGB, usage)
			t.do(func() {
				if t.b.Status().State == control.Running {
					t.Glance.VM.SetText(vm)
					t.Glance.Agents.SetText(ag)
				}
			})
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			case <-t.glanceWake:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-t.glanceWake:
		}
	}
}

// procStat reads pid's CPU time and resident memory from /proc.
func procStat(pid int) (time.Duration, int64, bool) {
	if pid <= 0 {
		return 0, 0, false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// Fields after the command (which may hold spaces) in parentheses.
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 22 {
		return 0, 0, false
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stt, _ := strconv.ParseInt(f[12], 10, 64)
	rssPages, _ := strconv.ParseInt(f[21], 10, 64)
	// USER_HZ is 100 on every Linux the app runs on.
	return time.Duration(ut+stt) * 10 * time.Millisecond, rssPages * int64(os.Getpagesize()), true
}
