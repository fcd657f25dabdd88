package sandbox

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
)

// An idle VM is paused once the limit passes, but not while an agent has
// a process; the next guest operation wakes it and resets the clock.
func TestIdleSuspendAndWake(t *testing.T) {
	d := &fakeDriver{pausable: true}
	m := newManager(t, d, Options{IdleSuspend: func() time.Duration { return 200 * time.Millisecond }})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := d.last()
	// A background process keeps it awake: the manager asked three
	// times, after the limit each time, and left it running.
	p.agentProcs.Store(1)
	waitFor(t, "three idle checks", func() bool { return p.usages.Load() >= 3 })
	if st := m.Status(); st.SleepingSince != nil || p.paused.Load() {
		t.Fatalf("paused while an agent had a process: %+v", st)
	}
	p.agentProcs.Store(0)
	waitFor(t, "idle suspend", func() bool { return m.Status().SleepingSince != nil })
	if !p.paused.Load() {
		t.Fatal("status says sleeping, but the hypervisor was not paused")
	}
	hellos := p.hellos.Load()
	// Awake only hands out an awake VM, and doesn't wake it.
	if _, err := m.Awake(); !errors.Is(err, control.ErrNotRunning) {
		t.Fatalf("Awake on a sleeping VM: %v", err)
	}
	if _, err := m.Agent(); err != nil {
		t.Fatal(err)
	}
	if p.paused.Load() || m.Status().SleepingSince != nil {
		t.Fatal("Agent did not wake the VM")
	}
	if p.hellos.Load() != hellos+1 {
		t.Fatalf("hello (the clock) sent %d times on wake, want once", p.hellos.Load()-hellos)
	}
}

// An agent that opted out (ProcessesKeepAwake false for its user) has a
// process, and the idle VM is paused all the same; the manager asked whose
// processes they were.
func TestOptedOutProcessesDontKeepAwake(t *testing.T) {
	d := &fakeDriver{pausable: true}
	var asked atomic.Value
	m := newManager(t, d, Options{
		IdleSuspend:        func() time.Duration { return 200 * time.Millisecond },
		ProcessesKeepAwake: func(user string) bool { asked.Store(user); return false },
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := d.last()
	p.agentProcs.Store(1)
	waitFor(t, "idle suspend", func() bool { return m.Status().SleepingSince != nil })
	if !p.paused.Load() || p.agentProcs.Load() != 1 {
		t.Fatalf("paused %v with %d processes", p.paused.Load(), p.agentProcs.Load())
	}
	if u, _ := asked.Load().(string); u != "a" {
		t.Errorf("asked about user %q, want the fake's %q", u, "a")
	}
}

// Suspend and Resume on request; Stop wakes the guest for a clean
// power-off (the fake only powers off when its agent is asked).
func TestSuspendResumeStop(t *testing.T) {
	d := &fakeDriver{pausable: true}
	m := newManager(t, d, Options{})
	ctx := context.Background()
	if err := m.Suspend(ctx); !errors.Is(err, control.ErrNotRunning) {
		t.Fatalf("suspend of a stopped VM: %v", err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	p := d.last()
	if err := m.Suspend(ctx); err != nil || !p.paused.Load() || m.Status().SleepingSince == nil {
		t.Fatalf("suspend: %v, paused %v", err, p.paused.Load())
	}
	if err := m.Resume(ctx); err != nil || p.paused.Load() || m.Status().SleepingSince != nil {
		t.Fatalf("resume: %v, paused %v", err, p.paused.Load())
	}
	m.Suspend(ctx)
	if err := m.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if p.paused.Load() || p.Err() != nil {
		t.Fatalf("stop of a sleeping VM: paused %v, exit %v (want a clean power-off)", p.paused.Load(), p.Err())
	}
}

// A driver that can't pause says so.
func TestSuspendUnsupported(t *testing.T) {
	d := &fakeDriver{}
	m := newManager(t, d, Options{})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Suspend(context.Background()); err == nil || m.Status().SleepingSince != nil {
		t.Fatalf("suspend without a Pauser: %v, status %+v", err, m.Status())
	}
}

func TestIdleTick(t *testing.T) {
	for _, tc := range []struct{ limit, want time.Duration }{
		{0, 30 * time.Second},
		{15 * time.Minute, 30 * time.Second},
		{time.Minute, 6 * time.Second},
		{200 * time.Millisecond, 100 * time.Millisecond},
	} {
		if got := idleTick(tc.limit); got != tc.want {
			t.Errorf("idleTick(%s) = %s, want %s", tc.limit, got, tc.want)
		}
	}
}

// WithStopped stops a running VM for fn, refuses other lifecycle
// operations meanwhile, and starts it again; a stopped VM stays stopped.
func TestWithStopped(t *testing.T) {
	d := &fakeDriver{pausable: true}
	m := newManager(t, d, Options{})
	ctx := context.Background()
	var sawRunning bool
	if err := m.WithStopped(ctx, "restore", func(was bool) error { sawRunning = was; return nil }); err != nil || sawRunning {
		t.Fatalf("stopped VM: %v, wasRunning %v", err, sawRunning)
	}
	if st := m.Status().State; st != control.Stopped {
		t.Fatalf("a stopped VM was started: %s", st)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	first := d.last()
	err := m.WithStopped(ctx, "restore", func(was bool) error {
		sawRunning = was
		if m.Status().State != control.Stopped {
			t.Errorf("fn ran with the VM %s", m.Status().State)
		}
		if err := m.Start(ctx); !errors.Is(err, control.ErrBusy) {
			t.Errorf("start during the restore: %v, want control.ErrBusy", err)
		}
		return nil
	})
	if err != nil || !sawRunning {
		t.Fatalf("running VM: %v, wasRunning %v", err, sawRunning)
	}
	if st := m.Status().State; st != control.Running || d.last() == first {
		t.Fatalf("after: %s, same machine %v; want a new running VM", st, d.last() == first)
	}
}

// Hold on a stopped VM runs fn without starting it, and keeps lifecycle
// operations out meanwhile.
func TestHoldStopped(t *testing.T) {
	d := &fakeDriver{pausable: true}
	m := newManager(t, d, Options{})
	ctx := context.Background()
	err := m.Hold(ctx, "checkpoint", func(running bool) error {
		if running {
			t.Error("fn told the VM runs")
		}
		if err := m.Start(ctx); !errors.Is(err, control.ErrBusy) {
			t.Errorf("start during a checkpoint: %v, want control.ErrBusy", err)
		}
		return nil
	})
	if err != nil || d.starts.Load() != 0 {
		t.Fatalf("%v, %d starts", err, d.starts.Load())
	}
}

// The window's background reads (Quiet) neither keep the VM awake, even
// a long poll held open, nor wake it.
func TestQuietReadsDontKeepAwake(t *testing.T) {
	d := &fakeDriver{pausable: true}
	m := newManager(t, d, Options{IdleSuspend: func() time.Duration { return 200 * time.Millisecond }})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	g, done, err := m.Quiet()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		defer done()
		g.NetLog(ctx, agentproto.NetLogRequest{WaitMillis: 60000})
	}()
	waitFor(t, "idle suspend with a long poll open", func() bool { return m.Status().SleepingSince != nil })
	if _, _, err := m.Quiet(); !errors.Is(err, ErrSleeping) {
		t.Fatalf("Quiet on a sleeping VM: %v, want ErrSleeping", err)
	}
	if !d.last().paused.Load() {
		t.Fatal("a quiet read woke the VM")
	}
}
