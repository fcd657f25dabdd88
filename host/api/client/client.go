// Package client is the Controller of a process that doesn't own the VM
// (the CLI, the stdio MCP server, a window while `serve` owns the VM): it
// reaches the owner over the control socket, starting a background owner
// when asked to and none runs.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/server"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// Client is the Controller of a process that doesn't own the VM: every
// call goes over one multiplexed connection to the owner's control
// socket, so concurrent calls run concurrently and nothing is locked
// across a call. A connection found dead (the owner exited or was
// replaced) is re-established once, transparently, before the next call.
type Client struct {
	paths config.Paths
	spawn bool   // start a background owner when none runs
	via   Dialer // nil: the local control socket (dial.go)

	mu     sync.Mutex
	peer   *agentproto.Peer
	closed bool // by Close: no call connects again
}

// ErrClosed: a call on a Client after its Close. A closed client never
// connects again (nor starts an owner): a late call of a front end that
// has gone must not bring an owner back.
var ErrClosed = agentproto.Class(agentproto.ErrUnavailable, "the control client was closed")

// Dial connects to the owner of the data dir, or returns api.ErrNoOwner.
// Reconnections never start an owner either.
func Dial(ctx context.Context, p config.Paths) (*Client, error) {
	c := &Client{paths: p}
	if _, err := c.session(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Connect returns a client of the owner, starting a background owner
// (`serve --background`) when none runs, now or at a reconnection.
func Connect(ctx context.Context, p config.Paths) (*Client, error) {
	c := &Client{paths: p, spawn: true}
	if _, err := c.session(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// NewLazy returns a client that connects (starting a background owner
// when none runs) on its first call rather than now: an MCP client starts
// its servers eagerly, long before a tool is called.
func NewLazy(p config.Paths) *Client { return &Client{paths: p, spawn: true} }

func dialPeer(ctx context.Context, p config.Paths) (*agentproto.Peer, error) {
	conn, err := dialConn(ctx, p)
	if err != nil {
		return nil, err
	}
	peer, err := agentproto.NewClientPeer(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return peer, nil
}

// session returns the live connection, dialling a new one when there is
// none or the last one ended.
func (c *Client) session(ctx context.Context) (*agentproto.Peer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.peer != nil && c.peer.Err() == nil {
		return c.peer, nil
	}
	if c.peer != nil {
		c.peer.Close(nil)
		c.peer = nil
	}
	var (
		peer *agentproto.Peer
		err  error
	)
	if c.via != nil {
		peer, err = peerVia(ctx, c.via, c.spawn)
	} else if c.spawn {
		peer, err = connectPeer(ctx, c.paths)
	} else {
		peer, err = dialPeer(ctx, c.paths)
	}
	if err != nil {
		return nil, err
	}
	c.peer = peer
	return peer, nil
}

// call makes a call; when retry is set and the connection turns out to
// have ended, it reconnects and makes it once more. Only calls that are
// safe to repeat retry: a tool call that was cut off may have run.
func (c *Client) call(ctx context.Context, op string, req, resp any, onEvent func(json.RawMessage), retry bool) error {
	for attempt := 0; ; attempt++ {
		p, err := c.session(ctx)
		if err != nil {
			return err
		}
		err = p.CallStream(ctx, op, req, resp, onEvent)
		if err == nil || !errors.Is(err, agentproto.ErrSessionEnded) || ctx.Err() != nil {
			return err
		}
		if (!retry || attempt > 0) && c.via != nil {
			return c.linkLost(err)
		}
		if !retry || attempt > 0 {
			return fmt.Errorf("%w: %w", api.ErrOwnerGone, err)
		}
	}
}

// Close ends the connection; later calls fail with ErrClosed.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.peer != nil {
		c.peer.Close(nil)
		c.peer = nil
	}
}

// Status returns the owner's view.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var st api.Status
	err := c.call(ctx, control.OpStatus, agentproto.Empty{}, &st, nil, true)
	return st, err
}

// Subscribe follows the owner's status on a connection of its own, which
// ends with cancel. When the owner goes away, fn gets the status the files
// on disk describe, with the reason, and the client waits for an owner to
// come back.
func (c *Client) Subscribe(fn func(api.Status)) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		gone, seen := false, false
		var last api.Status
		for ctx.Err() == nil {
			peer, err := c.dialExisting(ctx)
			if err == nil {
				gone = false
				// It ends only when the owner goes away or cancel is called.
				peer.CallStream(ctx, control.OpWatch, agentproto.Empty{}, nil, func(raw json.RawMessage) {
					var st api.Status
					if json.Unmarshal(raw, &st) == nil {
						last, seen = st, true
						fn(st)
					}
				})
				peer.Close(nil)
			}
			if ctx.Err() != nil {
				return
			}
			if !gone && seen {
				gone = true
				fn(ownerGone(last))
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second): // poll for a new owner
			}
		}
	}()
	return func() { cancel(); <-done }
}

