//go:build linux

package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"github.com/osaurus/osaurus-sandbox/guestagent/files"
	"github.com/osaurus/osaurus-sandbox/guestagent/oserr"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// BasePath is the PATH every process starts with.
const BasePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

const (
	// drainIdle is how long output may pause after the process exited
	// before the agent stops waiting for EOF: an orphan that inherited
	// the pipe must not hold the call open.
	drainIdle = 300 * time.Millisecond
	// drainMax bounds the whole drain, for an orphan that keeps talking.
	drainMax = 3 * time.Second
)

// command is a process ready to start, once resolve has set path and dir.
type command struct {
	path string // resolved executable
	argv []string
	env  []string
	dir  string
	// root and cwd are the request's, for resolve.
	root, cwd string
	// netns is the network namespace to start in (see netnsFor).
	netns netns.NsHandle
	// tty: its stdin is a terminal that becomes its controlling one.
	tty bool
}

// prepare works out what every process start needs but the working
// directory and the executable (resolve): argv, environment, the agent's
// temporary directories and network namespace.
func (s *Processes) prepare(a *account.Account, req *agentproto.ExecRequest) (*command, error) {
	argv, err := commandArgv(req)
	if err != nil {
		return nil, err
	}
	env, err := buildEnv(a, req.Env)
	if err != nil {
		return nil, err
	}
	if t := account.ActiveTmps(); t != nil && a.UID != 0 {
		// The agent's temporary directories, at its current quota,
		// before anything looks at its paths.
		if err := t.Ensure(a, req.Limits); err != nil {
			return nil, err
		}
	}
	ns, netEnv, err := s.netnsFor(a, req)
	if err != nil {
		return nil, err
	}
	// The policy's variables come last so the request can't override them.
	return &command{argv: argv, env: append(env, netEnv...), netns: ns, root: req.Root, cwd: req.Cwd}, nil
}

// resolve checks the working directory and finds the program, as the
// user (account.RunAs, or the spawn's own thread) and in its mount
// namespace: the program may be in its private /tmp.
func (cmd *command) resolve(a *account.Account) error {
	dir, err := workDir(a, cmd.root, cmd.cwd)
	if err != nil {
		return err
	}
	path, err := lookPath(cmd.argv[0], envValue(cmd.env, "PATH"), dir)
	if err != nil {
		return err
	}
	cmd.dir, cmd.path = dir, path
	return nil
}

// commandArgv is the argv a request runs: its argv, or its shell line
// under /bin/sh -c.
func commandArgv(req *agentproto.ExecRequest) ([]string, error) {
	switch {
	case req.Shell != "" && len(req.Argv) > 0:
		return nil, fmt.Errorf("%w: set argv or shell, not both", agentproto.ErrInvalid)
	case req.Shell != "":
		return []string{"/bin/sh", "-c", req.Shell}, nil
	case len(req.Argv) > 0 && req.Argv[0] != "":
		return req.Argv, nil
	default:
		return nil, fmt.Errorf("%w: empty command", agentproto.ErrInvalid)
	}
}

