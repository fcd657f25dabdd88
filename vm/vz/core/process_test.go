package core

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
	"github.com/osaurus/osaurus-sandbox/vm"
)

var errNotListening = errors.New("connection reset by peer (NSPOSIXErrorDomain 54)")

// fakeVM stands in for the framework: a VM whose guest agent starts
// listening after a few connection attempts and powers off on request.
type fakeVM struct {
	proc       *Process
	refusals   int32 // Connect attempts to fail before the guest listens
	connects   atomic.Int32
	stops      atomic.Int32
	stopErr    error
	block      chan struct{} // when set, Connect waits for it
	powerOffMu sync.Mutex
}

func newFakeVM(refusals int32) *fakeVM {
	f := &fakeVM{refusals: refusals}
	f.proc = NewProcess(Hooks{Connect: f.connect, RequestStop: f.requestStop, Stop: f.stop}, "/data/console.log")
	// What the framework reports while Start runs.
	f.proc.Observe(StateStarting)
	f.proc.Observe(StateRunning)
	return f
}

func (f *fakeVM) connect() (net.Conn, error) {
	n := f.connects.Add(1)
	if f.block != nil {
		<-f.block
	}
	if n <= f.refusals {
		return nil, errNotListening
	}
	host, guest := net.Pipe()
	go f.serveAgent(guest)
	return host, nil
}

func (f *fakeVM) serveAgent(conn net.Conn) {
	peer, err := agentproto.NewServerPeer(conn)
	if err != nil {
		return
	}
	m := agentproto.NewMux()
	m.Handle(agentproto.OpHello, agentproto.Unary(func(context.Context, *agentproto.HelloRequest) (*agentproto.HelloResponse, error) {
		return &agentproto.HelloResponse{Major: agentproto.VersionMajor, Distro: "fake", Transport: "vsock"}, nil
	}))
	m.Handle(agentproto.OpShutdown, agentproto.Unary(func(context.Context, *agentproto.ShutdownRequest) (*agentproto.Empty, error) {
		go f.powerOff()
		return &agentproto.Empty{}, nil
	}))
	go func() { <-f.proc.Done(); peer.Close(nil) }()
	peer.Serve(context.Background(), m)
}

// powerOff is the guest shutting down: the framework reports the states.
func (f *fakeVM) powerOff() {
	f.powerOffMu.Lock()
	defer f.powerOffMu.Unlock()
	f.proc.Observe(StateStopping)
	f.proc.Observe(StateStopped)
}

func (f *fakeVM) requestStop() error { go f.powerOff(); return nil }

func (f *fakeVM) stop() error {
	f.stops.Add(1)
	if f.stopErr != nil {
		return f.stopErr
	}
	go f.powerOff()
	return nil
}

type fakeDriver struct{ vm *fakeVM }

func (fakeDriver) Name() string { return "vz" }
func (d fakeDriver) Start(context.Context, vm.Spec) (vm.Process, error) {
	return d.vm.proc, nil
}

func bootSpec() vm.Spec {
	return vm.Spec{Kernel: "k", Initramfs: "i", RootDisk: "r", RunDir: "d", CPUs: 2, MemoryMiB: 1024, Network: vm.NetworkNone}
}

