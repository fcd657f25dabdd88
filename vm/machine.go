package vm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// State is a machine's lifecycle state as the driver layer sees it.
type State string

const (
	StateStarting State = "starting"
	StateRunning  State = "running"
	StateStopping State = "stopping"
	StateStopped  State = "stopped"
	StateError    State = "error" // the VM died on its own; Event.Err says why
)

// Event is a state change.
type Event struct {
	State State
	Err   error
	At    time.Time
}

// Options tune Boot.
type Options struct {
	// OnEvent receives state changes, in order, from one goroutine at a
	// time. It must not block for long.
	OnEvent func(Event)
	// BootTimeout overrides the driver's boot timeout when non-zero.
	BootTimeout time.Duration
}

// Machine is a booted VM with a live agent session.
type Machine struct {
	proc  Process
	agent *agentproto.Client
	info  ProcessInfo
	emit  func(Event)

	mu       sync.Mutex
	stopping bool
	detached bool
	done     chan struct{} // closed after the final event was emitted
}

// Boot starts the VM and waits for the guest agent's handshake.
func Boot(ctx context.Context, d Driver, spec Spec, opts Options) (*Machine, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	emit := func(e Event) {
		if opts.OnEvent != nil {
			e.At = time.Now()
			opts.OnEvent(e)
		}
	}
	emit(Event{State: StateStarting})
	for {
		proc, err := d.Start(ctx, spec)
		if err != nil {
			emit(Event{State: StateError, Err: err})
			return nil, err
		}
		timeout := proc.Info().BootTimeout
		if opts.BootTimeout > 0 {
			timeout = opts.BootTimeout
		}
		client, err := connect(ctx, proc, timeout)
		if err == nil {
			return newMachine(proc, client, opts), nil
		}
		proc.Kill()
		<-proc.Done()
		// Any failure to reach the agent may be the accelerator's fault
		// (QEMU aborting under KVM, a KVM guest that hangs), except a
		// cancelled start or an agent that answered in the wrong protocol.
		if ctx.Err() == nil && !errors.Is(err, agentproto.ErrVersion) {
			if fb, ok := d.(Fallbacker); ok && fb.Fallback(proc, err) {
				emit(Event{State: StateStarting, Err: fmt.Errorf("%s attempt failed, trying again: %w", proc.Info().Accel, err)})
				continue
			}
		}
		emit(Event{State: StateError, Err: err})
		return nil, err
	}
}

// Attach adopts a VM left running by an earlier process. When its agent
// does not answer, the VM is killed rather than left orphaned, and the error
// says so.
func Attach(ctx context.Context, d Attacher, spec Spec, opts Options) (*Machine, error) {
	proc, err := d.Attach(ctx, spec)
	if err != nil {
		return nil, err
	}
	timeout := proc.Info().BootTimeout
	if opts.BootTimeout > 0 {
		timeout = opts.BootTimeout
	}
	client, err := connect(ctx, proc, timeout)
	if err != nil {
		proc.Kill()
		<-proc.Done()
		return nil, fmt.Errorf("adopting the running VM failed, so it was stopped: %w", err)
	}
	return newMachine(proc, client, opts), nil
}