// ownerGone is what a watcher sees when the owner exits: its VM stopped
// with it (a VM it left running is the next owner's to adopt), and
// whether it is provisioned did not change.
func ownerGone(last api.Status) api.Status {
	st := api.Status{Owner: "none"}
	st.Since = time.Now()
	st.State = control.Stopped
	if last.State == control.NotProvisioned || last.State == control.Provisioning {
		st.State = control.NotProvisioned
	}
	st.Reason = api.ErrOwnerGone.Error()
	return st
}

// Lifecycle runs op in the owner.
func (c *Client) Lifecycle(ctx context.Context, op api.Op, onStatus func(control.Status)) (control.Status, error) {
	var st control.Status
	// Repeating provision, start or stop after the owner went away is
	// safe (they are idempotent); reset and remove are not repeated.
	retry := op == api.OpProvision || op == api.OpStart || op == api.OpStop
	err := c.call(ctx, string(op), agentproto.Empty{}, &st, func(raw json.RawMessage) {
		var ev control.Status
		if json.Unmarshal(raw, &ev) == nil && onStatus != nil {
			onStatus(ev)
		}
	}, retry)
	return st, err
}

// Quit stops the VM and ends the owner process. The owner exits as soon
// as the VM is stopped, so its answer can lose the race with its exit: a
// session that ends instead of answering is judged by what it left.
func (c *Client) Quit(ctx context.Context) error {
	err := c.call(ctx, control.OpQuit, agentproto.Empty{}, nil, nil, false)
	// The owner may end the session before its answer arrives; either way
	// it is done only when it no longer serves (it closes everything else
	// first), so `stop` returns with nothing of it left running.
	if (err != nil && !errors.Is(err, agentproto.ErrSessionEnded)) || ctx.Err() != nil {
		return err
	}
	c.Close()
	return c.awaitNoOwner(ctx)
}

// awaitNoOwner waits until nobody serves the control socket or holds the
// ownership lock, for at most ten seconds: an owner that quit lets both go
// last, after everything else it ran.
func (c *Client) awaitNoOwner(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		peer, err := c.dialExisting(ctx)
		if errors.Is(err, api.ErrNoOwner) && (c.via != nil || !server.Owned(c.paths)) {
			return nil
		}
		if peer != nil {
			peer.Close(nil)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w, but the control socket still answers; check `osaurus-sandbox status`", api.ErrOwnerGone)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // poll for the socket to close
		}
	}
}

// Diagnostics runs the checks in the owner.
func (c *Client) Diagnostics(ctx context.Context, agent string, onResult func(diagnostics.Result)) ([]diagnostics.Result, error) {
	var rs []diagnostics.Result
	err := c.call(ctx, control.OpDiagnostics, control.DiagnosticsRequest{Agent: agent}, &rs, func(raw json.RawMessage) {
		var r diagnostics.Result
		if json.Unmarshal(raw, &r) == nil && onResult != nil {
			onResult(r)
		}
	}, true)
	return rs, err
}

// guest is an agent client relayed through the owner, for the guest
// operations it relays (control.Relayed). It is bound to the current
// connection.
func (c *Client) guest(ctx context.Context) (*agentproto.Client, error) {
	p, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	return agentproto.Handshake(ctx, p)
}

