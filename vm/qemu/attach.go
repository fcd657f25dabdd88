//go:build linux

package qemu

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/vm"
)

// Attach implements vm.Attacher: it adopts a QEMU that an earlier run of
// the app started from spec.RunDir and left running (the app crashed or was
// killed). The guest agent serves a new session once the old one's socket
// closed, so the adopted VM is as good as a fresh one.
func (d *Driver) Attach(ctx context.Context, spec vm.Spec) (vm.Process, error) {
	l := newLayout(spec.RunDir, len(spec.Shares))
	pid := livePid(l.pidFile)
	if pid == 0 {
		return nil, vm.ErrNoVM
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil, fmt.Errorf("%w: reading qemu %d: %v", vm.ErrNoVM, pid, err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	// Only adopt the QEMU of this data dir.
	if !bytes.Contains(cmdline, []byte(l.pidFile)) {
		return nil, fmt.Errorf("%w: pid %d does not belong to %s", vm.ErrNoVM, pid, spec.RunDir)
	}
	qp, err := os.FindProcess(pid)
	if err != nil {
		return nil, err
	}
	pl := plan{layout: l, accel: vm.AccelTCG}
	for _, a := range args {
		if strings.Contains(a, "accel=kvm") {
			pl.accel = vm.AccelKVM
		}
		if strings.HasPrefix(a, "microvm,") {
			pl.machine = vm.MachineMicroVM
		}
		for _, dev := range []string{"vhost-vsock-pci,guest-cid=", "vhost-vsock-device,guest-cid="} {
			if _, cid, ok := strings.Cut(a, dev); ok {
				n, _ := strconv.ParseUint(cid, 10, 32)
				pl.vsockCID = uint32(n)
			}
		}
	}
	timeout := d.cfg.TCGBootTimeout
	if pl.accel == vm.AccelKVM {
		timeout = d.cfg.KVMBootTimeout
	}
	transport := "virtio-serial"
	if pl.vsockCID != 0 {
		transport = "vsock"
	}
	var reason string
	if pl.accel == vm.AccelTCG {
		d.mu.Lock()
		reason = d.broke.Reason
		d.mu.Unlock()
	}
	p := &process{
		plan:    pl,
		qemu:    qp,
		qemuLog: newTailBuffer(1024),
		done:    make(chan struct{}),
		info: vm.ProcessInfo{
			Driver: "qemu", Accel: pl.accel, Transport: transport, Pid: pid,
			// The guest is already up; only the new session is awaited.
			BootTimeout: min(timeout, 30*time.Second),
			AccelReason: reason,
		},
	}
	var fsPids []int
	for _, f := range l.fsPids {
		if b, err := os.ReadFile(f); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && syscall.Kill(n, 0) == nil {
				fsPids = append(fsPids, n)
			}
		}
	}
	go func() {
		waitPid(pid)
		p.mu.Lock()
		if p.err == nil && p.killed {
			p.err = errKilled
		} else if p.err == nil {
			p.err = fmt.Errorf("qemu (pid %d, adopted) exited", pid)
		}
		p.mu.Unlock()
		for _, fp := range fsPids {
			syscall.Kill(fp, syscall.SIGTERM)
		}
		for _, fp := range fsPids {
			waitPidFor(fp, 2*time.Second)
			syscall.Kill(fp, syscall.SIGKILL)
		}
		os.Remove(l.pidFile)
		for _, f := range l.fsPids {
			os.Remove(f)
		}
		close(p.done)
	}()
	// An owner that died while the VM slept left it paused: the new
	// session needs it running (cont on a running VM does nothing).
	// On failure the handshake's timeout says the rest.
	p.Resume(ctx)
	return p, nil
}

// waitPid blocks until a process that is not our child exits.
func waitPid(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		for syscall.Kill(pid, 0) == nil {
			time.Sleep(250 * time.Millisecond)
		}
		return
	}
	defer unix.Close(fd)
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err == nil || err != unix.EINTR {
			return
		}
	}
}

func waitPidFor(pid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// Leftover reports the QEMU of runDir that is still running without an
// owner (the app that started it died): its pid and when it started, or
// pid 0. It only looks; Attach adopts.
func Leftover(runDir string) (pid int, since time.Time) {
	pidFile := filepath.Join(runDir, "qemu.pid")
	pid = livePid(pidFile)
	if pid == 0 {
		return 0, time.Time{}
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || !bytes.Contains(cmdline, []byte(pidFile)) {
		return 0, time.Time{} // a recycled pid, or another data dir's VM
	}
	if fi, err := os.Stat(pidFile); err == nil {
		since = fi.ModTime()
	}
	return pid, since
}

// Helpers returns the pids of runDir's processes that still run: QEMU and
// every virtiofsd, from their pid files. After a stop it must be empty.
func Helpers(runDir string) []int {
	var out []int
	if pid := livePid(filepath.Join(runDir, "qemu.pid")); pid != 0 {
		out = append(out, pid)
	}
	files, _ := filepath.Glob(filepath.Join(runDir, "fs*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || n <= 0 || syscall.Kill(n, 0) != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(n), "comm"))
		if bytes.HasPrefix(comm, []byte("virtiofsd")) {
			out = append(out, n)
		}
	}
	return out
}
