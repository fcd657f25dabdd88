package agentproto

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"
)

// Client is the host's typed view of the guest agent.
type Client struct {
	Peer *Peer
	Info HelloResponse
}

// Handshake greets the guest on a fresh session: checks the protocol
// version and hands over the host's clock.
func Handshake(ctx context.Context, p *Peer) (*Client, error) {
	var resp HelloResponse
	err := p.Call(ctx, OpHello, greeting(), &resp)
	if err != nil {
		return nil, err
	}
	if resp.Major != VersionMajor {
		return nil, fmt.Errorf("%w: host speaks %d.%d, guest agent %d.%d; rebuild the guest image",
			ErrVersion, VersionMajor, VersionMinor, resp.Major, resp.Minor)
	}
	return &Client{Peer: p, Info: resp}, nil
}

// SyncClock hands the host's clock to the guest again, as Handshake did:
// a guest that was paused (or restored) has lost the time it did not run.
// Hello is idempotent on the guest, which sets its clock when it is more
// than a second off.
func (c *Client) SyncClock(ctx context.Context) error {
	return c.Peer.Call(ctx, OpHello, greeting(), &HelloResponse{})
}

// greeting is the host's hello: its clock, its addresses and 32 fresh
// random bytes for the guest's pool.
func greeting() HelloRequest {
	seed := make([]byte, 32)
	rand.Read(seed) // never fails (crypto/rand)
	return HelloRequest{
		Major: VersionMajor, Minor: VersionMinor, TimeUnixNano: time.Now().UnixNano(),
		HostAddrs: hostAddrs(), Seed: seed,
	}
}

// Exec runs a process and streams its output into stdout and stderr as it
// arrives. stdin, when non-nil, is copied to the process (req.Stdin is set
// for you). Cancelling ctx kills the process group.
func (c *Client) Exec(ctx context.Context, req ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (ExitStatus, error) {
	return c.ExecWith(ctx, req, stdin, stdout, stderr, ExecControl{})
}

// ExecControl is what a caller sends during an exec call besides stdin.
type ExecControl struct {
	// Resize carries a terminal's new sizes (ExecRequest.Tty).
	Resize <-chan Winsize
	// Signal carries signals for the process (or, with Children, for
	// what it started).
	Signal <-chan SignalFrame
}

// ExecWith is Exec with resizes and signals sent during the call.
func (c *Client) ExecWith(ctx context.Context, req ExecRequest, stdin io.Reader, stdout, stderr io.Writer, ctl ExecControl) (ExitStatus, error) {
	req.Stdin = stdin != nil
	return c.Peer.ExecStream(ctx, OpExec, req, stdin, stdout, stderr, ctl)
}

// ExecStream makes a call that answers as exec does (a Response with the
// pid, output frames, an Exit frame): op is OpExec, or a control
// operation that relays one (a terminal through the owner). The request
// must say whether stdin frames follow.
func (p *Peer) ExecStream(ctx context.Context, op string, req any, stdin io.Reader, stdout, stderr io.Writer, ctl ExecControl) (ExitStatus, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	s, release, err := p.open(ctx, op, req)
	if err != nil {
		return ExitStatus{}, err
	}
	defer release()
	t, payload, err := ReadFrame(s)
	if err != nil {
		return ExitStatus{}, p.callErr(ctx, op, err)
	}
	if t != FrameResponse {
		return ExitStatus{}, fmt.Errorf("agent %s: %w: unexpected frame %q", op, ErrProtocol, t)
	}
	var started ExecStarted
	if err := decodeResponse(op, payload, &started); err != nil {
		return ExitStatus{}, err
	}
	if stdin != nil {
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, rerr := stdin.Read(buf)
				if n > 0 {
					if s.writeFrame(FrameStdin, buf[:n]) != nil {
						return
					}
				}
				if rerr != nil {
					s.writeFrame(FrameStdinEOF, nil)
					return
				}
			}
		}()
	}
	if ctl.Resize != nil || ctl.Signal != nil {
		done := make(chan struct{})
		defer close(done)
		go func() {
			for {
				select {
				case ws := <-ctl.Resize:
					s.writeJSON(FrameResize, ws)
				case sf := <-ctl.Signal:
					s.writeJSON(FrameSignal, sf)
				case <-done:
					return
				}
			}
		}()
	}
	// On cancel, ask the guest to kill the group before the stream is torn
	// down; the deadline set by open's AfterFunc then unblocks us.
	stopKill := context.AfterFunc(ctx, func() {
		s.writeJSON(FrameSignal, SignalFrame{Signal: int(syscall.SIGKILL)})
	})
	defer stopKill()
	for {
		t, payload, err := ReadFrame(s)
		if err != nil {
			return ExitStatus{}, p.callErr(ctx, op, err)
		}
		switch t {
		case FrameStdout:
			if _, err := stdout.Write(payload); err != nil {
				return ExitStatus{}, fmt.Errorf("agent %s: writing stdout: %w", op, err)
			}
		case FrameStderr:
			if _, err := stderr.Write(payload); err != nil {
				return ExitStatus{}, fmt.Errorf("agent %s: writing stderr: %w", op, err)
			}
		case FrameExit:
			var st ExitStatus
			if err := json.Unmarshal(payload, &st); err != nil {
				return ExitStatus{}, fmt.Errorf("agent %s: %w: bad exit frame: %v", op, ErrProtocol, err)
			}
			return st, nil
		case FrameResponse:
			if err := decodeResponse(op, payload, nil); err != nil {
				return ExitStatus{}, err
			}
			return ExitStatus{}, fmt.Errorf("agent %s: %w: response without exit status", op, ErrProtocol)
		default:
			return ExitStatus{}, fmt.Errorf("agent %s: %w: unexpected frame %q", op, ErrProtocol, t)
		}
	}
}

