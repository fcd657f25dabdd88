package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/internal/subscribers"
	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/provision/download"
	"github.com/osaurus/osaurus-sandbox/vm"
)

// Sentinel errors.
var (
	ErrCoolingOff = agentproto.Class(agentproto.ErrUnavailable, "the sandbox crashed repeatedly; automatic restarts are paused")
)

// Options configure a Manager.
type Options struct {
	Paths  config.Paths
	Driver vm.Driver
	// Manifest resolves the image to provision (from sandbox.json or the
	// built-in default).
	Manifest func(ctx context.Context, cfg config.Sandbox) (*provision.Manifest, error)
	// Agent returns the guest agent binary for an architecture.
	Agent func(arch string) ([]byte, error)
	// Download is the client for provisioning downloads.
	Download *download.Client
	// StopTimeout bounds a graceful stop before the VM is killed.
	StopTimeout time.Duration
	// RestartLimit unexpected exits within CrashWindow are restarted
	// automatically; one more pauses restarts for Cooldown.
	RestartLimit int
	CrashWindow  time.Duration
	Cooldown     time.Duration
	// RestartDelay separates a crash from the automatic restart.
	RestartDelay time.Duration
	// DiskSize of new root disks (default 8 GiB).
	DiskSize int64
	// PingInterval separates the watchdog's pings of the guest agent
	// (default 2s); a ping unanswered after PingTimeout (default 5s: a busy
	// TCG guest can take a second or two) marks the guest unresponsive.
	PingInterval time.Duration
	PingTimeout  time.Duration
	// WedgedAfter is how long a guest may stay unresponsive before it is
	// killed and restarted under the restart policy (default 30s).
	WedgedAfter time.Duration
	Logf        func(format string, args ...any)
	// OnGuest is called with every new guest session (boot or re-attach)
	// before the sandbox reports Running. The host API bridge hooks in
	// here: it serves the guest's calls and installs osaurus-host.
	OnGuest func(ctx context.Context, c *agentproto.Client)
	// IdleSuspend says how long the VM may be idle before it is paused
	// (0: never); read again on every check, so a changed setting
	// applies without a restart. Nil means never.
	IdleSuspend func() time.Duration
	// ProcessesKeepAwake reports whether a guest user's running processes
	// (an agent's background jobs, servers) keep the VM from idle
	// suspend: false for an agent that opted out (its
	// backgroundKeepsAwake setting). Nil: every user's do.
	ProcessesKeepAwake func(user string) bool
}

// Manager owns the VM of one data dir. Its methods are safe for concurrent
// use; long operations take a ctx.
type Manager struct {
	o    Options
	prov *provision.Provisioner

	mu       sync.Mutex
	status   control.Status
	machine  *vm.Machine
	starting *flight // the Start attempt in progress, shared by callers
	busy     string  // a provision, stop, reset or remove in progress
	crashes  []time.Time
	subs     subscribers.List[control.Status]
	closed   bool
	timers   []*time.Timer
	// restartAfter schedules an automatic restart (time.AfterFunc); tests
	// replace it to see the delays asked for without waiting them out.
	restartAfter func(time.Duration, func()) *time.Timer
	// watching counts running watch goroutines, so a test can tell that
	// the restart policy has had its say about an exit.
	watching sync.WaitGroup
	// wedged is the machine the watchdog killed and why: watch reports
	// that exit as a crash, not as a requested stop.
	wedged    *vm.Machine
	wedgedErr error
	// pmu serialises pausing and resuming; Agent waits on it to wake a
	// sleeping VM. Taken before mu, never while holding it.
	pmu sync.Mutex
	// lastUse is when a guest operation was last handed out (Agent) or
	// activity last seen in the guest.
	lastUse time.Time
	// pauses counts suspends, so the watchdog can tell that a ping went
	// unanswered because the VM slept.
	pauses int
	// quiet counts the background reads in flight (Quiet): their
	// streams are not activity.
	quiet atomic.Int32
}

