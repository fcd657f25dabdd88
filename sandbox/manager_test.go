package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/vm"
)

// These tests check the manager's policies with a stand-in hypervisor.
// The real VM lifecycle is covered by the e2e package.

type fakeProc struct {
	done   chan struct{}
	once   sync.Once
	err    error
	wedged atomic.Bool // the agent stops answering stat (the watchdog's ping)
	// For the sleep tests: processes agents have (usage), how often usage
	// and hello were asked, whether the hypervisor paused the guest.
	agentProcs, usages, hellos atomic.Int32
	paused                     atomic.Bool
}

func (p *fakeProc) DialAgent(ctx context.Context) (net.Conn, error) {
	host, guest := net.Pipe()
	go func() {
		peer, _ := agentproto.NewServerPeer(guest)
		m := agentproto.NewMux()
		m.Handle(agentproto.OpNetLog, func(ctx context.Context, c *agentproto.Call) error {
			<-ctx.Done() // a long poll that never ends by itself
			return ctx.Err()
		})
		m.Handle(agentproto.OpUsage, agentproto.Unary(func(context.Context, *agentproto.UsageRequest) (*agentproto.UsageResponse, error) {
			p.usages.Add(1)
			return &agentproto.UsageResponse{Users: []agentproto.UserUsage{{User: "a", Processes: int(p.agentProcs.Load())}}}, nil
		}))
		m.Handle(agentproto.OpHello, agentproto.Unary(func(context.Context, *agentproto.HelloRequest) (*agentproto.HelloResponse, error) {
			p.hellos.Add(1)
			return &agentproto.HelloResponse{Major: agentproto.VersionMajor, Distro: "fake"}, nil
		}))
		m.Handle(agentproto.OpShutdown, agentproto.Unary(func(context.Context, *agentproto.ShutdownRequest) (*agentproto.Empty, error) {
			go p.exit(nil)
			return &agentproto.Empty{}, nil
		}))
		m.Handle(agentproto.OpStat, func(ctx context.Context, c *agentproto.Call) error {
			if p.wedged.Load() {
				select {
				case <-ctx.Done():
				case <-p.done:
				}
				return ctx.Err()
			}
			return c.Respond(agentproto.FileInfo{Name: "/"})
		})
		go func() { <-p.done; peer.Close(nil) }()
		peer.Serve(context.Background(), m)
	}()
	return host, nil
}
func (p *fakeProc) exit(err error) {
	p.once.Do(func() { p.err = err; close(p.done) })
}
func (p *fakeProc) RequestStop() error    { p.exit(nil); return nil }
func (p *fakeProc) Kill() error           { p.exit(errors.New("killed")); return nil }
func (p *fakeProc) Done() <-chan struct{} { return p.done }
func (p *fakeProc) Err() error            { return p.err }
func (p *fakeProc) Info() vm.ProcessInfo {
	return vm.ProcessInfo{Driver: "fake", Accel: "tcg", BootTimeout: 5 * time.Second}
}

// pausableProc is a fakeProc whose hypervisor can pause (vm.Pauser).
type pausableProc struct{ *fakeProc }

func (p pausableProc) Pause(context.Context) error  { p.paused.Store(true); return nil }
func (p pausableProc) Resume(context.Context) error { p.paused.Store(false); return nil }

type fakeDriver struct {
	pausable bool
	starts   atomic.Int32
	gate     chan struct{} // when set, Start waits for it to close
	mu       sync.Mutex
	procs    []*fakeProc
}

func (d *fakeDriver) Name() string { return "fake" }
func (d *fakeDriver) Start(ctx context.Context, spec vm.Spec) (vm.Process, error) {
	d.starts.Add(1)
	if d.gate != nil {
		<-d.gate
	}
	p := &fakeProc{done: make(chan struct{})}
	d.mu.Lock()
	d.procs = append(d.procs, p)
	d.mu.Unlock()
	if d.pausable {
		return pausableProc{p}, nil
	}
	return p, nil
}
func (d *fakeDriver) last() *fakeProc {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.procs[len(d.procs)-1]
}

