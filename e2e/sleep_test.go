//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
	"github.com/osaurus/osaurus-sandbox/sandbox"
)

// qmpStatus asks QEMU itself, on the data dir's monitor socket, whether
// the guest runs: "running", "paused", ... (query-status), independent of
// what the owner believes.
func qmpStatus(t testing.TB, p config.Paths) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", p.Run()+"/qmp.sock")
	if err != nil {
		t.Fatalf("qmp: %v", err)
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	conn.SetDeadline(dl)
	r := bufio.NewReader(conn)
	reply := func() map[string]json.RawMessage {
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				t.Fatalf("qmp: %v", err)
			}
			var m map[string]json.RawMessage
			if json.Unmarshal(line, &m) != nil {
				t.Fatalf("qmp: %q", line)
			}
			if _, ev := m["event"]; !ev {
				return m
			}
		}
	}
	reply() // greeting
	fmt.Fprintln(conn, `{"execute":"qmp_capabilities"}`)
	reply()
	fmt.Fprintln(conn, `{"execute":"query-status"}`)
	var st struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(reply()["return"], &st); err != nil {
		t.Fatalf("qmp query-status: %v", err)
	}
	return st.Status
}

// guestClockSkew runs date in the guest and says how far its clock is
// from the host's, allowing for the command's own round trip.
func guestClockSkew(t testing.TB, g *agentproto.Client) time.Duration {
	t.Helper()
	var out bytes.Buffer
	before := time.Now()
	if _, err := g.Exec(context.Background(), agentproto.ExecRequest{Argv: []string{"date", "+%s.%N"}}, nil, &out, &out); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	secs, err := strconv.ParseFloat(strings.TrimSpace(out.String()), 64)
	if err != nil {
		t.Fatalf("guest date: %q", out.String())
	}
	guest := time.Unix(0, int64(secs*1e9))
	switch {
	case guest.Before(before):
		return guest.Sub(before)
	case guest.After(after):
		return guest.Sub(after)
	}
	return 0
}

// TestSleepClock: the guest does not run while asleep, so its clock
// falls behind by the sleep; the wake sets it from the host's before the
// first operation. Through the manager, so that no client's handshake
// (which also carries the host's clock) hides a missing reset.
func TestSleepClock(t *testing.T) {
	requireGuest(t)
	p := copyContainer(t)
	m := newTestManager(t, p, newSwitchableServer(t), sandbox.Options{})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	g := runningAgent(t, m)
	if skew := guestClockSkew(t, g); skew < -time.Second || skew > time.Second {
		t.Fatalf("guest clock %v off before the sleep", skew)
	}
	if err := m.Suspend(ctx); err != nil {
		t.Fatal(err)
	}
	if s := qmpStatus(t, p); s != "paused" {
		t.Fatalf("QEMU after Suspend: %q", s)
	}
	// The guest must miss more time than the tolerance below.
	const sleep = 4 * time.Second
	time.Sleep(sleep)
	g = runningAgent(t, m) // wakes it
	skew := guestClockSkew(t, g)
	t.Logf("guest clock after a %s sleep: %v from the host's", sleep, skew)
	if skew < -time.Second || skew > time.Second {
		t.Errorf("guest clock %v off after a %s sleep, want within 1s", skew, sleep)
	}
}

// TestSuspendResume: `suspend` pauses the VM in place (QEMU says paused,
// and its CPU time stops growing), status says since when, and the next
// command wakes it transparently with the guest's clock set from the
// host's (TestSleepClock checks the clock).
func TestSuspendResume(t *testing.T) {
	c, p := ownerSetup(t, false)
	c.ok("start")
	c.ok("exec", "--", "true")
	c.ok("suspend")
	st := c.status()
	if st.State != control.Running || st.SleepingSince == nil {
		t.Fatalf("status after suspend: %+v, want running with sleepingSince", st.Status)
	}
	if s := qmpStatus(t, p); s != "paused" {
		t.Fatalf("QEMU's status after suspend: %q, want paused", s)
	}
	if out := c.ok("status"); !strings.Contains(out, "sleeping since") {
		t.Errorf("status does not say it sleeps: %q", out)
	}
	// The measurement: QEMU's CPU time over a few seconds of sleep.
	const window = 4 * time.Second
	cpu0 := procCPU(st.Pid)
	time.Sleep(window)
	cpu1 := procCPU(st.Pid)
	t.Logf("QEMU used %.2f s of CPU in %s asleep", cpu1-cpu0, window)
	if used := cpu1 - cpu0; used > 0.05 {
		t.Errorf("a sleeping VM's QEMU used %.2f s of CPU in %s, want ~0", used, window)
	}
	if s := qmpStatus(t, p); s != "paused" {
		t.Fatalf("QEMU woke by itself: %q", s)
	}
	if out := c.ok("exec", "--", "echo", "awake"); out != "awake\n" {
		t.Fatalf("exec on a sleeping VM: %q", out)
	}
	if s := qmpStatus(t, p); s != "running" {
		t.Fatalf("QEMU after a command: %q, want running", s)
	}
	if st := c.status(); st.SleepingSince != nil {
		t.Fatalf("status after the wake still sleeping: %+v", st.Status)
	}
	// resume on request, and a suspend again, then stop: a sleeping VM
	// stops cleanly.
	c.ok("suspend")
	c.ok("resume")
	if s := qmpStatus(t, p); s != "running" {
		t.Fatalf("QEMU after resume: %q", s)
	}
	c.ok("suspend")
}