// connect dials the agent and completes the handshake within timeout.
func connect(ctx context.Context, proc Process, timeout time.Duration) (*agentproto.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The hypervisor dying ends the attempt at once, with its reason.
	go func() {
		select {
		case <-proc.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	fail := func(err error) (*agentproto.Client, error) {
		select {
		case <-proc.Done():
			return nil, fmt.Errorf("%w before the agent answered: %v", ErrVMDied, proc.Err())
		default:
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w (%s, %s): %v", ErrBootTimeout, timeout, proc.Info().Accel, err)
		}
		return nil, err
	}
	for {
		conn, err := proc.DialAgent(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return fail(err)
			}
			select {
			case <-time.After(50 * time.Millisecond):
				continue
			case <-ctx.Done():
				return fail(err)
			}
		}
		client, err := handshake(ctx, conn)
		if err == nil {
			return client, nil
		}
		if ctx.Err() != nil || errors.Is(err, agentproto.ErrVersion) {
			return fail(err)
		}
		// The channel closed under us (guest agent restarting): dial again.
		time.Sleep(50 * time.Millisecond)
	}
}

func handshake(ctx context.Context, conn net.Conn) (*agentproto.Client, error) {
	peer, err := agentproto.NewClientPeer(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	client, err := agentproto.Handshake(ctx, peer)
	if err != nil {
		peer.Close(err)
		return nil, err
	}
	return client, nil
}

func newMachine(proc Process, client *agentproto.Client, opts Options) *Machine {
	var emitMu sync.Mutex
	emit := func(e Event) {
		if opts.OnEvent != nil {
			emitMu.Lock()
			defer emitMu.Unlock()
			e.At = time.Now()
			opts.OnEvent(e)
		}
	}
	m := &Machine{
		proc:  proc,
		agent: client,
		info:  proc.Info(),
		emit:  emit,
		done:  make(chan struct{}),
	}
	// The driver reports the hypervisor's exit within moments of the
	// channel breaking; let failing calls wait for that reason.
	client.Peer.SetCauseGrace(5 * time.Second)
	emit(Event{State: StateRunning})
	go func() {
		<-proc.Done()
		m.mu.Lock()
		requested, detached := m.stopping, m.detached
		m.mu.Unlock()
		perr := proc.Err()
		if detached {
			close(m.done)
			return
		}
		if requested {
			client.Peer.Close(fmt.Errorf("%w: stopped on request", ErrVMDied))
			emit(Event{State: StateStopped})
		} else {
			if perr == nil {
				perr = errors.New("the guest powered off by itself")
			}
			client.Peer.Close(fmt.Errorf("%w: %w", ErrVMDied, perr))
			emit(Event{State: StateError, Err: fmt.Errorf("%w: %w", ErrVMDied, perr)})
		}
		close(m.done)
	}()
	return m
}

// Agent is the guest agent client. Calls fail with ErrVMDied (and
// agentproto.ErrSessionEnded) once the VM is gone.
func (m *Machine) Agent() *agentproto.Client { return m.agent }

// Info describes the hypervisor side.
func (m *Machine) Info() ProcessInfo { return m.info }

// Guest describes the guest, as its agent reported at handshake.
func (m *Machine) Guest() agentproto.HelloResponse { return m.agent.Info }

// Done is closed once the VM is gone and its final event emitted.
func (m *Machine) Done() <-chan struct{} { return m.done }

// Err says why the VM ended (nil while running or after a requested stop).
func (m *Machine) Err() error {
	select {
	case <-m.done:
	default:
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrVMDied, m.proc.Err())
}

// Stop shuts the guest down gracefully: the agent syncs and powers off.
// If that has not happened when ctx ends (give it a deadline), the VM is
// killed. Stop returns once the VM is gone.
func (m *Machine) Stop(ctx context.Context) error {
	m.mu.Lock()
	first := !m.stopping
	m.stopping = true
	m.mu.Unlock()
	select {
	case <-m.done:
		return nil
	default:
	}
	if first {
		m.emit(Event{State: StateStopping})
	}
	// Ask the agent first; it knows how to flush the root disk. Fall back
	// to the hypervisor's request, then to a hard stop.
	if err := m.agent.Shutdown(ctx, agentproto.ShutdownRequest{}); err != nil {
		m.proc.RequestStop()
	}
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
	}
	if err := m.proc.Kill(); err != nil {
		return fmt.Errorf("stop VM: %w", err)
	}
	<-m.done
	return nil
}

// Pause stops the guest's vCPUs in place (vm.Pauser); ErrUnsupported
// when the hypervisor can't. Calls to the agent wait until Resume.
func (m *Machine) Pause(ctx context.Context) error {
	p, ok := m.proc.(Pauser)
	if !ok {
		return fmt.Errorf("%w: the %s driver cannot pause a VM", ErrUnsupported, m.info.Driver)
	}
	return p.Pause(ctx)
}

// Resume lets a paused guest run again.
func (m *Machine) Resume(ctx context.Context) error {
	p, ok := m.proc.(Pauser)
	if !ok {
		return fmt.Errorf("%w: the %s driver cannot pause a VM", ErrUnsupported, m.info.Driver)
	}
	return p.Resume(ctx)
}

// Kill stops the VM at once, without telling the guest.
func (m *Machine) Kill() error {
	m.mu.Lock()
	m.stopping = true
	m.mu.Unlock()
	err := m.proc.Kill()
	<-m.done
	return err
}

// Detach lets go of the VM without stopping it: the agent session closes,
// so another process can attach (vm.Attach), and no further events are
// emitted. Used when the app exits but the VM should keep running.
func (m *Machine) Detach() {
	m.mu.Lock()
	m.stopping, m.detached = true, true
	m.mu.Unlock()
	m.agent.Peer.Close(errors.New("detached from the VM"))
}
