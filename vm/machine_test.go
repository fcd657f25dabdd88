package vm

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// fakeProcess stands in for a hypervisor; its "guest" is an agentproto
// server on the other end of a pipe, or nothing at all when mute.
type fakeProcess struct {
	// waiting, when set, is closed once the guest holds a Wait call.
	waiting chan struct{}
	accel   string
	mute    bool
	done    chan struct{}
	once    sync.Once
	err     error
}

func (p *fakeProcess) DialAgent(ctx context.Context) (net.Conn, error) {
	host, guest := net.Pipe()
	if p.mute {
		return host, nil // nobody answers: a KVM guest that never boots
	}
	go func() {
		peer, err := agentproto.NewServerPeer(guest)
		if err != nil {
			return
		}
		m := agentproto.NewMux()
		m.Handle(agentproto.OpHello, agentproto.Unary(func(context.Context, *agentproto.HelloRequest) (*agentproto.HelloResponse, error) {
			return &agentproto.HelloResponse{Major: agentproto.VersionMajor, Distro: "fake"}, nil
		}))
		m.Handle(agentproto.OpWait, agentproto.Unary(func(ctx context.Context, _ *agentproto.WaitRequest) (*agentproto.ExitStatus, error) {
			if p.waiting != nil {
				close(p.waiting)
			}
			<-ctx.Done() // a call that never finishes on its own
			return nil, ctx.Err()
		}))
		go func() { <-p.done; peer.Close(nil) }()
		peer.Serve(context.Background(), m)
	}()
	return host, nil
}

func (p *fakeProcess) RequestStop() error { return p.Kill() }
func (p *fakeProcess) Kill() error {
	p.once.Do(func() { p.err = errors.New("qemu exited: signal: killed"); close(p.done) })
	return nil
}
func (p *fakeProcess) Done() <-chan struct{} { return p.done }
func (p *fakeProcess) Err() error            { return p.err }
func (p *fakeProcess) Info() ProcessInfo {
	return ProcessInfo{Driver: "fake", Accel: p.accel, BootTimeout: 300 * time.Millisecond}
}

type fakeDriver struct {
	mu        sync.Mutex
	attempts  []string
	kvmBroken bool
	// abort makes a KVM attempt die at once (QEMU aborting under KVM)
	// instead of hanging with a mute guest.
	abort   bool
	cause   error         // what Fallback was told
	waiting chan struct{} // handed to the processes it starts
}

func (d *fakeDriver) Name() string { return "fake" }
func (d *fakeDriver) Start(ctx context.Context, spec Spec) (Process, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	accel := AccelKVM
	if d.kvmBroken {
		accel = AccelTCG
	}
	d.attempts = append(d.attempts, accel)
	p := &fakeProcess{accel: accel, mute: accel == AccelKVM, done: make(chan struct{}), waiting: d.waiting}
	if accel == AccelKVM && d.abort {
		p.once.Do(func() { p.err = errors.New("qemu exited: signal: aborted"); close(p.done) })
	}
	return p, nil
}
func (d *fakeDriver) Fallback(failed Process, cause error) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if failed.Info().Accel != AccelKVM {
		return false
	}
	d.kvmBroken, d.cause = true, cause
	return true
}

func validSpec() Spec {
	return Spec{Kernel: "k", Initramfs: "i", RootDisk: "r", RunDir: "d", CPUs: 1, MemoryMiB: 512, Network: NetworkNone}
}

func TestBootFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		abort bool
		cause error
	}{
		{"guest never answers", false, ErrBootTimeout},
		{"hypervisor aborts", true, ErrVMDied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDriver{abort: tc.abort}
			var mu sync.Mutex
			var events []Event
			m, err := Boot(context.Background(), d, validSpec(), Options{OnEvent: func(e Event) {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Kill()
			if got := m.Info().Accel; got != AccelTCG {
				t.Fatalf("booted on %s, want the tcg fallback", got)
			}
			if len(d.attempts) != 2 || d.attempts[0] != AccelKVM {
				t.Fatalf("attempts = %v, want [kvm tcg]", d.attempts)
			}
			if !errors.Is(d.cause, tc.cause) {
				t.Fatalf("Fallback told %v, want %v", d.cause, tc.cause)
			}
			if m.Guest().Distro != "fake" {
				t.Fatalf("handshake info not kept: %+v", m.Guest())
			}
			mu.Lock()
			defer mu.Unlock()
			// starting, starting again (with the failed attempt's cause), running.
			if len(events) != 3 || events[0].State != StateStarting || events[1].State != StateStarting ||
				!errors.Is(events[1].Err, tc.cause) || events[2].State != StateRunning {
				t.Fatalf("events = %+v", events)
			}
		})
	}
}

func TestBootCancelledDoesNotFallBack(t *testing.T) {
	d := &fakeDriver{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Boot(ctx, d, validSpec(), Options{}); err == nil {
		t.Fatal("a cancelled boot succeeded")
	}
	if d.kvmBroken {
		t.Fatal("a cancelled boot marked KVM broken")
	}
}

func TestBootTimeoutWithoutFallback(t *testing.T) {
	d := &fakeDriver{}
	// A driver without Fallback: wrap to hide the method.
	_, err := Boot(context.Background(), struct{ Driver }{d}, validSpec(), Options{})
	if !errors.Is(err, ErrBootTimeout) {
		t.Fatalf("err = %v, want ErrBootTimeout", err)
	}
}

func TestInFlightCallsFailWhenVMDies(t *testing.T) {
	waiting := make(chan struct{})
	d := &fakeDriver{kvmBroken: true, waiting: waiting}
	events := make(chan Event, 8)
	m, err := Boot(context.Background(), d, validSpec(), Options{OnEvent: func(e Event) { events <- e }})
	if err != nil {
		t.Fatal(err)
	}
	callErr := make(chan error, 1)
	go func() {
		_, err := m.Agent().Wait(context.Background(), agentproto.WaitRequest{Pid: 42, TimeoutMillis: 60_000})
		callErr <- err
	}()
	<-waiting     // the call is in flight in the guest
	m.proc.Kill() // the VM dies behind the machine's back
	select {
	case err := <-callErr:
		if !errors.Is(err, ErrVMDied) || !errors.Is(err, agentproto.ErrSessionEnded) {
			t.Fatalf("in-flight call: %v, want ErrVMDied and ErrSessionEnded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("in-flight call still hanging after the VM died")
	}
	<-m.Done()
	var last Event
	for len(events) > 0 {
		last = <-events
	}
	if last.State != StateError || !errors.Is(last.Err, ErrVMDied) {
		t.Fatalf("last event = %+v, want error with ErrVMDied", last)
	}
	// Later calls fail at once, with the same reason.
	if _, err := m.Agent().Stat(context.Background(), agentproto.PathRequest{Path: "/"}); !errors.Is(err, ErrVMDied) {
		t.Fatalf("call after death: %v", err)
	}
}