type flight struct {
	done chan struct{}
	err  error
}

// New returns a manager in the state found on disk.
func New(o Options) *Manager {
	if o.StopTimeout == 0 {
		o.StopTimeout = 30 * time.Second
	}
	if o.RestartLimit == 0 {
		o.RestartLimit = 3
	}
	if o.CrashWindow == 0 {
		o.CrashWindow = 10 * time.Minute
	}
	if o.Cooldown == 0 {
		o.Cooldown = 120 * time.Second
	}
	if o.RestartDelay == 0 {
		o.RestartDelay = time.Second
	}
	if o.PingInterval == 0 {
		o.PingInterval = 2 * time.Second
	}
	if o.PingTimeout == 0 {
		o.PingTimeout = 5 * time.Second
	}
	if o.WedgedAfter == 0 {
		o.WedgedAfter = 30 * time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Download == nil {
		o.Download = &download.Client{}
	}
	m := &Manager{o: o, restartAfter: time.AfterFunc}
	m.prov = &provision.Provisioner{
		Layout:   provision.Layout{Dir: o.Paths.ContainerDir()},
		Download: o.Download,
		Agent:    o.Agent,
		DiskSize: o.DiskSize,
		Progress: m.onProgress,
	}
	m.status = control.Status{State: control.NotProvisioned, Since: time.Now()}
	if _, err := m.prov.Load(); err == nil {
		m.status.State = control.Stopped
	}
	return m
}

// Paths returns the data layout.
func (m *Manager) Paths() config.Paths { return m.o.Paths }

// Status returns a snapshot.
func (m *Manager) Status() control.Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.status
	if s.Progress != nil {
		p := *s.Progress
		s.Progress = &p
	}
	return s
}

// Subscribe calls fn with every status change until cancel is called.
// fn runs on the goroutine making the change and must not block.
func (m *Manager) Subscribe(fn func(control.Status)) (cancel func()) { return m.subs.Add(fn) }

// setLocked changes the status and notifies subscribers. Callers hold mu;
// the notification happens after unlock via the returned func.
func (m *Manager) setLocked(mutate func(*control.Status)) func() {
	prev := m.status.State
	mutate(&m.status)
	if m.status.State != prev {
		m.status.Since = time.Now()
	}
	if m.status.State != control.Provisioning {
		m.status.Progress = nil
	}
	snap := m.status
	subs := m.subs.Snapshot()
	saved := savedState{State: snap.State, Reason: snap.Reason, Pid: snap.Pid, At: time.Now().UTC()}
	return func() {
		if err := os.MkdirAll(m.o.Paths.Root, 0o755); err == nil {
			save(m.o.Paths.StateFile(), saved)
		}
		for _, fn := range subs {
			fn(snap)
		}
	}
}

func (m *Manager) set(mutate func(*control.Status)) {
	m.mu.Lock()
	notify := m.setLocked(mutate)
	m.mu.Unlock()
	notify()
}

func (m *Manager) onProgress(p provision.Progress) {
	m.set(func(s *control.Status) {
		s.Progress = &control.Progress{Phase: p.Phase, Done: p.Done, Total: p.Total}
	})
}

// claim marks a long exclusive operation, refusing if another runs.
func (m *Manager) claim(op string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.busy != "" {
		return fmt.Errorf("%w: %s in progress", control.ErrBusy, m.busy)
	}
	if m.starting != nil && op != "start" {
		return fmt.Errorf("%w: start in progress", control.ErrBusy)
	}
	m.busy = op
	return nil
}

func (m *Manager) release() {
	m.mu.Lock()
	m.busy = ""
	m.mu.Unlock()
}

// Provision downloads and builds the VM's files. It refuses while the VM
// runs. Cancelling ctx stops it and leaves "not provisioned" (or the
// previous complete provision's files, which stay usable only if intact).
func (m *Manager) Provision(ctx context.Context) error {
	if err := m.claim("provision"); err != nil {
		return err
	}
	defer m.release()
	return m.provision(ctx)
}

