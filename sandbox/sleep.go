package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/vm"
)

// Suspend pauses the running VM in place: its vCPUs stop (no host CPU),
// its memory and processes stay. The status keeps Running, with
// SleepingSince; the next guest operation (Agent) wakes it.
func (m *Manager) Suspend(ctx context.Context) error {
	m.pmu.Lock()
	defer m.pmu.Unlock()
	return m.suspend(ctx, nil)
}

// suspend pauses the VM when ok (nil: always) agrees, asked under mu at
// the moment the VM is marked sleeping: from then on Agent waits for the
// pause to finish and wakes the VM, so no call is left hanging in a
// paused guest. Callers hold pmu.
func (m *Manager) suspend(ctx context.Context, ok func() bool) error {
	m.mu.Lock()
	mach := m.machine
	switch {
	case mach == nil:
		m.mu.Unlock()
		return control.ErrNotRunning
	case m.status.SleepingSince != nil:
		m.mu.Unlock()
		return nil
	case m.busy != "":
		busy := m.busy
		m.mu.Unlock()
		return fmt.Errorf("%w: %s in progress", control.ErrBusy, busy)
	case ok != nil && !ok():
		m.mu.Unlock()
		return errNotIdle
	}
	now := time.Now()
	m.pauses++
	notify := m.setLocked(func(s *control.Status) { s.SleepingSince = &now })
	m.mu.Unlock()
	if err := mach.Pause(ctx); err != nil {
		m.set(func(s *control.Status) {
			if m.machine == mach {
				s.SleepingSince = nil
			}
		})
		return fmt.Errorf("pausing the VM: %w", err)
	}
	notify()
	m.o.Logf("the VM is sleeping")
	return nil
}

// errNotIdle: the idle check changed its mind at the last moment.
var errNotIdle = errors.New("the VM is in use")

// Resume wakes a sleeping VM and sets the guest's clock from the host's
// (it lost the time it slept). Nothing to do when it is awake.
func (m *Manager) Resume(ctx context.Context) error {
	m.mu.Lock()
	mach := m.machine
	m.mu.Unlock()
	if mach == nil {
		return control.ErrNotRunning
	}
	return m.resume(ctx, mach)
}

func (m *Manager) resume(ctx context.Context, mach *vm.Machine) error {
	m.pmu.Lock()
	defer m.pmu.Unlock()
	return m.resumeLocked(ctx, mach)
}

