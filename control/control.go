// Package control lets local processes drive the sandbox through the one
// process that owns the VM (the app, or the headless `serve` daemon).
//
// The owner listens on run/control.sock and speaks agentproto: "ctl.*"
// operations are lifecycle requests it handles itself; every other op is
// relayed to the guest agent, so a client uses the ordinary
// agentproto.Client for exec and files.
package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/sandbox"
)

// Control operations.
const (
	OpStatus      = "ctl.status"
	OpProvision   = "ctl.provision"
	OpStart       = "ctl.start"
	OpStop        = "ctl.stop"
	OpReset       = "ctl.reset"
	OpRemove      = "ctl.remove"
	OpDiagnostics = "ctl.diagnostics"
	OpQuit        = "ctl.quit" // stop the VM and end the owner process
)

// ErrNoOwner: no process owns the sandbox right now.
var ErrNoOwner = errors.New("no sandbox app is running")

// ErrOwned: another process already owns this data dir.
var ErrOwned = errors.New("another osaurus-sandbox process owns this data dir")

func socketPath(p config.Paths) string { return filepath.Join(p.Run(), "control.sock") }

// Listen claims ownership of the data dir and listens on its control
// socket. The claim is an flock held until the listener is closed, so a
// crashed owner never blocks the next one.
func Listen(p config.Paths) (net.Listener, error) {
	if err := os.MkdirAll(p.Run(), 0o700); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(p.Run(), "owner.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w (%s)", ErrOwned, p.Root)
	}
	sock := socketPath(p)
	os.Remove(sock) // stale from a crashed owner; we hold the lock
	ln, err := net.Listen("unix", sock)
	if err != nil {
		lock.Close()
		return nil, err
	}
	os.Chmod(sock, 0o600)
	return &ownedListener{Listener: ln, lock: lock}, nil
}

type ownedListener struct {
	net.Listener
	lock *os.File
}

func (l *ownedListener) Close() error {
	err := l.Listener.Close()
	l.lock.Close()
	return err
}

// Server answers control calls for a manager.
type Server struct {
	M *sandbox.Manager
	// DiagEnv completes the diagnostics environment (NAT URL, bridge).
	DiagEnv func(env *diagnostics.Env)
	// Quit is called for OpQuit after the VM stopped.
	Quit func()
	// Owner says what kind of process this is: "app", "serve", or
	// "background" (started by the CLI; `stop` ends it).
	Owner string
}

// StatusReply is OpStatus's answer.
type StatusReply struct {
	sandbox.Status
	Owner string `json:"owner"`
}

// Serve accepts clients until ctx ends or ln is closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	mux := s.mux()
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			peer, err := agentproto.NewServerPeer(conn)
			if err != nil {
				conn.Close()
				return
			}
			defer peer.Close(nil)
			peer.Serve(ctx, mux)
		}()
	}
}

func (s *Server) mux() *agentproto.Mux {
	m := agentproto.NewMux()
	m.Handle(OpStatus, func(ctx context.Context, c *agentproto.Call) error {
		return c.Respond(StatusReply{Status: s.M.Status(), Owner: s.Owner})
	})
	lifecycle := func(op func(context.Context) error) agentproto.HandlerFunc {
		return func(ctx context.Context, c *agentproto.Call) error {
			cancel := s.M.Subscribe(func(st sandbox.Status) { c.Emit(st) })
			err := op(ctx)
			cancel()
			if err != nil {
				return err
			}
			return c.Respond(s.M.Status())
		}
	}
	m.Handle(OpProvision, lifecycle(s.M.Provision))
	m.Handle(OpStart, lifecycle(s.M.Start))
	m.Handle(OpStop, lifecycle(s.M.Stop))
	m.Handle(OpReset, lifecycle(s.M.Reset))
	m.Handle(OpRemove, lifecycle(s.M.Remove))
	m.Handle(OpQuit, func(ctx context.Context, c *agentproto.Call) error {
		err := s.M.Close(ctx, true)
		if err == nil {
			err = c.Respond(agentproto.Empty{})
		}
		if s.Quit != nil {
			s.Quit()
		}
		return err
	})
	m.Handle(OpDiagnostics, func(ctx context.Context, c *agentproto.Call) error {
		results := s.diagnose(ctx, func(r diagnostics.Result) { c.Emit(r) })
		return c.Respond(results)
	})
	m.HandleDefault(func(ctx context.Context, c *agentproto.Call) error {
		a, err := s.M.Agent()
		if err != nil {
			return fmt.Errorf("%w: %w; start it first", agentproto.ErrUnavailable, err)
		}
		return a.Peer.Forward(ctx, c)
	})
	return m
}

// Diagnose runs the standard checks against the running VM.
func (s *Server) diagnose(ctx context.Context, onResult func(diagnostics.Result)) []diagnostics.Result {
	env := diagnostics.Env{}
	if a, err := s.M.Agent(); err == nil {
		env.Agent = a
		env.PackageManager = a.Info.PackageMgr
	}
	if s.DiagEnv != nil {
		s.DiagEnv(&env)
	}
	return diagnostics.Run(ctx, env, diagnostics.Checks(), onResult)
}

// Client talks to the owner.
type Client struct {
	peer *agentproto.Peer
}

// Dial connects to the owner of the data dir, or returns ErrNoOwner.
func Dial(ctx context.Context, p config.Paths) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socketPath(p))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoOwner, err)
	}
	peer, err := agentproto.NewClientPeer(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &Client{peer: peer}, nil
}

// Close ends the connection.
func (c *Client) Close() { c.peer.Close(nil) }

// Status returns the owner's view.
func (c *Client) Status(ctx context.Context) (StatusReply, error) {
	var st StatusReply
	err := c.peer.Call(ctx, OpStatus, agentproto.Empty{}, &st)
	return st, err
}

// Lifecycle runs OpProvision, OpStart, OpStop, OpReset or OpRemove,
// reporting status changes (with provisioning progress) as they happen.
func (c *Client) Lifecycle(ctx context.Context, op string, onStatus func(sandbox.Status)) (sandbox.Status, error) {
	var st sandbox.Status
	err := c.peer.CallStream(ctx, op, agentproto.Empty{}, &st, func(raw json.RawMessage) {
		var ev sandbox.Status
		if json.Unmarshal(raw, &ev) == nil && onStatus != nil {
			onStatus(ev)
		}
	})
	return st, err
}

// Quit stops the VM and ends the owner process.
func (c *Client) Quit(ctx context.Context) error {
	return c.peer.Call(ctx, OpQuit, agentproto.Empty{}, nil)
}

// Diagnostics runs the checks, reporting each as it finishes.
func (c *Client) Diagnostics(ctx context.Context, onResult func(diagnostics.Result)) ([]diagnostics.Result, error) {
	var rs []diagnostics.Result
	err := c.peer.CallStream(ctx, OpDiagnostics, agentproto.Empty{}, &rs, func(raw json.RawMessage) {
		var r diagnostics.Result
		if json.Unmarshal(raw, &r) == nil && onResult != nil {
			onResult(r)
		}
	})
	return rs, err
}

// Guest returns an agent client relayed through the owner.
func (c *Client) Guest(ctx context.Context) (*agentproto.Client, error) {
	return agentproto.Handshake(ctx, c.peer)
}