func (m *Manager) provision(ctx context.Context) error {
	mach, err := m.provisionBoot(ctx)
	if mach != nil {
		// An explicit provision (or a reset) leaves the VM stopped.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.o.StopTimeout)
		defer cancel()
		if serr := mach.Stop(sctx); serr != nil {
			m.o.Logf("stopping the VM after installing the image's packages: %v", serr)
		}
		m.set(func(s *control.Status) { s.State, s.Reason = control.Stopped, "" })
	}
	return err
}

// provisionBoot builds the VM's files. When the image has packages, it
// boots the VM and installs them before the provision counts as done, and
// returns that running machine (the caller adopts or stops it); nil
// otherwise. A failure leaves "not provisioned" and no VM.
func (m *Manager) provisionBoot(ctx context.Context) (*vm.Machine, error) {
	m.mu.Lock()
	if m.machine != nil {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: stop the VM before provisioning again (or use reset)", control.ErrBusy)
	}
	notify := m.setLocked(func(s *control.Status) { s.State, s.Reason = control.Provisioning, "" })
	m.mu.Unlock()
	notify()
	// Building the root disk churns through gigabytes of short-lived
	// buffers and peaks at hundreds of MB of heap. None of it is live
	// afterwards, but the runtime keeps the freed heap resident until a GC
	// lowers its goal and the scavenger returns it, which an idle owner
	// may not get to for minutes. Give it back now, whatever the outcome.
	defer debug.FreeOSMemory()
	var mach *vm.Machine
	cfg, err := config.LoadSandbox(m.o.Paths.SandboxJSON())
	if err == nil {
		var man *provision.Manifest
		if man, err = m.o.Manifest(ctx, cfg); err == nil {
			var st *provision.State
			if st, err = m.prov.Provision(ctx, man); err == nil && len(st.PendingPackages) > 0 {
				mach, err = m.installPackages(ctx, cfg, st)
			}
		}
	}
	if err != nil {
		reason := err.Error()
		if ctx.Err() != nil {
			reason = "provisioning cancelled"
		}
		m.set(func(s *control.Status) { s.State, s.Reason = control.NotProvisioned, reason })
		return nil, fmt.Errorf("provision: %w", err)
	}
	if mach == nil {
		m.set(func(s *control.Status) { s.State, s.Reason = control.Stopped, "" })
	}
	return mach, nil
}

// installPackages boots the freshly provisioned VM and installs the
// image's packages as root before anything else can use it: the machine
// is not the manager's yet, so no agent reaches it. Only then is the
// provision recorded. On failure the VM is killed and nothing is recorded,
// so the next start provisions again from the pristine disk.
func (m *Manager) installPackages(ctx context.Context, cfg config.Sandbox, st *provision.State) (*vm.Machine, error) {
	spec, err := m.spec(cfg)
	if err != nil {
		return nil, err
	}
	m.onProgress(provision.Progress{Phase: "boot", Total: -1})
	mach, err := vm.Boot(ctx, m.o.Driver, spec, vm.Options{OnEvent: m.vmEvent})
	if err != nil {
		return nil, fmt.Errorf("booting to install the image's packages: %w", err)
	}
	pk := &provision.Packages{
		Agent: mach.Agent(), Distro: st.Distro, CacheDir: m.o.Paths.PackageCache(),
		Progress: m.onProgress, Logf: m.o.Logf,
	}
	err = os.MkdirAll(m.o.Paths.PackageCache(), 0o755)
	if err == nil {
		err = pk.Install(ctx, st.PendingPackages, st.FreshDisk)
	}
	if err == nil {
		err = m.prov.Commit(st)
	}
	if err != nil {
		mach.Kill()
		<-mach.Done()
		return nil, err
	}
	m.o.Logf("installed the image's packages: %s", strings.Join(st.Packages, " "))
	return mach, nil
}

// Start boots the VM, provisioning first when needed. Concurrent calls
// share one attempt (run with the first caller's ctx).
func (m *Manager) Start(ctx context.Context) error {
	return m.start(ctx, false)
}

