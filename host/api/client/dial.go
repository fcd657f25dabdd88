package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/server"
)

// ErrLinkLost: the stream to a remote owner (ssh running dial-stdio)
// ended; the remote owner and its VM may well still run.
var ErrLinkLost = agentproto.Class(agentproto.ErrUnavailable, "the connection to the remote sandbox was lost")

// ErrUnreachable: the stream to a remote owner could not be opened (ssh
// failed, or the far side has no osaurus-sandbox).
var ErrUnreachable = agentproto.Class(agentproto.ErrUnavailable, "the remote sandbox can't be reached")

// Greeting is the line dial-stdio writes once it is connected to its
// owner, before the stream: it tells "connected" from "ssh failed" at
// dial time, with ssh's own error, rather than at the first call.
const Greeting = "osaurus-sandbox dial-stdio 1\n"

// ExitNoOwner is dial-stdio's exit code when told not to start an owner
// and none runs (the CLI's ExitNotRunning).
const ExitNoOwner = 3

// Dialer opens a byte stream to an owner's control socket from afar:
// `osaurus-sandbox dial-stdio` on another machine over ssh (a Client
// without one dials the local unix socket).
// With spawn, a background owner is started when none runs; without it,
// no owner is api.ErrNoOwner.
type Dialer interface {
	DialControl(ctx context.Context, spawn bool) (io.ReadWriteCloser, error)
}

