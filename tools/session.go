package tools

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// Shell sessions: sandbox_exec and sandbox_run_script with a session name
// run their command in one long-lived shell of the agent's, so the working
// directory, exported variables, an activated virtual environment and
// shell functions carry over from one call to the next. The shell is an
// ordinary exec in the guest (the agent's user, network policy, limits,
// private /tmp, in a cgroup of its own that ends with it) whose stdin the
// host writes each command to, wrapped so that its end, exit code and
// working directory come back as a marker only this call knows.
const (
	// MaxSessions bounds an agent's open sessions.
	MaxSessions = 8
	// SessionIdle ends a session nobody used for this long.
	SessionIdle = 30 * time.Minute
	// sessionKillWait is how long a timed-out command's session waits for
	// the shell to report after what the command started was killed; a
	// shell busy itself (a loop of builtins) is ended after it.
	sessionKillWait = 5 * time.Second
)

// sessionShell starts bash without start-up files, or sh where there is
// none. It reads its commands from stdin.
const sessionShell = `if command -v bash >/dev/null 2>&1; then exec bash --noprofile --norc; fi; exec sh`

var sessionName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

type sessionKey struct{ agent, name string }

// sessions are an Env's open shell sessions.
type sessions struct {
	mu sync.Mutex
	m  map[sessionKey]*shellSession
}

// shellSession is one long-lived shell.
type shellSession struct {
	key    sessionKey
	g      *agentproto.Client
	stdin  *io.PipeWriter
	sigs   chan agentproto.SignalFrame
	cancel context.CancelFunc
	done   chan struct{} // closed when the shell ended
	exit   agentproto.ExitStatus
	err    error // why the exec failed, if it did
	idle   *time.Timer

	run sync.Mutex // one command at a time

	omu       sync.Mutex
	out, eout *markSink // the running command's, nil between commands
}

func (s *shellSession) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// close ends the shell and everything it started.
func (s *shellSession) close() {
	s.cancel()
	s.stdin.CloseWithError(io.EOF)
}

// sessionWriter hands the shell's output to the running command's sink;
// output between commands (a background job still talking) is dropped.
type sessionWriter struct {
	s      *shellSession
	stderr bool
}

func (w sessionWriter) Write(p []byte) (int, error) {
	w.s.omu.Lock()
	defer w.s.omu.Unlock()
	sink := w.s.out
	if w.stderr {
		sink = w.s.eout
	}
	if sink != nil {
		sink.write(p)
	}
	return len(p), nil
}

// markSink passes a command's output on until its end marker, holding
// back what could be the start of a marker cut between two frames.
type markSink struct {
	w       io.Writer
	mark    []byte
	pending []byte
	found   chan struct{}
	trailer string // what followed the marker, up to its end
}

func newMarkSink(w io.Writer, mark string) *markSink {
	return &markSink{w: w, mark: []byte(mark), found: make(chan struct{})}
}