// TestIdleSuspend: with a tiny idleSuspendMinutes the owner pauses the
// VM by itself once nothing uses it, and an MCP-style tool call (here the
// CLI's exec, which goes through the owner the same way) wakes it.
func TestIdleSuspend(t *testing.T) {
	c, p := ownerSetup(t, false)
	c.ok("config", "set", "idleSuspendMinutes", "0.05") // 3 s
	c.ok("start")
	// The last use is this call, made after t0: the sleep must come at
	// least the limit later.
	t0 := time.Now()
	c.ok("exec", "--", "true")
	testwait.Eventually(t, "the idle VM to sleep", 2*time.Minute, 500*time.Millisecond, func() bool {
		return c.status().SleepingSince != nil
	})
	if slept := *c.status().SleepingSince; slept.Sub(t0) < 3*time.Second {
		t.Errorf("slept %v after the last call, before the 3 s idle limit", slept.Sub(t0))
	}
	if s := qmpStatus(t, p); s != "paused" {
		t.Fatalf("QEMU's status when the owner says it sleeps: %q", s)
	}
	if out := c.ok("exec", "--", "echo", "awake"); out != "awake\n" {
		t.Fatalf("exec on a sleeping VM: %q", out)
	}
	if s := qmpStatus(t, p); s != "running" {
		t.Fatalf("QEMU after a call: %q", s)
	}
	// The watch goes on after a wake: it sleeps again once idle.
	testwait.Eventually(t, "the second sleep", 2*time.Minute, 500*time.Millisecond, func() bool {
		return c.status().SleepingSince != nil
	})
}

// BenchmarkResumeExec: a sleeping VM woken by a command: resume (QMP
// cont, the guest's clock set) to the end of the first exec of true; and
// the host CPU QEMU uses asleep, beside awake and idle, over the same
// window.
func BenchmarkResumeExec(b *testing.B) {
	requireGuest(b)
	p := copyContainer(b)
	m := newTestManager(b, p, newSwitchableServer(b), sandbox.Options{})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		b.Fatal(err)
	}
	run := func(g *agentproto.Client) {
		var out bytes.Buffer
		if st, err := g.Exec(ctx, agentproto.ExecRequest{Argv: []string{"true"}}, nil, &out, &out); err != nil || st.Code != 0 {
			b.Fatalf("exec true: %v %+v %s", err, st, out.String())
		}
	}
	g, _ := m.Agent()
	run(g)
	pid := m.Status().Pid
	const window = 5 * time.Second
	cpuOver := func() float64 {
		c0 := procCPU(pid)
		time.Sleep(window) // the measurement is the waiting
		return (procCPU(pid) - c0) / window.Seconds() * 100
	}
	awake := cpuOver()
	if err := m.Suspend(ctx); err != nil {
		b.Fatal(err)
	}
	asleep := cpuOver()
	// Each round: asleep → wake and exec (the figure), then the same exec
	// awake, as its baseline in the same load.
	var total, awakeExec time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i > 0 {
			b.StopTimer()
			if err := m.Suspend(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		t0 := time.Now()
		g, err := m.Agent()
		if err != nil {
			b.Fatal(err)
		}
		run(g)
		total += time.Since(t0)
		b.StopTimer()
		t0 = time.Now()
		run(g)
		awakeExec += time.Since(t0)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "resume-exec-ms")
	b.ReportMetric(float64(awakeExec.Microseconds())/1000/float64(b.N), "awake-exec-ms")
	b.ReportMetric(awake, "awake-idle-qemu-cpu-%")
	b.ReportMetric(asleep, "asleep-qemu-cpu-%")
}