// buildEnv is the clean base environment plus extra; later entries win.
func buildEnv(a *account.Account, extra []string) ([]string, error) {
	base := []string{
		"PATH=" + BasePath,
		"HOME=" + a.Home,
		"USER=" + a.Name,
		"LOGNAME=" + a.Name,
		"SHELL=" + a.Shell,
		"LANG=C.UTF-8",
	}
	idx := map[string]int{}
	var env []string
	for _, kv := range append(base, extra...) {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return nil, fmt.Errorf("%w: environment entry %q is not KEY=VALUE", agentproto.ErrInvalid, kv)
		}
		if i, seen := idx[k]; seen {
			env[i] = kv
			continue
		}
		idx[k] = len(env)
		env = append(env, kv)
	}
	return env, nil
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// workDir picks and checks the working directory; it runs as the user
// (account.RunAs). Without a root it defaults to the home ("/" if the home
// is missing); beneath a root it defaults to the root, and the directory
// is resolved beneath it (openat2 RESOLVE_BENEATH: neither "..", an
// absolute symlink nor a symlink leading out can leave it) and named by
// its real path. O_PATH opens check search rights, as the child's chdir
// does, and cost no open on a shared folder.
func workDir(a *account.Account, root, cwd string) (string, error) {
	if root == "" {
		name := cwd
		switch {
		case cwd == "":
			name = a.Home
		case filepath.IsAbs(cwd):
			name = filepath.Clean(cwd)
		default:
			name = filepath.Join(a.Home, cwd)
		}
		fi, err := os.Stat(name)
		if err != nil && cwd == "" {
			return "/", nil
		}
		if err != nil {
			return "", oserr.Map(fmt.Errorf("working directory: %w", err))
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("%w: working directory %s", agentproto.ErrNotDir, cwd)
		}
		return name, nil
	}
	if !filepath.IsAbs(root) {
		return "", fmt.Errorf("%w: root %q is not absolute", agentproto.ErrInvalid, root)
	}
	root = filepath.Clean(root)
	rel, err := beneath(root, cwd)
	if err != nil {
		return "", err
	}
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", oserr.Map(fmt.Errorf("working directory: open %s: %w", root, err))
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.EXDEV) {
		return "", fmt.Errorf("%w: working directory %s is outside %s", agentproto.ErrEscape, cwd, root)
	}
	if err != nil {
		return "", oserr.Map(fmt.Errorf("working directory %s: %w", cwd, err))
	}
	defer unix.Close(fd)
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	return real, nil
}

// beneath is cwd relative to root ("." for the root itself); an absolute
// cwd must lie beneath root.
func beneath(root, cwd string) (string, error) {
	switch {
	case cwd == "":
		return ".", nil
	case !filepath.IsAbs(cwd):
		return cwd, nil
	}
	c := filepath.Clean(cwd)
	if c == root {
		return ".", nil
	}
	prefix := root
	if prefix != "/" {
		prefix += "/"
	}
	rel, ok := strings.CutPrefix(c, prefix)
	if !ok {
		return "", fmt.Errorf("%w: %s is outside %s", agentproto.ErrEscape, cwd, root)
	}
	return rel, nil
}

// lookPath finds file in path (the process's PATH, not the agent's).
func lookPath(file, path, dir string) (string, error) {
	check := func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%w: %s is not executable", agentproto.ErrPermission, p)
		}
		return nil
	}
	if strings.Contains(file, "/") {
		p := file
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := check(p); err != nil {
			return "", oserr.Map(fmt.Errorf("exec %s: %w", file, err))
		}
		return p, nil
	}
	for d := range strings.SplitSeq(path, ":") {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		if p := filepath.Join(d, file); check(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: exec %s: executable file not found in $PATH", agentproto.ErrNotFound, file)
}

// spawn starts cmd as a with the given stdin, stdout and stderr, inside
// cg when set. With check, the thread that forks resolves cmd first (as
// the user): a thread less per call.
func (s *Processes) spawn(a *account.Account, cmd *command, files [3]*os.File, setsid, check bool, cg *cgroup) (int, <-chan unix.WaitStatus, error) {
	attr := &syscall.ProcAttr{
		Env:   cmd.env,
		Files: []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd()},
		Sys: &syscall.SysProcAttr{
			Setsid:     setsid,
			Setpgid:    !setsid,
			Setctty:    cmd.tty, // Ctty 0: the terminal is its stdin
			Credential: a.Credential(),
		},
	}
	if cg != nil {
		// clone3 puts the child in the group as it is created: it never
		// runs a single instruction outside it.
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, cg.fd
	}
	var resolve func() error
	if check {
		resolve = func() error { return cmd.resolve(a) }
	}
	// An agent's child starts in its mount namespace with umask 077. The
	// reaper's lock covers only the fork.
	var ch <-chan unix.WaitStatus
	pid, err := account.ForkAsAgent(a, cmd.netns, resolve, func() (pid int, err error) {
		attr.Dir = cmd.dir
		pid, ch, err = s.reaper.Start(func() (int, error) { return syscall.ForkExec(cmd.path, cmd.argv, attr) })
		return pid, err
	})
	if err != nil {
		if check && cmd.path == "" {
			return 0, nil, err // resolve's, already in the protocol's terms
		}
		return 0, nil, oserr.Map(fmt.Errorf("exec %s: %w", cmd.argv[0], err))
	}
	return pid, ch, nil
}