func (m *markSink) write(p []byte) {
	select {
	case <-m.found:
		return
	default:
	}
	m.pending = append(m.pending, p...)
	if i := bytes.Index(m.pending, m.mark); i >= 0 {
		rest := m.pending[i+len(m.mark):]
		j := bytes.IndexByte(rest, 0x1e)
		if j < 0 {
			m.w.Write(m.pending[:i])
			m.pending = m.pending[i:]
			if len(m.pending) > 64<<10 { // no marker is this long: not ours
				m.pending = nil
			}
			return
		}
		m.w.Write(m.pending[:i])
		m.trailer = string(rest[:j])
		m.pending = nil
		close(m.found)
		return
	}
	if keep := len(m.mark) - 1; len(m.pending) > keep {
		m.w.Write(m.pending[:len(m.pending)-keep])
		m.pending = append([]byte(nil), m.pending[len(m.pending)-keep:]...)
	}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// session returns the agent's session name, starting it in cwd when it
// is not open (fresh reports that).
func (c *call) session(ctx context.Context, name, cwd string) (s *shellSession, fresh bool, err error) {
	if !sessionName.MatchString(name) {
		return nil, false, envelope.ArgErrorf("session", "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit",
			"session %q is not a valid session name", name)
	}
	e := c.env
	key := sessionKey{c.agent.ID, name}
	e.sess.mu.Lock()
	defer e.sess.mu.Unlock()
	if e.sess.m == nil {
		e.sess.m = map[sessionKey]*shellSession{}
	}
	if s := e.sess.m[key]; s != nil {
		if !s.ended() && s.g == c.g {
			return s, false, nil
		}
		s.close() // its VM session is gone: the VM restarted
		delete(e.sess.m, key)
	}
	n := 0
	for k := range e.sess.m {
		if k.agent == key.agent {
			n++
		}
	}
	if n >= MaxSessions {
		return nil, false, envelope.Errorf(envelope.Rejected, "you have %d shell sessions open, the most there may be; end one by running `exit` in it "+
			"(or close_session: true), or let it end by itself after %s unused", n, SessionIdle)
	}
	a := c.current()
	l := a.Limits()
	pr, pw := io.Pipe()
	sctx, cancel := context.WithCancel(context.Background())
	s = &shellSession{key: key, g: c.g, stdin: pw, sigs: make(chan agentproto.SignalFrame, 4), cancel: cancel, done: make(chan struct{})}
	req := agentproto.ExecRequest{
		Identity: c.as(""), Argv: []string{"/bin/sh", "-c", sessionShell}, Cwd: cwd,
		Env: c.procEnv(), Network: c.networkOf(a), Limits: &l,
	}
	go func() {
		defer close(s.done)
		defer cancel()
		// A failed start is reported to the first command.
		st, err := c.g.ExecWith(sctx, req, pr, sessionWriter{s, false}, sessionWriter{s, true},
			agentproto.ExecControl{Signal: s.sigs})
		s.exit, s.err = st, err
		pr.CloseWithError(io.EOF)
	}()
	s.idle = time.AfterFunc(SessionIdle, func() { e.closeSession(key, s) })
	e.sess.m[key] = s
	return s, true, nil
}

// closeSession ends s if it is still the session of its key.
func (e *Env) closeSession(key sessionKey, s *shellSession) {
	e.sess.mu.Lock()
	if e.sess.m[key] == s {
		delete(e.sess.m, key)
	}
	e.sess.mu.Unlock()
	s.idle.Stop()
	s.close()
}

// CloseSessions ends every shell session of the agent (on its removal).
func (e *Env) CloseSessions(agentID string) {
	e.sess.mu.Lock()
	var gone []*shellSession
	for k, s := range e.sess.m {
		if k.agent == agentID {
			gone = append(gone, s)
			delete(e.sess.m, k)
		}
	}
	e.sess.mu.Unlock()
	for _, s := range gone {
		s.idle.Stop()
		s.close()
	}
}

// Sessions counts the agent's open shell sessions.
func (e *Env) Sessions(agentID string) int {
	e.sess.mu.Lock()
	defer e.sess.mu.Unlock()
	n := 0
	for k, s := range e.sess.m {
		if k.agent == agentID && !s.ended() {
			n++
		}
	}
	return n
}

// sessionResult is what one command in a session reports.
type sessionResult struct {
	st    agentproto.ExitStatus
	cwd   string
	ended bool // the command ended the shell (exit, or it was killed)
}

// runInSession runs command in the session and waits for its end marker
// on both streams. On timeout what the command started is killed and the
// shell lives on; a shell busy itself is ended.
func (c *call) runInSession(ctx context.Context, s *shellSession, command string, timeout time.Duration, stdout, stderr io.Writer) (sessionResult, error) {
	s.run.Lock()
	defer s.run.Unlock()
	s.idle.Reset(SessionIdle)
	if s.ended() {
		return sessionResult{}, c.sessionGone(s)
	}
	var nonce [12]byte
	rand.Read(nonce[:])
	tag := "\x1eOSB" + hex.EncodeToString(nonce[:])
	out, eout := newMarkSink(stdout, tag+" "), newMarkSink(stderr, tag)
	s.omu.Lock()
	s.out, s.eout = out, eout
	s.omu.Unlock()
	defer func() {
		s.omu.Lock()
		s.out, s.eout = nil, nil
		s.omu.Unlock()
	}()
	// eval in the shell itself, so cd and export stay; stdin is not the
	// session's, so a command can't read the commands after it.
	script := "eval " + shellQuote(command) + " </dev/null\n" +
		"__osb=$?; printf '" + `\036OSB` + hex.EncodeToString(nonce[:]) + ` %d %s\036` + "' \"$__osb\" \"$PWD\"; " +
		"printf '" + `\036OSB` + hex.EncodeToString(nonce[:]) + `\036` + "' >&2\n"
	if _, err := io.WriteString(s.stdin, script); err != nil {
		return sessionResult{}, c.sessionGone(s)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	timedOut := false
	var kill <-chan time.Time
	for {
		select {
		case <-out.found:
			select {
			case <-eout.found:
			case <-s.done:
			case <-time.After(sessionKillWait): // stderr closed by the command
			}
			code, cwd, _ := strings.Cut(out.trailer, " ")
			n, err := strconv.Atoi(code)
			if err != nil {
				return sessionResult{}, fmt.Errorf("%w: session %s: bad end marker %q", agentproto.ErrProtocol, s.key.name, out.trailer)
			}
			st := agentproto.ExitStatus{Exited: true, Code: n, TimedOut: timedOut}
			if n > 128 && n < 128+65 {
				st.Signal = n - 128
			}
			if timedOut {
				st.Signal = 0 // the timeout's kill, reported as the timeout
			}
			return sessionResult{st: st, cwd: cwd}, nil
		case <-s.done:
			st := s.exit
			if s.err != nil && !timedOut {
				return sessionResult{}, s.err
			}
			st.TimedOut = timedOut
			c.env.closeSession(s.key, s)
			return sessionResult{st: st, ended: true}, nil
		case <-t.C:
			timedOut = true
			select {
			case s.sigs <- agentproto.SignalFrame{Signal: int(syscall.SIGKILL), Children: true}:
			default:
			}
			kill = time.After(sessionKillWait)
		case <-kill:
			// The shell itself is busy (a loop of builtins): it goes.
			c.env.closeSession(s.key, s)
			kill = nil
		case <-ctx.Done():
			// The caller gave up: what runs goes, the shell stays.
			select {
			case s.sigs <- agentproto.SignalFrame{Signal: int(syscall.SIGKILL), Children: true}:
			default:
			}
			return sessionResult{}, ctx.Err()
		}
	}
}

func (c *call) sessionGone(s *shellSession) error {
	c.env.closeSession(s.key, s)
	select {
	case <-s.done: // s.exit and s.err are set
	case <-time.After(sessionKillWait):
		return envelope.Errorf(envelope.ExecutionError, "session %s has ended; the next call starts a new one", s.key.name)
	}
	if s.err != nil {
		if errors.Is(s.err, agentproto.ErrSessionEnded) || errors.Is(s.err, agentproto.ErrUnavailable) {
			return envelope.Errorf(envelope.Unavailable, "session %s ended with the VM; the next call starts a new one", s.key.name)
		}
		return s.err
	}
	return envelope.Errorf(envelope.ExecutionError, "session %s has ended (exit code %d); the next call starts a new one", s.key.name, s.exit.Code)
}

// execSession is sandbox_exec and sandbox_run_script in a session.
// cwd is where a new session starts, and where an open one changes to
// when cwdGiven.
func (c *call) execSession(ctx context.Context, name, cwd string, cwdGiven bool, command string, timeout time.Duration, closeAfter bool, stdout, stderr io.Writer) (agentproto.ExitStatus, string, error) {
	if err := c.admit(ctx); err != nil {
		return agentproto.ExitStatus{}, "", err
	}
	s, fresh, err := c.session(ctx, name, cwd)
	if err != nil {
		return agentproto.ExitStatus{}, "", err
	}
	if fresh {
		c.warn("started shell session %q: its working directory, variables and functions last until `exit`, %s unused, or the VM stops", name, SessionIdle)
	} else if cwdGiven {
		command = "cd -- " + shellQuote(cwd) + " && " + command
	}
	r, err := c.runInSession(ctx, s, command, timeout, stdout, stderr)
	if err != nil {
		return agentproto.ExitStatus{}, "", err
	}
	switch {
	case r.ended && !r.st.TimedOut:
		c.warn("the command ended shell session %q (exit code %d); the next call with it starts a new one", name, r.st.Code)
	case r.ended:
		c.warn("the shell of session %q itself did not stop, so the session was ended; the next call with it starts a new one", name)
	case closeAfter:
		c.env.closeSession(s.key, s)
	}
	return r.st, r.cwd, nil
}