var fakeAgent = []byte("agent binary")

// provisioned lays out files as a finished provision would.
func provisioned(t *testing.T) config.Paths {
	t.Helper()
	p := config.Paths{Root: t.TempDir()}
	l := provision.Layout{Dir: p.ContainerDir()}
	os.MkdirAll(filepath.Dir(l.Kernel()), 0o755)
	for _, f := range []string{l.Kernel(), l.Initramfs(), l.RootDisk()} {
		os.WriteFile(f, []byte("x"), 0o644)
	}
	sum := sha256.Sum256(fakeAgent)
	b, _ := json.Marshal(provision.State{Arch: "amd64", Distro: "fake", AgentSHA256: hex.EncodeToString(sum[:])})
	os.WriteFile(l.StateFile(), b, 0o644)
	return p
}

func newManager(t *testing.T, d *fakeDriver, o Options) *Manager {
	o.Paths = provisioned(t)
	o.Driver = d
	o.Agent = func(string) ([]byte, error) { return fakeAgent, nil }
	m := New(o)
	t.Cleanup(func() { m.Close(context.Background(), true) })
	return m
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, what, 10*time.Second, 10*time.Millisecond, cond)
}

// recordRestarts makes m record the delay of every automatic restart it
// schedules (and still schedule it).
func recordRestarts(m *Manager) (delays func() []time.Duration) {
	var mu sync.Mutex
	var ds []time.Duration
	m.restartAfter = func(d time.Duration, f func()) *time.Timer {
		mu.Lock()
		ds = append(ds, d)
		mu.Unlock()
		return time.AfterFunc(d, f)
	}
	return func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(ds)
	}
}