// exitStatus converts a wait status to the protocol's form.
// waitLeader waits for the call's leader to exit and returns its status:
// it kills the leader at timeoutMillis (0: never) or when ctx ends, passes
// on the caller's signals, gives signals for the leader's children to
// child, and a terminal's new sizes to resize (nil without a terminal).
func waitLeader(ctx context.Context, timeoutMillis int64, exited <-chan unix.WaitStatus, eio agentproto.ExecIO,
	kill, child func(syscall.Signal), resize func(agentproto.Winsize)) agentproto.ExitStatus {
	var timeout <-chan time.Time
	if timeoutMillis > 0 {
		t := time.NewTimer(time.Duration(timeoutMillis) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	done := ctx.Done()
	timedOut := false
	for {
		select {
		case ws := <-exited:
			st := exitStatus(ws)
			st.TimedOut = timedOut
			return st
		case <-timeout:
			kill(syscall.SIGKILL)
			timedOut, timeout = true, nil
		case sig := <-eio.Signals:
			if sig > 0 && sig < 65 {
				kill(syscall.Signal(sig))
			}
		case sig := <-eio.ChildSignals:
			if sig > 0 && sig < 65 {
				child(syscall.Signal(sig))
			}
		case ws := <-eio.Resize: // nil channel without a terminal
			if resize != nil {
				resize(ws)
			}
		case <-done:
			kill(syscall.SIGKILL)
			done = nil
		}
	}
}

func exitStatus(ws unix.WaitStatus) agentproto.ExitStatus {
	st := agentproto.ExitStatus{Exited: true}
	switch {
	case ws.Exited():
		st.Code = ws.ExitStatus()
	case ws.Signaled():
		st.Signal = int(ws.Signal())
		st.Code = 128 + st.Signal
	}
	return st
}

// killGroup signals the process group led by pid; a group that is already
// gone is not an error.
func killGroup(pid int, sig syscall.Signal) {
	unix.Kill(-pid, sig)
}

// Exec runs a process in its own process group and streams its output.
func (s *Processes) Exec(ctx context.Context, req *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
	if req.TimeoutMillis < 0 {
		return agentproto.ExitStatus{}, fmt.Errorf("%w: negative timeout", agentproto.ErrInvalid)
	}
	a, err := s.account(req.User)
	if err != nil {
		return agentproto.ExitStatus{}, err
	}
	cmd, err := s.prepare(a, req)
	if err != nil {
		return agentproto.ExitStatus{}, err
	}
	// Every process of an agent's call lives in the call's own group,
	// which ends with the call: nothing it started, detached or not,
	// outlives it. Root's calls are the host's own (installs, set-up,
	// daemons it starts on purpose) and stay outside.
	var cg *cgroup
	if s.cfg.Cgroups != nil && a.UID != 0 {
		if cg, err = s.cfg.Cgroups.newGroup(a, req.Limits, "call"); err != nil {
			return agentproto.ExitStatus{}, err
		}
		defer s.endGroup(cg)
	}
	if req.Tty != nil {
		return s.execTTY(ctx, req, eio, a, cmd, cg)
	}

	// The child ends are closed right after the start; the parent ends by
	// the copiers' owners below.
	var stdin, stdinW *os.File
	if eio.Stdin != nil {
		if stdin, stdinW, err = os.Pipe(); err != nil {
			return agentproto.ExitStatus{}, err
		}
	} else if stdin, err = os.Open(os.DevNull); err != nil {
		return agentproto.ExitStatus{}, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(stdin, stdinW)
		return agentproto.ExitStatus{}, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(stdin, stdinW, outR, outW)
		return agentproto.ExitStatus{}, err
	}
	pid, exited, err := s.spawn(a, cmd, [3]*os.File{stdin, outW, errW}, false, true, cg)
	closeAll(stdin, outW, errW)
	if err != nil {
		closeAll(stdinW, outR, errR)
		return agentproto.ExitStatus{}, err
	}
	// kill signals the call's processes: the whole group when there is
	// one, so a process that left the process group is reached too.
	kill := func(sig syscall.Signal) {
		if cg != nil {
			if err := cg.signal(a, sig); err == nil {
				return
			}
		}
		killGroup(pid, sig)
	}
	// The Started response must precede any output frame.
	if err := eio.Started(pid); err != nil {
		kill(syscall.SIGKILL)
	}

	if stdinW != nil {
		go func() {
			io.Copy(stdinW, eio.Stdin)
			stdinW.Close()
		}()
	}
	d := &drainer{}
	var wg sync.WaitGroup
	for _, p := range []struct {
		r *os.File
		w io.Writer
	}{{outR, eio.Stdout}, {errR, eio.Stderr}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.copy(p.r, p.w)
		}()
	}

	st := waitLeader(ctx, req.TimeoutMillis, exited, eio, kill, func(sig syscall.Signal) {
		// A shell session's command: what the shell started goes, the
		// shell stays.
		if cg != nil {
			cg.signalChildren(a, pid, sig)
		}
	}, nil)
	if cg != nil {
		// The leader is gone; what it left behind goes now, which also
		// closes the pipes it held, so the drain below ends at once.
		var err error
		if st.Limit, err = cg.finish(); err != nil {
			s.log.Printf("%v", err)
			if st.Error == "" {
				st.Error = err.Error()
			}
		}
	}

	d.leaderExited(outR, errR)
	wg.Wait()
	closeAll(outR, errR)
	if stdinW != nil {
		stdinW.Close() // unblocks a copy into a pipe nobody reads
	}
	if err := d.err(); err != nil {
		st.Error = err.Error()
	}
	return st, nil
}

// endGroup ends a call's or background process's group, logging trouble.
func (s *Processes) endGroup(g *cgroup) error {
	err := g.end()
	if err != nil {
		s.log.Printf("%v", err)
	}
	return err
}

// drainer copies a process's output pipes to the caller as data arrives.
// Once the process has exited, reads time out after drainIdle of silence
// (and at the latest drainMax after the exit), so a background grandchild
// holding the pipe cannot keep the call open.
type drainer struct {
	mu       sync.Mutex
	exitedAt time.Time
	writeErr error
}

func (d *drainer) leaderExited(pipes ...*os.File) {
	d.mu.Lock()
	d.exitedAt = time.Now()
	d.mu.Unlock()
	for _, p := range pipes {
		p.SetReadDeadline(time.Now().Add(drainIdle))
	}
}

func (d *drainer) err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.writeErr
}