func (m *Manager) start(ctx context.Context, automatic bool) error {
	m.mu.Lock()
	if m.machine != nil {
		m.mu.Unlock()
		return nil
	}
	if f := m.starting; f != nil {
		m.mu.Unlock()
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if m.busy != "" {
		busy := m.busy
		m.mu.Unlock()
		return fmt.Errorf("%w: %s in progress", control.ErrBusy, busy)
	}
	if cd := m.status.CooldownUntil; automatic && cd != nil && time.Now().Before(*cd) {
		m.mu.Unlock()
		return fmt.Errorf("%w until %s", ErrCoolingOff, cd.Format(time.Kitchen))
	}
	f := &flight{done: make(chan struct{})}
	m.starting = f
	m.mu.Unlock()

	f.err = m.boot(ctx)

	m.mu.Lock()
	m.starting = nil
	m.mu.Unlock()
	close(f.done)
	return f.err
}

func (m *Manager) boot(ctx context.Context) error {
	st, err := m.prov.Load()
	if errors.Is(err, provision.ErrNotProvisioned) {
		mach, perr := m.provisionBoot(ctx)
		if perr != nil {
			return perr
		}
		if mach != nil {
			// The first boot installed the image's packages: that VM is
			// the one to run.
			m.adopt(mach)
			return nil
		}
		st, err = m.prov.Load()
	}
	if err != nil {
		m.set(func(s *control.Status) { s.State, s.Reason = control.NotProvisioned, err.Error() })
		return err
	}
	if err := m.prov.RefreshAgent(st); err != nil {
		return fmt.Errorf("updating the guest agent: %w", err)
	}
	spec, err := m.loadSpec()
	if err != nil {
		return err
	}
	m.set(func(s *control.Status) { s.State, s.Reason = control.Starting, "" })
	mach, err := vm.Boot(ctx, m.o.Driver, spec, vm.Options{OnEvent: m.vmEvent})
	if err != nil {
		m.set(func(s *control.Status) { s.State, s.Reason = control.Error, "start failed: "+err.Error() })
		return err
	}
	m.adopt(mach)
	return nil
}

// adopt makes a booted or re-attached machine the current one.
func (m *Manager) adopt(mach *vm.Machine) {
	if m.o.OnGuest != nil {
		m.o.OnGuest(context.Background(), mach.Agent())
	}
	info, g := mach.Info(), mach.Guest()
	m.mu.Lock()
	m.machine = mach
	m.lastUse = time.Now()
	notify := m.setLocked(func(s *control.Status) {
		s.State, s.Reason = control.Running, ""
		s.SleepingSince = nil
		s.Driver, s.Accel, s.Transport, s.Pid = info.Driver, info.Accel, info.Transport, info.Pid
		s.AccelReason = info.AccelReason
		s.Distro, s.Kernel, s.BootSecs = g.Distro, g.Kernel, g.BootSeconds
		s.CooldownUntil = nil
		s.Unresponsive = nil
	})
	m.mu.Unlock()
	notify()
	m.watching.Add(1)
	go func() { defer m.watching.Done(); m.watch(mach) }()
	go m.watchdog(mach)
	go m.idleWatch(mach)
}

// ErrUnresponsive: the guest agent stopped answering (a wedged kernel, a
// fork bomb starving it, ...).
var ErrUnresponsive = agentproto.Class(agentproto.ErrUnavailable, "the guest agent stopped answering")

// watchdog pings the guest agent until the machine ends. An unanswered
// ping marks the guest unresponsive in the status (the VM process may be
// alive, but nothing works); an answer clears it; staying unresponsive
// for WedgedAfter kills the VM, which the restart policy then treats as a
// crash.
func (m *Manager) watchdog(mach *vm.Machine) {
	t := time.NewTicker(m.o.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-mach.Done():
			return
		case <-t.C:
		}
		// A sleeping VM answers nothing, by design.
		m.mu.Lock()
		sleeping, pauses := m.status.SleepingSince != nil, m.pauses
		m.mu.Unlock()
		if sleeping {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.o.PingTimeout)
		_, err := mach.Agent().Stat(ctx, agentproto.PathRequest{Path: "/"})
		cancel()
		if re := (*agentproto.RemoteError)(nil); errors.As(err, &re) {
			err = nil // an error answer is still an answer
		}
		select {
		case <-mach.Done():
			return
		default:
		}
		m.mu.Lock()
		if m.machine != mach {
			m.mu.Unlock()
			return
		}
		if err != nil && (m.pauses != pauses || m.status.SleepingSince != nil) {
			m.mu.Unlock() // it went to sleep during the ping
			continue
		}
		var notify func()
		var since time.Time
		switch {
		case err == nil && m.status.Unresponsive != nil:
			notify = m.setLocked(func(s *control.Status) { s.Unresponsive, s.Reason = nil, "" })
			m.o.Logf("the guest agent answers again")
		case err != nil && m.status.Unresponsive == nil:
			now := time.Now()
			since = now
			notify = m.setLocked(func(s *control.Status) {
				s.Unresponsive = &now
				s.Reason = fmt.Sprintf("%v: no answer to a ping within %s (%v)", ErrUnresponsive, m.o.PingTimeout, err)
			})
			m.o.Logf("%v: %v", ErrUnresponsive, err)
		case err != nil:
			since = *m.status.Unresponsive
		}
		m.mu.Unlock()
		if notify != nil {
			notify()
		}
		if err != nil && time.Since(since) >= m.o.WedgedAfter {
			cause := fmt.Errorf("%w for %s; killed it", ErrUnresponsive, time.Since(since).Round(time.Second))
			m.mu.Lock()
			if m.machine != mach {
				m.mu.Unlock()
				return
			}
			m.wedged, m.wedgedErr = mach, cause
			m.mu.Unlock()
			m.o.Logf("%v", cause)
			mach.Kill()
			return
		}
	}
}

