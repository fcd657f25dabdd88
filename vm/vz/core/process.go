package core

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/vm"
)

// BootTimeout is how long vm.Boot waits for the agent under vz. A guest
// normally answers in a few seconds; the margin covers a cold page cache.
const BootTimeout = 60 * time.Second

// State is the framework's VM state, reduced to what the lifecycle needs.
type State int

const (
	StateOther    State = iota // pausing, saving, ...: no lifecycle meaning
	StateStarting              // configuring the hardware
	StateRunning
	StateStopping
	StateStopped
	StateError // the framework gave up on the VM
)

// Hooks are the framework calls a Process needs.
type Hooks struct {
	// Connect opens a connection to the guest's vsock AgentPort. It fails
	// (or may block) until the guest listens.
	Connect func() (net.Conn, error)
	// RequestStop asks the guest to power off.
	RequestStop func() error
	// Stop stops the VM at once.
	Stop func() error
	// Pause and Resume pause the VM in place and let it run again; nil
	// when the framework can't.
	Pause, Resume func() error
}

// ErrKilled is the exit reason of a VM stopped with Kill.
var ErrKilled = agentproto.Class(agentproto.ErrUnavailable, "killed on request")

// Process is a started VM, fed with the framework's state changes through
// Observe. It implements vm.Process.
type Process struct {
	hooks      Hooks
	consoleLog string
	done       chan struct{}

	mu      sync.Mutex
	started bool // saw the VM leave its initial stopped state
	killed  bool
	err     error
}

var (
	_ vm.Process = (*Process)(nil)
	_ vm.Pauser  = (*Process)(nil)
)

// NewProcess returns the Process of a VM whose Start succeeded.
// consoleLog is named in errors (it says why a guest died).
func NewProcess(h Hooks, consoleLog string) *Process {
	return &Process{hooks: h, consoleLog: consoleLog, done: make(chan struct{})}
}

// Observe records a state change, in the order the framework reported
// them, and reports whether the VM is gone (no more changes matter).
func (p *Process) Observe(s State) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return true
	default:
	}
	switch s {
	case StateStopped:
		// A VM is stopped before it starts; only a stop after that ends it.
		if !p.started {
			return false
		}
		if p.killed {
			p.err = ErrKilled
		}
	case StateError:
		msg := "the virtual machine stopped with an error"
		if p.consoleLog != "" {
			msg += "; the guest console is in " + p.consoleLog
		}
		p.err = errors.New(msg)
	default:
		p.started = true
		return false
	}
	close(p.done)
	return true
}

// DialAgent implements vm.Process: one connection attempt to the agent's
// vsock port. It gives up when ctx ends or the VM goes away even if the
// framework has not answered yet.
func (p *Process) DialAgent(ctx context.Context) (net.Conn, error) {
	if err := p.gone(); err != nil {
		return nil, err
	}
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := p.hooks.Connect()
		ch <- result{c, err}
	}()
	abandon := func() {
		go func() {
			if r := <-ch; r.conn != nil {
				r.conn.Close()
			}
		}()
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("vz: connect to vsock port %d: %w", AgentPort, r.err)
		}
		return r.conn, nil
	case <-ctx.Done():
		abandon()
		return nil, ctx.Err()
	case <-p.done:
		abandon()
		return nil, p.gone()
	}
}

// gone returns the error for using a VM that has stopped, nil if running.
func (p *Process) gone() error {
	select {
	case <-p.done:
		return fmt.Errorf("vz: %w", vm.ErrVMDied)
	default:
		return nil
	}
}

// RequestStop implements vm.Process: the framework asks the guest to power
// off (the guest agent handles the request).
func (p *Process) RequestStop() error {
	if p.gone() != nil {
		return nil
	}
	if err := p.hooks.RequestStop(); err != nil {
		return fmt.Errorf("vz: request stop: %w", err)
	}
	return nil
}

// Kill implements vm.Process: a hard stop.
func (p *Process) Kill() error {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	if p.gone() != nil {
		return nil
	}
	if err := p.hooks.Stop(); err != nil {
		if p.gone() != nil { // stopped on its own meanwhile
			return nil
		}
		return fmt.Errorf("vz: stop: %w", err)
	}
	return nil
}

// Pause implements vm.Pauser.
func (p *Process) Pause(context.Context) error { return p.pauseHook("pause", p.hooks.Pause) }

// Resume implements vm.Pauser.
func (p *Process) Resume(context.Context) error { return p.pauseHook("resume", p.hooks.Resume) }

func (p *Process) pauseHook(what string, fn func() error) error {
	if err := p.gone(); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: vz: %s", vm.ErrUnsupported, what)
	}
	if err := fn(); err != nil {
		return fmt.Errorf("vz: %s: %w", what, err)
	}
	return nil
}

// Done implements vm.Process.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err implements vm.Process: nil after a guest power-off or RequestStop,
// ErrKilled after Kill, an error naming the console log when the framework
// put the VM in its error state.
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Info implements vm.Process.
func (p *Process) Info() vm.ProcessInfo {
	return vm.ProcessInfo{Driver: "vz", Accel: "vz", Transport: "vsock", BootTimeout: BootTimeout}
}