func (d *drainer) copy(r *os.File, w io.Writer) {
	buf := make([]byte, 32<<10)
	var werr error
	for {
		d.mu.Lock()
		exitedAt := d.exitedAt
		d.mu.Unlock()
		if !exitedAt.IsZero() {
			deadline := time.Now().Add(drainIdle)
			if last := exitedAt.Add(drainMax); last.Before(deadline) {
				deadline = last
			}
			r.SetReadDeadline(deadline)
		}
		n, err := r.Read(buf)
		if n > 0 && werr == nil {
			// After a write error keep reading, so the process never
			// blocks on a full pipe, but drop the data.
			if _, werr = w.Write(buf[:n]); werr != nil {
				d.mu.Lock()
				if d.writeErr == nil {
					d.writeErr = fmt.Errorf("sending output: %w", werr)
				}
				d.mu.Unlock()
			}
		}
		if err != nil {
			return // EOF, or the drain deadline passed
		}
	}
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// bgProc is a background process the agent started.
type bgProc struct {
	pid    int
	uid    int
	cg     *cgroup // its group in the user's background group; nil without cgroups
	done   chan struct{}
	status agentproto.ExitStatus // valid once done is closed
}

// bgTable keeps background processes and, for a while, their statuses.
type bgTable struct {
	mu       sync.Mutex
	procs    map[int]*bgProc
	finished []*bgProc // oldest first; bounded by maxFinished
}

// maxFinished bounds the exit statuses kept for Wait.
const maxFinished = 1024

func (t *bgTable) add(p *bgProc) {
	t.mu.Lock()
	t.procs[p.pid] = p
	t.mu.Unlock()
}

func (t *bgTable) finish(p *bgProc, st agentproto.ExitStatus) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p.status = st
	close(p.done)
	t.finished = append(t.finished, p)
	if len(t.finished) > maxFinished {
		old := t.finished[0]
		t.finished = t.finished[1:]
		if t.procs[old.pid] == old { // the pid may have been reused
			delete(t.procs, old.pid)
		}
	}
}