// vmEvent is only used for logging; watch handles exits.
func (m *Manager) vmEvent(e vm.Event) {
	if e.Err != nil {
		m.o.Logf("vm %s: %v", e.State, e.Err)
	}
}

// watch waits for the machine to end and applies the restart policy when
// nobody asked it to stop.
func (m *Manager) watch(mach *vm.Machine) {
	<-mach.Done()
	err := mach.Err()
	m.mu.Lock()
	if m.machine != mach {
		m.mu.Unlock()
		return
	}
	m.machine = nil
	if m.wedged == mach {
		err, m.wedged, m.wedgedErr = m.wedgedErr, nil, nil
	}
	if err == nil { // requested stop: Stop sets the state
		m.mu.Unlock()
		return
	}
	now := time.Now()
	recent := m.crashes[:0]
	for _, t := range m.crashes {
		if now.Sub(t) < m.o.CrashWindow {
			recent = append(recent, t)
		}
	}
	m.crashes = append(recent, now)
	restarts := len(m.crashes)
	var delay time.Duration
	notify := m.setLocked(func(s *control.Status) {
		s.State, s.Pid, s.Unresponsive, s.SleepingSince = control.Error, 0, nil, nil
		s.Restarts = restarts
		if restarts > m.o.RestartLimit {
			until := now.Add(m.o.Cooldown)
			s.CooldownUntil = &until
			s.Reason = fmt.Sprintf("%v; crashed %d times, next automatic restart after %s", err, restarts, until.Format(time.Kitchen))
			delay = m.o.Cooldown
			m.crashes = nil
		} else {
			s.Reason = fmt.Sprintf("%v; restarting (%d of %d)", err, restarts, m.o.RestartLimit)
			delay = m.o.RestartDelay
		}
	})
	if !m.closed {
		m.timers = append(m.timers, m.restartAfter(delay, m.autoRestart))
	}
	m.mu.Unlock()
	notify()
	m.o.Logf("vm exited unexpectedly: %v", err)
}