// The whole lifecycle as vm.Boot drives it: dial until the guest listens,
// handshake, graceful stop through the agent, a clean exit.
func TestBootAndStopThroughVsock(t *testing.T) {
	f := newFakeVM(3)
	var mu sync.Mutex
	var states []vm.State
	m, err := vm.Boot(context.Background(), fakeDriver{f}, bootSpec(), vm.Options{OnEvent: func(e vm.Event) {
		mu.Lock()
		defer mu.Unlock()
		states = append(states, e.State)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.connects.Load(); got != 4 {
		t.Errorf("connect attempts = %d, want 3 refusals then success", got)
	}
	if info := m.Info(); info.Driver != "vz" || info.Transport != "vsock" || info.Accel != "vz" || info.BootTimeout != BootTimeout || info.Pid != 0 {
		t.Errorf("info = %+v", info)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if f.stops.Load() != 0 {
		t.Error("a graceful stop used the hard stop")
	}
	if err := f.proc.Err(); err != nil {
		t.Errorf("clean power-off: Err = %v, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []vm.State{vm.StateStarting, vm.StateRunning, vm.StateStopping, vm.StateStopped}
	if len(states) != len(want) {
		t.Fatalf("states = %v, want %v", states, want)
	}
	for i := range want {
		if states[i] != want[i] {
			t.Fatalf("states = %v, want %v", states, want)
		}
	}
}

func TestObserve(t *testing.T) {
	for _, tc := range []struct {
		name    string
		states  []State
		kill    bool
		done    bool
		errWant string // "" for nil
	}{
		{name: "initial stopped state is not an exit", states: []State{StateStopped}, done: false},
		{name: "starting and running", states: []State{StateStarting, StateRunning}, done: false},
		{name: "guest powered off", states: []State{StateStarting, StateRunning, StateStopping, StateStopped}, done: true},
		{name: "killed", states: []State{StateRunning, StateStopped}, kill: true, done: true, errWant: ErrKilled.Error()},
		{name: "framework error", states: []State{StateRunning, StateError}, done: true, errWant: "/data/console.log"},
		{name: "error before running", states: []State{StateStarting, StateError}, done: true, errWant: "stopped with an error"},
		{name: "pausing has no meaning", states: []State{StateRunning, StateOther}, done: false},
		{name: "later states ignored", states: []State{StateRunning, StateError, StateStopped}, done: true, errWant: "stopped with an error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewProcess(Hooks{Stop: func() error { return nil }}, "/data/console.log")
			if tc.kill {
				if err := p.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			var last bool
			for _, s := range tc.states {
				last = p.Observe(s)
			}
			if last != tc.done {
				t.Errorf("Observe reported done = %v, want %v", last, tc.done)
			}
			select {
			case <-p.Done():
				if !tc.done {
					t.Error("Done closed")
				}
			default:
				if tc.done {
					t.Error("Done not closed")
				}
			}
			err := p.Err()
			switch {
			case tc.errWant == "" && err != nil:
				t.Errorf("Err = %v, want nil", err)
			case tc.errWant != "" && (err == nil || !strings.Contains(err.Error(), tc.errWant)):
				t.Errorf("Err = %v, want one containing %q", err, tc.errWant)
			}
		})
	}
}

func TestDialAgent(t *testing.T) {
	t.Run("guest not listening", func(t *testing.T) {
		f := newFakeVM(1)
		_, err := f.proc.DialAgent(context.Background())
		if !errors.Is(err, errNotListening) || !strings.Contains(err.Error(), "vsock port 1024") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("context ends while the framework has not answered", func(t *testing.T) {
		f := newFakeVM(0)
		f.block = make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := f.proc.DialAgent(ctx)
			errc <- err
		}()
		testwait.Eventually(t, "the dial to reach the framework", 10*time.Second, time.Millisecond, func() bool { return f.connects.Load() > 0 })
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		close(f.block) // the late connection is closed, not leaked
	})
	t.Run("VM stops while dialing", func(t *testing.T) {
		f := newFakeVM(0)
		f.block = make(chan struct{})
		defer close(f.block)
		errc := make(chan error, 1)
		go func() {
			_, err := f.proc.DialAgent(context.Background())
			errc <- err
		}()
		testwait.Eventually(t, "the dial to reach the framework", 10*time.Second, time.Millisecond, func() bool { return f.connects.Load() > 0 })
		f.proc.Observe(StateError)
		if err := <-errc; !errors.Is(err, vm.ErrVMDied) {
			t.Errorf("err = %v, want vm.ErrVMDied", err)
		}
	})
	t.Run("after the VM stopped", func(t *testing.T) {
		f := newFakeVM(0)
		f.powerOff()
		if _, err := f.proc.DialAgent(context.Background()); !errors.Is(err, vm.ErrVMDied) {
			t.Errorf("err = %v, want vm.ErrVMDied", err)
		}
		if n := f.connects.Load(); n != 0 {
			t.Errorf("dialed a stopped VM %d times", n)
		}
	})
}

func TestKill(t *testing.T) {
	t.Run("running", func(t *testing.T) {
		f := newFakeVM(0)
		if err := f.proc.Kill(); err != nil {
			t.Fatal(err)
		}
		<-f.proc.Done()
		if !errors.Is(f.proc.Err(), ErrKilled) {
			t.Errorf("Err = %v, want ErrKilled", f.proc.Err())
		}
	})
	t.Run("already stopped", func(t *testing.T) {
		f := newFakeVM(0)
		f.powerOff()
		if err := f.proc.Kill(); err != nil || f.stops.Load() != 0 {
			t.Errorf("Kill = %v after %d stops, want nil without stopping", err, f.stops.Load())
		}
		if err := f.proc.Err(); err != nil {
			t.Errorf("a clean power-off became %v after Kill", err)
		}
	})
	t.Run("framework refuses", func(t *testing.T) {
		f := newFakeVM(0)
		f.stopErr = errors.New("invalid state transition")
		if err := f.proc.Kill(); err == nil || !strings.Contains(err.Error(), "invalid state transition") {
			t.Errorf("Kill = %v", err)
		}
	})
}

func TestRequestStop(t *testing.T) {
	f := newFakeVM(0)
	if err := f.proc.RequestStop(); err != nil {
		t.Fatal(err)
	}
	<-f.proc.Done()
	if err := f.proc.Err(); err != nil {
		t.Errorf("Err = %v after a requested stop, want nil", err)
	}
	if err := f.proc.RequestStop(); err != nil {
		t.Errorf("RequestStop on a stopped VM = %v, want nil", err)
	}
	refused := NewProcess(Hooks{RequestStop: func() error { return errors.New("refused") }}, "")
	refused.Observe(StateRunning)
	if err := refused.RequestStop(); err == nil || !strings.Contains(err.Error(), "request stop: refused") {
		t.Errorf("RequestStop = %v", err)
	}
}

// Pause and Resume reach the framework's calls; without them, or once the
// VM is gone, they say why.
func TestPauseResume(t *testing.T) {
	var calls []string
	p := NewProcess(Hooks{
		Stop:   func() error { return nil },
		Pause:  func() error { calls = append(calls, "pause"); return nil },
		Resume: func() error { calls = append(calls, "resume"); return nil },
	}, "")
	ctx := context.Background()
	if err := p.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(calls, ","); got != "pause,resume" {
		t.Fatalf("calls %s", got)
	}
	if err := NewProcess(Hooks{}, "").Pause(ctx); !errors.Is(err, vm.ErrUnsupported) {
		t.Errorf("no pause hook: %v, want ErrUnsupported", err)
	}
	p.Observe(StateRunning)
	p.Observe(StateStopped)
	if err := p.Resume(ctx); !errors.Is(err, vm.ErrVMDied) {
		t.Errorf("resume of a stopped VM: %v, want ErrVMDied", err)
	}
}