// Via connects to the owner d reaches, starting a background owner there
// when none runs (now or at a reconnection).
func Via(ctx context.Context, d Dialer) (*Client, error) {
	c := NewLazyVia(d)
	if _, err := c.session(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// NewLazyVia is NewLazy for the owner d reaches.
func NewLazyVia(d Dialer) *Client { return &Client{via: d, spawn: true} }

// peerVia opens a session over d. A stream that can say why it ended
// (linkCause) gives its cause to the session's calls.
func peerVia(ctx context.Context, d Dialer, spawn bool) (*agentproto.Peer, error) {
	conn, err := d.DialControl(ctx, spawn)
	if err != nil {
		return nil, err
	}
	peer, err := agentproto.NewClientPeer(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if lc, ok := conn.(linkCause); ok {
		// ssh's exit is seen a moment after the stream breaks.
		peer.SetCauseGrace(2 * time.Second)
		// The stream outlives the session (closing the session closes
		// it), so this always ends; a session closed first keeps its
		// own cause.
		go func() {
			<-lc.Ended()
			peer.Close(lc.Cause())
		}()
	}
	return peer, nil
}

// dialExisting connects to a running owner only: api.ErrNoOwner when none
// runs.
func (c *Client) dialExisting(ctx context.Context) (*agentproto.Peer, error) {
	if c.via != nil {
		return peerVia(ctx, c.via, false)
	}
	return dialPeer(ctx, c.paths)
}

// linkLost words a session that ended under a call as the link's loss
// when the owner is remote: the owner there may be fine.
func (c *Client) linkLost(err error) error {
	if errors.Is(err, ErrLinkLost) { // the stream's own cause says it
		return err
	}
	return fmt.Errorf("%w: %w", ErrLinkLost, err)
}

type linkCause interface {
	Ended() <-chan struct{}
	Cause() error
}

// CommandDialer runs a command whose stdin and stdout are the stream to
// an owner: the user's ssh running `osaurus-sandbox dial-stdio` on the
// far side. Its stderr is kept for the error when it fails.
type CommandDialer struct {
	// Argv is the command line; spawn as in Dialer (dial-stdio's
	// --no-start when false).
	Argv func(spawn bool) []string
	// Name is what errors call the far side ("ssh://me@box").
	Name string
}

// DialControl starts the command and waits for dial-stdio's greeting.
func (d CommandDialer) DialControl(ctx context.Context, spawn bool) (io.ReadWriteCloser, error) {
	argv := d.Argv(spawn)
	cmd := exec.Command(argv[0], argv[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Not StdoutPipe: Wait, which runs alongside the reads here, would
	// close it under them.
	stdout, pw, err := os.Pipe()
	if err != nil {
		stdin.Close()
		return nil, err
	}
	cmd.Stdout = pw
	lc := &cmdConn{name: d.Name, cmd: cmd, w: stdin, ended: make(chan struct{})}
	cmd.Stderr = &lc.stderr
	// Its own process group: a ^C meant for this process reaches ssh
	// only through this process closing the stream.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		stdout.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, d.Name, err)
	}
	lc.out = stdout
	lc.r = bufio.NewReader(stdout)
	greeted := make(chan error, 1)
	go func() {
		line, err := lc.r.ReadString('\n')
		if err == nil && line != Greeting {
			err = fmt.Errorf("it answered %q, not dial-stdio's greeting: is the far side's osaurus-sandbox too old? (`osaurus-sandbox context add` checks it)", strings.TrimSpace(line))
		}
		greeted <- err
	}()
	go func() {
		lc.waitErr = cmd.Wait()
		close(lc.ended)
	}()
	select {
	case err = <-greeted:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil {
		return lc, nil
	}
	if ctx.Err() == nil && !errors.Is(err, io.EOF) {
		lc.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, d.Name, err)
	}
	if ctx.Err() != nil {
		lc.Close()
		return nil, ctx.Err()
	}
	// The command exited before the greeting: why is its exit status and
	// stderr.
	<-lc.ended
	var ee *exec.ExitError
	if errors.As(lc.waitErr, &ee) && ee.ExitCode() == ExitNoOwner && !spawn {
		return nil, fmt.Errorf("%w: on %s", api.ErrNoOwner, d.Name)
	}
	return nil, fmt.Errorf("%w: %s: %s", ErrUnreachable, d.Name, lc.why())
}

// cmdConn is the stream of a CommandDialer: the command's stdout and
// stdin.
type cmdConn struct {
	name    string
	cmd     *exec.Cmd
	out     *os.File // r reads it
	r       *bufio.Reader
	w       io.WriteCloser
	stderr  tailBuffer
	ended   chan struct{}
	waitErr error
	once    sync.Once
}

func (c *cmdConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *cmdConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// Close ends the stream: ssh sees its stdin end and exits, and is killed
// if it doesn't within two seconds.
func (c *cmdConn) Close() error {
	c.once.Do(func() {
		c.w.Close()
		select {
		case <-c.ended:
		case <-time.After(2 * time.Second):
			syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.ended
		}
		c.out.Close()
	})
	return nil
}

func (c *cmdConn) Ended() <-chan struct{} { return c.ended }

// Cause says why the stream ended, once Ended is closed.
func (c *cmdConn) Cause() error {
	return fmt.Errorf("%w: %s: %s", ErrLinkLost, c.name, c.why())
}

// why is the command's exit and the last of its stderr.
func (c *cmdConn) why() string {
	msg := "exited"
	if c.waitErr != nil {
		msg = c.waitErr.Error()
	}
	if s := strings.TrimSpace(c.stderr.String()); s != "" {
		msg += ": " + s
	}
	return msg
}

// tailBuffer keeps the last 2 KiB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if n := len(t.b) - 2048; n > 0 {
		t.b = t.b[n:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(t.b, []byte("?")))
}

// ServeStdio is dial-stdio: it connects in and out to the owner of the
// data dir (starting a background owner when none runs, unless noStart)
// and copies bytes both ways until either side ends. With noStart and no
// owner it returns api.ErrNoOwner having written nothing.
func ServeStdio(ctx context.Context, p config.Paths, noStart bool, in io.Reader, out io.Writer) error {
	conn, err := dialConn(ctx, p)
	if errors.Is(err, api.ErrNoOwner) {
		if noStart {
			if server.Owned(p) {
				// An owner is starting or ending: not "none".
				return fmt.Errorf("the sandbox's owner is starting or stopping; try again")
			}
			return err
		}
		if err = spawnOwner(p); err != nil {
			return err
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			if conn, err = dialConn(ctx, p); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the background sandbox process did not come up; see %s: %w", p.ServeLog(), err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond): // poll for the socket
			}
		}
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := io.WriteString(out, Greeting); err != nil {
		return err
	}
	done := make(chan error, 2)
	go func() {
		_, err := io.Copy(conn, in)
		// The front end is done sending: the owner sees the end.
		if uc, ok := conn.(*net.UnixConn); ok {
			uc.CloseWrite()
		}
		done <- err
	}()
	go func() {
		_, err := io.Copy(out, conn)
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
	}
	// Either end ending ends the pipe: a session is useless half-open.
	return err
}

// dialConn is the raw connection to the local control socket.
func dialConn(ctx context.Context, p config.Paths) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", p.ControlSocket())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", api.ErrNoOwner, err)
	}
	return conn, nil
}