func TestConcurrentStartsShareOneAttempt(t *testing.T) {
	d := &fakeDriver{gate: make(chan struct{})}
	m := newManager(t, d, Options{})
	if got := m.Status().State; got != control.Stopped {
		t.Fatalf("initial state %s, want stopped", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Start(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	// The boot is held until every caller had the chance to start another:
	// each that did would count a start.
	waitFor(t, "the first boot", func() bool { return d.starts.Load() >= 1 })
	close(d.gate)
	wg.Wait()
	if n := d.starts.Load(); n != 1 {
		t.Fatalf("%d boots for 8 concurrent starts, want 1", n)
	}
	if st := m.Status(); st.State != control.Running || st.Distro != "fake" {
		t.Fatalf("status %+v", st)
	}
}

func TestRestartPolicyThenCooldown(t *testing.T) {
	d := &fakeDriver{}
	m := newManager(t, d, Options{RestartLimit: 2, RestartDelay: 10 * time.Millisecond, Cooldown: time.Hour})
	restarts := recordRestarts(m)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Two crashes are restarted automatically.
	for i := 1; i <= 2; i++ {
		d.last().exit(errors.New("qemu exited: signal: killed"))
		waitFor(t, "automatic restart", func() bool { return d.starts.Load() == int32(i+1) && m.Status().State == control.Running })
	}
	// The third within the window pauses restarts.
	d.last().exit(errors.New("qemu exited: signal: killed"))
	waitFor(t, "cooldown", func() bool { return m.Status().CooldownUntil != nil })
	st := m.Status()
	if st.State != control.Error || st.Restarts != 3 {
		t.Fatalf("after 3 crashes: %+v", st)
	}
	// The third crash scheduled its restart at the end of the cooldown,
	// and nothing sooner: the restart policy runs before the status shows
	// the cooldown.
	want := []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, time.Hour}
	if got := restarts(); !slices.Equal(got, want) {
		t.Fatalf("restarts scheduled after %v, want %v (none during cooldown)", got, want)
	}
	if n := d.starts.Load(); n != 3 {
		t.Fatalf("%d boots, want 3 (no restart during cooldown)", n)
	}
	// A person pressing Start is not held back by the cooldown.
	if err := m.Start(context.Background()); err != nil {
		t.Fatalf("manual start during cooldown: %v", err)
	}
}

func TestStopIsNotACrash(t *testing.T) {
	d := &fakeDriver{}
	m := newManager(t, d, Options{RestartDelay: 10 * time.Millisecond})
	restarts := recordRestarts(m)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The VM has exited; once its watcher has seen that, any restart
	// would have been scheduled.
	m.watching.Wait()
	if got := restarts(); len(got) != 0 {
		t.Fatalf("a requested stop scheduled restarts after %v", got)
	}
	if st := m.Status(); st.State != control.Stopped || d.starts.Load() != 1 {
		t.Fatalf("after stop: %+v, %d boots", st, d.starts.Load())
	}
	if _, err := m.Agent(); !errors.Is(err, control.ErrNotRunning) {
		t.Fatalf("agent after stop: %v", err)
	}
}

func TestResetAndRemoveKeepWorkspace(t *testing.T) {
	d := &fakeDriver{}
	m := newManager(t, d, Options{
		Manifest: func(context.Context, config.Sandbox) (*provision.Manifest, error) {
			return nil, errors.New("offline")
		},
	})
	p := m.Paths()
	os.MkdirAll(filepath.Join(p.Workspace(), "agents", "bob"), 0o755)
	os.WriteFile(filepath.Join(p.Workspace(), "agents", "bob", "work.txt"), []byte("keep me"), 0o644)
	os.MkdirAll(p.Output(), 0o755)
	os.WriteFile(filepath.Join(p.Output(), "report.txt"), []byte("keep me too"), 0o644)
	// Reset fails at provisioning (offline), but the container is gone
	// and the workspace kept.
	if err := m.Reset(context.Background()); err == nil {
		t.Fatal("reset provisioned while offline")
	}
	if _, err := os.Stat(provision.Layout{Dir: p.ContainerDir()}.RootDisk()); !os.IsNotExist(err) {
		t.Fatalf("root disk survived reset: %v", err)
	}
	if st := m.Status(); st.State != control.NotProvisioned {
		t.Fatalf("state after failed reset: %s", st.State)
	}
	if err := m.Remove(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.ContainerDir()); !os.IsNotExist(err) {
		t.Fatalf("container survived remove: %v", err)
	}
	for _, f := range []string{filepath.Join(p.Workspace(), "agents", "bob", "work.txt"), filepath.Join(p.Output(), "report.txt")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s lost: %v", f, err)
		}
	}
}

// A guest that stops answering is reported unresponsive within a ping
// timeout, recovers when it answers again, and is killed and restarted
// under the restart policy when it stays wedged.
func TestWatchdog(t *testing.T) {
	d := &fakeDriver{}
	m := newManager(t, d, Options{PingInterval: 20 * time.Millisecond, PingTimeout: 50 * time.Millisecond, WedgedAfter: time.Hour, RestartDelay: time.Millisecond})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := d.last()
	p.wedged.Store(true)
	waitFor(t, "unresponsive", func() bool { return m.Status().Unresponsive != nil })
	if st := m.Status(); st.State != control.Running || !strings.Contains(st.Reason, ErrUnresponsive.Error()) {
		t.Fatalf("status %+v", st)
	}
	p.wedged.Store(false)
	waitFor(t, "answering again", func() bool { return m.Status().Unresponsive == nil })

	d = &fakeDriver{}
	m = newManager(t, d, Options{PingInterval: 20 * time.Millisecond, PingTimeout: 50 * time.Millisecond, WedgedAfter: 100 * time.Millisecond, RestartDelay: time.Millisecond})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.last().wedged.Store(true)
	waitFor(t, "restart after wedging", func() bool { return d.starts.Load() == 2 && m.Status().State == control.Running })
	if st := m.Status(); st.Restarts != 1 || st.Unresponsive != nil {
		t.Fatalf("after the restart: %+v", st)
	}
}