func (t *bgTable) get(pid int) *bgProc {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.procs[pid]
}

// StartBackground starts a detached process in its own session whose
// output is appended to a log file created with the user's identity. A
// timeout, when set, kills the whole session's process group.
func (s *Processes) StartBackground(ctx context.Context, req *agentproto.StartBackgroundRequest) (*agentproto.StartBackgroundResponse, error) {
	if err := s.checkLimit(req.User); err != nil {
		return nil, err
	}
	a, err := s.account(req.User)
	if err != nil {
		return nil, err
	}
	cmd, err := s.prepare(a, &req.ExecRequest)
	if err != nil {
		return nil, err
	}
	// Resolved before the log file is made, so a bad cwd leaves none.
	if _, err := account.RunAs(a, func() (struct{}, error) { return struct{}{}, cmd.resolve(a) }); err != nil {
		return nil, err
	}
	logPath, root := req.LogPath, req.Root
	if logPath == "" {
		// The default log lives in the home even when Root confines the
		// call's paths: it is the agent's choice, not the caller's.
		logPath = filepath.Join(a.Home, ".sandbox", "logs", strconv.FormatInt(time.Now().UnixNano(), 10)+".log")
		root = ""
	}
	type opened struct {
		f    *os.File
		path string // absolute, for the response
	}
	lf, err := files.InSpace(a, root, func(sp files.Space) (opened, error) {
		name, err := sp.Name(logPath)
		if err != nil {
			return opened{}, err
		}
		if req.LogPath == "" {
			if err := sp.FS().MkdirAll(filepath.Dir(name), 0o700); err != nil {
				return opened{}, err
			}
		}
		f, err := sp.FS().OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if sp.Root() != "" {
			name = filepath.Join(sp.Root(), name)
		}
		return opened{f, name}, err
	})
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	logFile := lf.f
	defer logFile.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer devNull.Close()
	// The process and all it starts live in a group of their own in the
	// user's background group, the only processes that outlive a call and
	// the only ones Signal reaches for the user.
	var cg *cgroup
	if s.cfg.Cgroups != nil && a.UID != 0 {
		if cg, err = s.cfg.Cgroups.newGroup(a, req.Limits, "bg"); err != nil {
			return nil, err
		}
	}
	pid, exited, err := s.spawn(a, cmd, [3]*os.File{devNull, logFile, logFile}, true, false, cg)
	if err != nil {
		if cg != nil {
			s.endGroup(cg)
		}
		return nil, err
	}
	p := &bgProc{pid: pid, uid: a.UID, cg: cg, done: make(chan struct{})}
	s.bg.add(p)
	go func() {
		var timeout <-chan time.Time
		if req.TimeoutMillis > 0 {
			t := time.NewTimer(time.Duration(req.TimeoutMillis) * time.Millisecond)
			defer t.Stop()
			timeout = t.C
		}
		timedOut := false
		for {
			select {
			case ws := <-exited:
				st := exitStatus(ws)
				st.TimedOut = timedOut
				if cg != nil {
					// What it started ends with it, as for a call.
					st.Limit = cg.limitHit()
					s.endGroup(cg)
				}
				s.bg.finish(p, st)
				return
			case <-timeout:
				if cg == nil || cg.kill() != nil {
					killGroup(pid, syscall.SIGKILL) // the session is its group
				}
				timedOut, timeout = true, nil
			}
		}
	}()
	return &agentproto.StartBackgroundResponse{Pid: pid, LogPath: lf.path}, nil
}

