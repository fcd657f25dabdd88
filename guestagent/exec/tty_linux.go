//go:build linux

package exec

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"golang.org/x/sys/unix"
)

// openPty opens a new pseudo-terminal pair of size ws. The master is
// opened through the runtime's poller (its reads honour deadlines); the
// caller owns both ends.
func openPty(ws agentproto.Winsize) (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("pseudo-terminal: %w", err)
	}
	fail := func(err error) (*os.File, *os.File, error) {
		master.Close()
		return nil, nil, fmt.Errorf("pseudo-terminal: %w", err)
	}
	sc, err := master.SyscallConn()
	if err != nil {
		return fail(err)
	}
	var n int
	var ierr error
	if err := sc.Control(func(fd uintptr) {
		if ierr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ierr != nil {
			return
		}
		n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
	}); err != nil {
		return fail(err)
	}
	if ierr != nil {
		return fail(ierr)
	}
	if err := setWinsize(master, ws); err != nil {
		return fail(err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return fail(err)
	}
	return master, slave, nil
}

// setWinsize sets the terminal's size; the kernel sends SIGWINCH to its
// foreground process group.
func setWinsize(master *os.File, ws agentproto.Winsize) error {
	if ws.Rows == 0 || ws.Cols == 0 {
		return nil // unknown: keep what it has
	}
	sc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := sc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: ws.Rows, Col: ws.Cols})
	}); err != nil {
		return err
	}
	return ierr
}

// foreground is the terminal's foreground process group, or 0.
func foreground(master *os.File) int {
	sc, err := master.SyscallConn()
	if err != nil {
		return 0
	}
	pg := 0
	sc.Control(func(fd uintptr) {
		if n, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == nil {
			pg = n
		}
	})
	return pg
}

// killSession signals every process whose session is sid: a terminal's
// processes outside the cgroup of a call (root's), including jobs the
// shell moved to process groups of their own.
func killSession(sid int, sig syscall.Signal) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 {
			continue
		}
		if s, ok := sessionOf(pid); ok && s == sid {
			unix.Kill(pid, sig)
		}
	}
}

// sessionOf reads a process's session id from /proc/PID/stat.
func sessionOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name may hold spaces and parentheses: fields count
	// from the last ')'. After it: state, ppid, pgrp, session.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 4 {
		return 0, false
	}
	sid, err := strconv.Atoi(f[3])
	return sid, err == nil
}

// signalChildren signals every process of the call but its leader: a
// shell session's running command with what it started, not the shell.
// The shell may be forking the next part of a pipeline as we go, so the
// group is read again until nothing but the leader is left (or a few
// rounds passed).
func (g *cgroup) signalChildren(a *account.Account, leader int, sig syscall.Signal) {
	for range 5 {
		pids, err := g.procs()
		if err != nil {
			return
		}
		others := 0
		for _, pid := range pids {
			if pid != leader {
				account.KillAs(a, pid, sig)
				others++
			}
		}
		if others == 0 || sig != syscall.SIGKILL {
			return
		}
		time.Sleep(20 * time.Millisecond) // let the kills land before looking again
	}
}

// execTTY runs cmd on a pseudo-terminal as the leader of a session of its
// own (Exec with req.Tty): the terminal is its stdin, stdout and stderr,
// so job control, Ctrl-C and Ctrl-Z work as at a console. Everything it
// started ends with it, or when the caller goes away.
func (s *Processes) execTTY(ctx context.Context, req *agentproto.ExecRequest, eio agentproto.ExecIO, a *account.Account, cmd *command, cg *cgroup) (agentproto.ExitStatus, error) {
	master, slave, err := openPty(*req.Tty)
	if err != nil {
		return agentproto.ExitStatus{}, err
	}
	defer master.Close()
	cmd.tty = true
	pid, exited, err := s.spawn(a, cmd, [3]*os.File{slave, slave, slave}, true, true, cg)
	slave.Close()
	if err != nil {
		return agentproto.ExitStatus{}, err
	}
	kill := func(sig syscall.Signal) {
		if cg != nil && cg.signal(a, sig) == nil {
			return
		}
		killSession(pid, sig)
	}
	if err := eio.Started(pid); err != nil {
		kill(syscall.SIGKILL)
	}
	if eio.Stdin != nil {
		// Ends with an error once the master is closed below.
		go io.Copy(master, eio.Stdin)
	}
	d := &drainer{}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		d.copy(master, eio.Stdout) // EIO once no process holds the terminal
	}()
	st := waitLeader(ctx, req.TimeoutMillis, exited, eio, kill, func(sig syscall.Signal) {
		// The foreground job, when it is not the shell itself.
		if pg := foreground(master); pg > 1 && pg != pid {
			account.KillGroupAs(a, pg, sig)
		}
	}, func(ws agentproto.Winsize) { setWinsize(master, ws) })
	if cg != nil {
		var err error
		if st.Limit, err = cg.finish(); err != nil {
			s.log.Printf("%v", err)
			if st.Error == "" {
				st.Error = err.Error()
			}
		}
	} else {
		// Root's terminal has no group of its own: what its session
		// still runs (jobs, nohup) ends with it all the same.
		killSession(pid, syscall.SIGKILL)
	}
	d.leaderExited(master)
	<-drained
	return st, nil
}