// Exec runs a command in the running VM, relayed through the owner.
func (c *Client) Exec(ctx context.Context, req agentproto.ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (agentproto.ExitStatus, error) {
	g, err := c.guest(ctx)
	if err != nil {
		return agentproto.ExitStatus{}, err
	}
	return g.Exec(ctx, req, stdin, stdout, stderr)
}

// Shell runs a terminal in the VM through the owner (control.OpShell):
// stdin's bytes are the keys, everything the terminal prints goes to
// stdout, resize carries the window's new sizes. The status is the shell's
// (or the command's) exit.
func (c *Client) Shell(ctx context.Context, req control.ShellRequest, stdin io.Reader, stdout io.Writer, resize <-chan agentproto.Winsize) (agentproto.ExitStatus, error) {
	p, err := c.session(ctx)
	if err != nil {
		return agentproto.ExitStatus{}, err
	}
	return p.ExecStream(ctx, control.OpShell, req, stdin, stdout, stdout, agentproto.ExecControl{Resize: resize})
}

// OfferSecrets offers this machine's secrets to the owner
// (control.OpSecretsProvide): the conn it returns carries the owner's
// requests and the answers (secrets.Provide serves it) until it is
// closed or the connection ends.
func (c *Client) OfferSecrets(ctx context.Context) (net.Conn, error) {
	p, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	return p.OpenConn(ctx, control.OpSecretsProvide, agentproto.Empty{})
}

// NetLog reads the guest's log of refused connections through the owner.
func (c *Client) NetLog(ctx context.Context, req agentproto.NetLogRequest) (agentproto.NetLogResponse, error) {
	g, err := c.guest(ctx)
	if err != nil {
		return agentproto.NetLogResponse{}, err
	}
	return g.NetLog(ctx, req)
}

// Usage reads the agents' resource use through the owner.
func (c *Client) Usage(ctx context.Context, req agentproto.UsageRequest) (agentproto.UsageResponse, error) {
	g, err := c.guest(ctx)
	if err != nil {
		return agentproto.UsageResponse{}, err
	}
	return g.Usage(ctx, req)
}

// ClosePorts has the owner close agents' previews.
func (c *Client) ClosePorts(ctx context.Context, req api.ClosePortsRequest) (api.ClosePortsResult, error) {
	var r api.ClosePortsResult
	err := c.call(ctx, control.OpClosePorts, req, &r, nil, false)
	return r, err
}

// CreateCheckpoint has the owner take a sandbox checkpoint.
func (c *Client) CreateCheckpoint(ctx context.Context, req api.CheckpointRequest) (checkpoint.Meta, error) {
	var r checkpoint.Meta
	err := c.call(ctx, control.OpCheckpointCreate, req, &r, nil, false)
	return r, err
}

// ListCheckpoints lists the sandbox checkpoints.
func (c *Client) ListCheckpoints(ctx context.Context) (api.CheckpointList, error) {
	var r api.CheckpointList
	err := c.call(ctx, control.OpCheckpointList, agentproto.Empty{}, &r, nil, true)
	return r, err
}

// RestoreCheckpoint has the owner restore a sandbox checkpoint.
func (c *Client) RestoreCheckpoint(ctx context.Context, req api.CheckpointRequest) (api.RestoreResult, error) {
	var r api.RestoreResult
	err := c.call(ctx, control.OpCheckpointRestore, req, &r, nil, false)
	return r, err
}

// RemoveCheckpoint has the owner delete a sandbox checkpoint.
func (c *Client) RemoveCheckpoint(ctx context.Context, req api.CheckpointRequest) error {
	return c.call(ctx, control.OpCheckpointRemove, req, nil, nil, false)
}

var _ api.Checkpointer = (*Client)(nil)

// RemoveAgent has the owner delete what it keeps for a removed agent.
func (c *Client) RemoveAgent(ctx context.Context, req api.RemoveAgentRequest) (api.RemoveAgentResult, error) {
	var r api.RemoveAgentResult
	err := c.call(ctx, control.OpRemoveAgent, req, &r, nil, false)
	return r, err
}

// InstallPlugin installs a plugin in the owner.
func (c *Client) InstallPlugin(ctx context.Context, req api.PluginInstallRequest, progress func(tools.InstallStep)) error {
	return c.call(ctx, control.OpPluginInstall, req, nil, func(raw json.RawMessage) {
		var st tools.InstallStep
		if json.Unmarshal(raw, &st) == nil && progress != nil {
			progress(st)
		}
	}, false)
}

// UninstallPlugin uninstalls a plugin in the owner.
func (c *Client) UninstallPlugin(ctx context.Context, req api.PluginUninstallRequest) (deferred, err error) {
	var r control.UninstallReply
	if err := c.call(ctx, control.OpPluginUninstall, req, &r, nil, false); err != nil {
		return nil, err
	}
	if r.Deferred != "" {
		return errors.New(r.Deferred), nil
	}
	return nil, nil
}

// UninstallPluginEverywhere uninstalls a plugin from every agent in the
// owner.
func (c *Client) UninstallPluginEverywhere(ctx context.Context, pluginID string, report func(string)) error {
	return c.call(ctx, control.OpPluginUninstallAll, control.PluginRequest{Plugin: pluginID}, nil, func(raw json.RawMessage) {
		var line string
		if json.Unmarshal(raw, &line) == nil && report != nil {
			report(line)
		}
	}, false)
}

// RunTool runs a tool in the owner.
func (c *Client) RunTool(ctx context.Context, agentID, tool string, args json.RawMessage) envelope.Envelope {
	var r control.ToolReply
	err := c.call(ctx, control.OpTool, control.ToolRequest{Agent: agentID, Tool: tool, Args: args}, &r, nil, false)
	if errors.Is(err, api.ErrOwnerGone) {
		return envelope.Failf(tool, envelope.Unavailable, "the sandbox's owner process exited during the call, so it may or may not have run: %v. Check before repeating it.", err)
	}
	if err != nil {
		return envelope.Failf(tool, envelope.Unavailable, "the sandbox is not available: %v. Retry once it is running (`osaurus-sandbox start`).", err)
	}
	e, err := envelope.ParseBytes(r.Envelope)
	if err != nil {
		return envelope.Failf(tool, envelope.Unavailable, "the sandbox's owner answered with a bad envelope: %v", err)
	}
	return e
}

// EndTurn starts a new turn of agentID in the owner. With no owner there
// is no turn to end, so it connects to a running owner only.
func (c *Client) EndTurn(ctx context.Context, agentID string) error {
	// The caller's ctx may be a notification's, which can end as soon as
	// the handler is running; the turn must end anyway.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	c.mu.Lock()
	live := c.peer != nil && c.peer.Err() == nil
	c.mu.Unlock()
	if !live {
		peer, err := c.dialExisting(ctx)
		if err != nil {
			return nil // no owner: its counters start fresh anyway
		}
		c.mu.Lock()
		if c.peer == nil || c.peer.Err() != nil {
			if c.peer != nil {
				c.peer.Close(nil)
			}
			c.peer = peer
		} else {
			peer.Close(nil)
		}
		c.mu.Unlock()
	}
	return c.call(ctx, control.OpEndTurn, control.EndTurnRequest{Agent: agentID}, nil, nil, true)
}

// connectPeer connects to the owner, starting a background owner when
// none runs.
func connectPeer(ctx context.Context, p config.Paths) (*agentproto.Peer, error) {
	peer, err := dialPeer(ctx, p)
	if err == nil || !errors.Is(err, api.ErrNoOwner) {
		return peer, err
	}
	if err := spawnOwner(p); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		peer, err := dialPeer(ctx, p)
		if err == nil {
			return peer, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the background sandbox process did not come up; see %s: %w", p.ServeLog(), err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond): // poll for the socket
		}
	}
}

// spawnOwner starts `osaurus-sandbox serve --background` detached, logging
// to logs/serve.log.
func spawnOwner(p config.Paths) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.Logs(), 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(p.ServeLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(exe, "serve", "--background")
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+p.Root)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the background sandbox process: %w", err)
	}
	return cmd.Process.Release()
}