// Wait waits for a background process. Only root and the user who started
// it may wait for it.
func (s *Processes) Wait(ctx context.Context, req *agentproto.WaitRequest) (*agentproto.ExitStatus, error) {
	if req.TimeoutMillis < 0 {
		return nil, fmt.Errorf("%w: negative timeout", agentproto.ErrInvalid)
	}
	a, err := s.account(req.User)
	if err != nil {
		return nil, err
	}
	p := s.bg.get(req.Pid)
	if p == nil {
		return nil, fmt.Errorf("%w: no background process %d started by the agent", agentproto.ErrNotFound, req.Pid)
	}
	if a.UID != 0 && a.UID != p.uid {
		return nil, fmt.Errorf("%w: process %d belongs to another user", agentproto.ErrPermission, req.Pid)
	}
	select {
	case <-p.done:
		st := p.status
		return &st, nil
	default:
	}
	if req.TimeoutMillis == 0 {
		return &agentproto.ExitStatus{}, nil // poll: still running
	}
	t := time.NewTimer(time.Duration(req.TimeoutMillis) * time.Millisecond)
	defer t.Stop()
	select {
	case <-p.done:
		st := p.status
		return &st, nil
	case <-t.C:
		return &agentproto.ExitStatus{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Signal sends a signal with the identity's rights, so the kernel refuses
// to let one user signal another's processes.
func (s *Processes) Signal(ctx context.Context, req *agentproto.SignalRequest) (*agentproto.Empty, error) {
	if req.Pid <= 1 {
		return nil, fmt.Errorf("%w: pid %d", agentproto.ErrInvalid, req.Pid)
	}
	if req.Signal < 0 || req.Signal > 64 {
		return nil, fmt.Errorf("%w: signal %d", agentproto.ErrInvalid, req.Signal)
	}
	a, err := s.account(req.User)
	if err != nil {
		return nil, err
	}
	if s.cfg.Cgroups != nil && a.UID != 0 {
		return s.signalBackground(a, req)
	}
	if req.Group {
		err = account.KillGroupAs(a, req.Pid, syscall.Signal(req.Signal))
	} else {
		err = account.KillAs(a, req.Pid, syscall.Signal(req.Signal))
	}
	if err != nil {
		return nil, oserr.Map(fmt.Errorf("signal %d: %w", req.Pid, err))
	}
	return &agentproto.Empty{}, nil
}

// signalBackground signals a background process the user started, or with
// Group everything in its group: an agent's signals reach exactly its
// background processes, never a running call's.
func (s *Processes) signalBackground(a *account.Account, req *agentproto.SignalRequest) (*agentproto.Empty, error) {
	p := s.bg.get(req.Pid)
	if p != nil && p.uid != a.UID {
		return nil, fmt.Errorf("%w: process %d belongs to another user", agentproto.ErrPermission, req.Pid)
	}
	if p == nil || p.cg == nil {
		return nil, fmt.Errorf("%w: signal %d: no background process %d of %s", agentproto.ErrNotFound, req.Pid, req.Pid, a.Name)
	}
	select {
	case <-p.done:
		return nil, fmt.Errorf("%w: signal %d: background process %d has ended", agentproto.ErrNotFound, req.Pid, req.Pid)
	default:
	}
	if req.Signal == 0 {
		return &agentproto.Empty{}, nil
	}
	var err error
	if req.Group {
		err = p.cg.signal(a, syscall.Signal(req.Signal))
	} else {
		err = account.KillAs(a, req.Pid, syscall.Signal(req.Signal))
	}
	if err != nil {
		return nil, oserr.Map(fmt.Errorf("signal %d: %w", req.Pid, err))
	}
	return &agentproto.Empty{}, nil
}