// Output runs a command and returns its stdout and stderr. A non-zero exit
// is not an error; check the status.
func (c *Client) Output(ctx context.Context, req ExecRequest) (stdout, stderr []byte, st ExitStatus, err error) {
	var o, e limitedBuffer
	o.max, e.max = 64<<20, 64<<20
	st, err = c.Exec(ctx, req, nil, &o, &e)
	return o.b, e.b, st, err
}

type limitedBuffer struct {
	b   []byte
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if len(l.b)+len(p) > l.max {
		return 0, fmt.Errorf("%w: output over %d bytes", ErrTooLarge, l.max)
	}
	l.b = append(l.b, p...)
	return len(p), nil
}

func call[Resp any](ctx context.Context, c *Client, op string, req any) (Resp, error) {
	var r Resp
	err := c.Peer.Call(ctx, op, req, &r)
	return r, err
}

// StartBackground starts a detached process logging to a file.
func (c *Client) StartBackground(ctx context.Context, req StartBackgroundRequest) (StartBackgroundResponse, error) {
	return call[StartBackgroundResponse](ctx, c, OpStartBg, req)
}

// Signal signals a process with the identity's rights.
func (c *Client) Signal(ctx context.Context, req SignalRequest) error {
	_, err := call[Empty](ctx, c, OpSignal, req)
	return err
}

// Wait waits up to req.TimeoutMillis for a background process.
func (c *Client) Wait(ctx context.Context, req WaitRequest) (ExitStatus, error) {
	return call[ExitStatus](ctx, c, OpWait, req)
}

// Stat describes one path (symlinks are not followed).
func (c *Client) Stat(ctx context.Context, req PathRequest) (FileInfo, error) {
	return call[FileInfo](ctx, c, OpStat, req)
}

// List lists a directory.
func (c *Client) List(ctx context.Context, req ListRequest) (ListResponse, error) {
	return call[ListResponse](ctx, c, OpList, req)
}

// Mkdir creates a directory.
func (c *Client) Mkdir(ctx context.Context, req PathRequest) error {
	_, err := call[Empty](ctx, c, OpMkdir, req)
	return err
}

// Remove removes a file or directory.
func (c *Client) Remove(ctx context.Context, req PathRequest) error {
	_, err := call[Empty](ctx, c, OpRemove, req)
	return err
}

// Move renames a file or directory.
func (c *Client) Move(ctx context.Context, req MoveRequest) error {
	_, err := call[Empty](ctx, c, OpMove, req)
	return err
}

// UserAdd creates a Linux user (idempotent).
func (c *Client) UserAdd(ctx context.Context, req UserAddRequest) (UserAddResponse, error) {
	return call[UserAddResponse](ctx, c, OpUserAdd, req)
}

// UserLimit blocks (killing its processes) or unblocks a Linux user.
func (c *Client) UserLimit(ctx context.Context, req UserLimitRequest) error {
	_, err := call[Empty](ctx, c, OpUserLimit, req)
	return err
}

// UserDel deletes a Linux user after killing its processes.
func (c *Client) UserDel(ctx context.Context, req UserDelRequest) error {
	_, err := call[Empty](ctx, c, OpUserDel, req)
	return err
}

// Shutdown asks the guest to sync and power off. The session usually ends
// before a response arrives; that counts as success.
func (c *Client) Shutdown(ctx context.Context, req ShutdownRequest) error {
	_, err := call[Empty](ctx, c, OpShutdown, req)
	if errors.Is(err, ErrSessionEnded) {
		return nil
	}
	return err
}

// Usage reports the resource use of agent users. A guest older than minor
// 3 answers ErrUnsupported.
func (c *Client) Usage(ctx context.Context, req UsageRequest) (UsageResponse, error) {
	return call[UsageResponse](ctx, c, OpUsage, req)
}