func (m *Manager) autoRestart() {
	m.mu.Lock()
	if m.closed || m.status.State != control.Error {
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := m.start(ctx, true); err != nil {
		m.o.Logf("automatic restart: %v", err)
	}
}

// Agent returns the guest agent client of the running VM, for a guest
// operation about to be made: it counts as activity, and a sleeping VM
// is woken first (with its clock set), so callers never see the sleep.
func (m *Manager) Agent() (*agentproto.Client, error) {
	m.mu.Lock()
	if m.machine == nil {
		m.mu.Unlock()
		return nil, control.ErrNotRunning
	}
	m.lastUse = time.Now()
	c, sleeping := m.machine.Agent(), m.status.SleepingSince != nil
	m.mu.Unlock()
	if sleeping {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Resume(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ErrSleeping: the VM sleeps, and a background read doesn't wake it.
var ErrSleeping = agentproto.Class(agentproto.ErrUnavailable, "the sandbox VM is sleeping; the next call wakes it")

// Quiet returns the guest agent client for a background read (the
// window's usage figures, its long poll of the refusal log): it never
// wakes a sleeping VM (ErrSleeping) and its call's stream is not
// activity until done is called.
func (m *Manager) Quiet() (*agentproto.Client, func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.machine == nil {
		return nil, nil, control.ErrNotRunning
	}
	if m.status.SleepingSince != nil {
		return nil, nil, ErrSleeping
	}
	m.quiet.Add(1)
	var once sync.Once
	return m.machine.Agent(), func() { once.Do(func() { m.quiet.Add(-1) }) }, nil
}

// Awake returns the guest agent client only while the VM runs and is
// awake, without counting as activity: for housekeeping (the disk
// monitor) that must neither wake the VM nor keep it awake.
func (m *Manager) Awake() (*agentproto.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.machine == nil || m.status.SleepingSince != nil {
		return nil, control.ErrNotRunning
	}
	return m.machine.Agent(), nil
}

// Stop shuts the guest down gracefully, killing it after StopTimeout.
func (m *Manager) Stop(ctx context.Context) error {
	if err := m.claim("stop"); err != nil {
		return err
	}
	defer m.release()
	return m.stop(ctx)
}

func (m *Manager) stop(ctx context.Context) error {
	// A sleeping guest can't power off: wake it for its clean shutdown.
	if err := m.Resume(ctx); err != nil && !errors.Is(err, control.ErrNotRunning) {
		m.o.Logf("waking the VM to stop it: %v", err)
	}
	m.mu.Lock()
	mach := m.machine
	m.machine = nil
	for _, t := range m.timers {
		t.Stop()
	}
	m.timers = nil
	if mach == nil {
		var notify func()
		if m.status.State == control.Error || m.status.State == control.Running {
			notify = m.setLocked(func(s *control.Status) { s.State, s.Reason, s.Pid, s.CooldownUntil = control.Stopped, "", 0, nil })
		}
		m.mu.Unlock()
		if notify != nil {
			notify()
		}
		return nil
	}
	notify := m.setLocked(func(s *control.Status) { s.State = control.Stopping })
	m.mu.Unlock()
	notify()
	sctx, cancel := context.WithTimeout(ctx, m.o.StopTimeout)
	defer cancel()
	err := mach.Stop(sctx)
	m.set(func(s *control.Status) {
		s.State, s.Reason, s.Pid, s.CooldownUntil, s.Unresponsive, s.SleepingSince = control.Stopped, "", 0, nil, nil, nil
	})
	return err
}

// Reset removes the container (root disk, kernel, init filesystem) and
// provisions again. The workspace, output and agents' homes are kept; so is
// the download cache, which makes a reset work offline.
func (m *Manager) Reset(ctx context.Context) error {
	if err := m.claim("reset"); err != nil {
		return err
	}
	defer m.release()
	if err := m.stop(ctx); err != nil {
		return err
	}
	l := m.prov.Layout
	for _, p := range []string{l.StateFile(), l.RootDisk(), l.Initramfs(), l.Dir + "/kernel"} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
	}
	m.set(func(s *control.Status) { s.State, s.Reason = control.NotProvisioned, "" })
	return m.provision(ctx)
}

// Remove deletes every container asset, the download cache included. The
// workspace, output and agents' homes are kept.
func (m *Manager) Remove(ctx context.Context) error {
	if err := m.claim("remove"); err != nil {
		return err
	}
	defer m.release()
	if err := m.stop(ctx); err != nil {
		return err
	}
	if err := os.RemoveAll(m.o.Paths.ContainerDir()); err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	m.set(func(s *control.Status) { s.State, s.Reason = control.NotProvisioned, "" })
	return nil
}

// Close stops automatic restarts. With stopVM it also stops the VM (the
// app's Quit); without, the VM keeps running for the next app to adopt.
func (m *Manager) Close(ctx context.Context, stopVM bool) error {
	m.mu.Lock()
	m.closed = true
	for _, t := range m.timers {
		t.Stop()
	}
	m.timers = nil
	mach := m.machine
	if !stopVM {
		m.machine = nil
	}
	m.mu.Unlock()
	if stopVM {
		return m.Stop(ctx)
	}
	if mach != nil {
		// The next owner adopts a VM that answers.
		if err := m.resume(ctx, mach); err != nil {
			m.o.Logf("waking the VM before leaving it running: %v", err)
		}
		mach.Detach()
	}
	return nil
}

// loadSpec reads sandbox.json and turns it into a VM spec.
func (m *Manager) loadSpec() (vm.Spec, error) {
	cfg, err := config.LoadSandbox(m.o.Paths.SandboxJSON())
	if err != nil {
		return vm.Spec{}, err
	}
	return m.spec(cfg)
}

// spec turns the settings into a VM spec.
func (m *Manager) spec(cfg config.Sandbox) (vm.Spec, error) {
	p := m.o.Paths
	for _, d := range []string{p.Workspace(), p.Output(), p.Logs(), p.Run()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return vm.Spec{}, err
		}
	}
	l := m.prov.Layout
	return vm.Spec{
		Kernel:    l.Kernel(),
		Initramfs: l.Initramfs(),
		RootDisk:  l.RootDisk(),
		Shares: []vm.Share{
			{Tag: "workspace", HostPath: p.Workspace(), GuestPath: "/workspace"},
			{Tag: "output", HostPath: p.Output(), GuestPath: "/output"},
		},
		Network:    cfg.Network,
		CPUs:       cfg.CPUs,
		MemoryMiB:  cfg.MemoryGB * 1024,
		ConsoleLog: p.ConsoleLog(),
		RunDir:     p.Run(),
		Accel:      cfg.Accel,
		Machine:    cfg.Machine,
		// A distribution kernel with modules boots on q35 whatever the
		// default machine is (vm.Spec.ModularKernel says why).
		ModularKernel: l.ModularKernel(),
	}, nil
}

// Recover adopts a VM left running by an earlier process of the app, or
// stops it cleanly when it can't be adopted, so that no QEMU or virtiofsd
// is left orphaned. Call it once when the app starts.
func (m *Manager) Recover(ctx context.Context) error {
	att, ok := m.o.Driver.(vm.Attacher)
	if !ok {
		return nil
	}
	spec, err := m.loadSpec()
	if err != nil {
		return err
	}
	mach, err := vm.Attach(ctx, att, spec, vm.Options{OnEvent: m.vmEvent})
	if errors.Is(err, vm.ErrNoVM) {
		return nil
	}
	if err != nil {
		m.set(func(s *control.Status) { s.State, s.Reason, s.Pid = control.Stopped, err.Error(), 0 })
		return err
	}
	m.adopt(mach)
	m.o.Logf("adopted the VM left running by an earlier run (pid %d)", mach.Info().Pid)
	return nil
}