// resumeLocked is resume for a caller holding pmu.
func (m *Manager) resumeLocked(ctx context.Context, mach *vm.Machine) error {
	m.mu.Lock()
	sleeping := m.status.SleepingSince != nil
	m.mu.Unlock()
	if !sleeping {
		return nil
	}
	start := time.Now()
	if err := mach.Resume(ctx); err != nil {
		return fmt.Errorf("waking the VM: %w", err)
	}
	// Before any caller's operation: a command run right after the wake
	// sees the right time (make, TLS).
	if err := mach.Agent().SyncClock(ctx); err != nil {
		m.o.Logf("setting the guest's clock after the wake: %v", err)
	}
	m.mu.Lock()
	m.lastUse = time.Now()
	notify := m.setLocked(func(s *control.Status) { s.SleepingSince = nil })
	m.mu.Unlock()
	notify()
	m.o.Logf("the VM woke up in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// idleTick is how often idleWatch looks, for an idle limit of d: often
// enough to pause within a tenth of it, at most every 30 s (which is also
// how soon a setting turned on from 0 applies).
func idleTick(d time.Duration) time.Duration {
	t := d / 10
	switch {
	case d <= 0 || t > 30*time.Second:
		return 30 * time.Second
	case t < 100*time.Millisecond:
		return 100 * time.Millisecond
	}
	return t
}

// idleWatch pauses mach once nothing has used it for the idle limit: no
// guest operation handed out (Agent), no stream open on the session for
// two looks in a row (a shell, a preview's connection, a call; one look
// may just meet a watchdog ping), and no process left in the cgroup of an
// agent whose processes keep it awake (ProcessesKeepAwake: background
// processes count as activity unless the agent opted out).
func (m *Manager) idleWatch(mach *vm.Machine) {
	if m.o.IdleSuspend == nil {
		return
	}
	peer := mach.Agent().Peer
	streamsSeen := false
	for {
		limit := m.o.IdleSuspend()
		select {
		case <-mach.Done():
			return
		case <-time.After(idleTick(limit)):
		}
		if limit = m.o.IdleSuspend(); limit <= 0 {
			continue
		}
		m.mu.Lock()
		if m.machine != mach {
			m.mu.Unlock()
			return
		}
		skip := m.status.SleepingSince != nil || m.busy != "" || m.starting != nil
		m.mu.Unlock()
		if skip {
			streamsSeen = false
			continue
		}
		if peer.Streams()-int(m.quiet.Load()) > 0 {
			if streamsSeen {
				m.touch()
			}
			streamsSeen = true
			continue
		}
		streamsSeen = false
		if !m.idleFor(limit) {
			continue
		}
		if m.agentsBusy(mach) {
			m.touch()
			continue
		}
		m.pmu.Lock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := m.suspend(ctx, func() bool {
			return m.machine == mach && time.Since(m.lastUse) >= limit && peer.Streams()-int(m.quiet.Load()) <= 0
		})
		cancel()
		m.pmu.Unlock()
		switch {
		case err == nil:
			m.o.Logf("idle for %s: paused the VM (idleSuspendMinutes)", limit)
		case errors.Is(err, errNotIdle), errors.Is(err, control.ErrNotRunning), errors.Is(err, control.ErrBusy):
		default:
			m.o.Logf("idle suspend: %v", err)
		}
	}
}

func (m *Manager) touch() {
	m.mu.Lock()
	m.lastUse = time.Now()
	m.mu.Unlock()
}

func (m *Manager) idleFor(limit time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return time.Since(m.lastUse) >= limit
}

// agentsBusy reports whether an agent still has a process in the guest
// (a background job, a server) that keeps it awake: one usage call. An
// answer it can't get counts as busy, except from a guest too old to
// report usage.
func (m *Manager) agentsBusy(mach *vm.Machine) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := mach.Agent().Usage(ctx, agentproto.UsageRequest{})
	if err != nil {
		return !errors.Is(err, agentproto.ErrUnsupported)
	}
	return ProcessesKeepAwake(u.Users, m.o.ProcessesKeepAwake)
}

// ProcessesKeepAwake reports whether any of users has a running process
// that keeps the VM awake: every user's does, unless keeps (nil: none
// opted out) says its processes don't.
func ProcessesKeepAwake(users []agentproto.UserUsage, keeps func(user string) bool) bool {
	for _, x := range users {
		if x.Processes > 0 && (keeps == nil || keeps(x.User)) {
			return true
		}
	}
	return false
}

// Hold runs fn with the sandbox's state held still: no lifecycle
// operation runs meanwhile, and a running VM has its writes flushed
// (sync in the guest) and is paused for fn, then woken (with its clock
// set). running tells fn which it was. Guest operations made meanwhile
// wait for the wake. For a consistent checkpoint.
func (m *Manager) Hold(ctx context.Context, op string, fn func(running bool) error) error {
	if err := m.claim(op); err != nil {
		return err
	}
	defer m.release()
	m.mu.Lock()
	mach := m.machine
	m.mu.Unlock()
	if mach == nil {
		return fn(false)
	}
	// A sleeping guest may hold writes it has not flushed: wake it to.
	if err := m.resume(ctx, mach); err != nil {
		return err
	}
	var out strings.Builder
	st, err := mach.Agent().Exec(ctx, agentproto.ExecRequest{Argv: []string{"sync"}}, nil, &out, &out)
	if err == nil && st.Code != 0 {
		err = fmt.Errorf("sync exited %d: %s", st.Code, out.String())
	}
	if err != nil {
		return fmt.Errorf("flushing the guest's writes before %s: %w", op, err)
	}
	m.pmu.Lock()
	defer m.pmu.Unlock()
	now := time.Now()
	m.mu.Lock()
	if m.machine != mach {
		m.mu.Unlock()
		return control.ErrNotRunning
	}
	m.pauses++
	notify := m.setLocked(func(s *control.Status) { s.SleepingSince = &now })
	m.mu.Unlock()
	notify()
	if err := mach.Pause(ctx); err != nil {
		m.set(func(s *control.Status) { s.SleepingSince = nil })
		return fmt.Errorf("pausing the VM for %s: %w", op, err)
	}
	ferr := fn(true)
	// Woken whatever fn did, and even when ctx ended: a VM left paused
	// by a cancelled checkpoint would look hung.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := m.resumeLocked(wctx, mach); err != nil {
		return errors.Join(ferr, err)
	}
	return ferr
}

// WithStopped runs fn with the VM stopped and no lifecycle operation
// running, then starts the VM again if it was running: for a restore,
// which replaces its disk. wasRunning says which it was.
func (m *Manager) WithStopped(ctx context.Context, op string, fn func(wasRunning bool) error) error {
	if err := m.claim(op); err != nil {
		return err
	}
	m.mu.Lock()
	running := m.machine != nil
	m.mu.Unlock()
	if running {
		if err := m.stop(ctx); err != nil {
			m.release()
			return fmt.Errorf("stopping the VM for %s: %w", op, err)
		}
	}
	err := fn(running)
	m.release()
	if running {
		if serr := m.Start(ctx); serr != nil {
			return errors.Join(err, fmt.Errorf("starting the VM again after %s: %w", op, serr))
		}
	}
	return err
}
