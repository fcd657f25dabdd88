//go:build linux

package qemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mdlayher/vsock"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/vm"
)

type processConfig struct {
	qemu, virtiofsd string
	spec            vm.Spec
	plan            plan
	autoAccel       bool
	accelReason     string
	bootTimeout     time.Duration
	killWithParent  bool
}

// process is one running QEMU plus its virtiofsd helpers.
type process struct {
	plan      plan
	autoAccel bool
	info      vm.ProcessInfo
	qemu      *os.Process
	qemuLog   *tailBuffer

	done chan struct{}

	mu     sync.Mutex
	err    error // first failure
	killed bool
}

var _ vm.Pauser = (*process)(nil)

// errKilled is the exit reason of a VM stopped with Kill.
var errKilled = errors.New("killed on request")

// ErrAlreadyRunning: another QEMU still uses this run dir (and disk).
var ErrAlreadyRunning = agentproto.Class(agentproto.ErrExists, "a VM is already running from this data dir")

func startProcess(ctx context.Context, c processConfig) (*process, error) {
	l := c.plan.layout
	if pid := livePid(l.pidFile); pid != 0 {
		return nil, fmt.Errorf("%w (qemu pid %d); stop it first", ErrAlreadyRunning, pid)
	}
	for _, s := range append([]string{l.agentSock, l.qmpSock, l.pidFile}, l.fsSocks...) {
		os.Remove(s)
	}
	p := &process{
		plan:      c.plan,
		autoAccel: c.autoAccel,
		done:      make(chan struct{}),
		qemuLog:   newTailBuffer(8 << 10),
	}
	transport := "virtio-serial"
	if c.plan.vsockCID != 0 {
		transport = "vsock"
	}
	helpers, err := startHelpers(ctx, c, l)
	if err != nil {
		return nil, err
	}
	cleanup := func() {
		for _, h := range helpers {
			h.stop()
		}
	}
	cmd := exec.Command(c.qemu, c.plan.args(c.spec)...)
	cmd.Stdout = p.qemuLog
	cmd.Stderr = p.qemuLog
	cmd.SysProcAttr = sysProcAttr(c.killWithParent)
	started := time.Now()
	if err := cmd.Start(); err != nil {
		cleanup()
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	p.qemu = cmd.Process
	p.info = vm.ProcessInfo{
		Driver:      "qemu",
		Accel:       c.plan.accel,
		Transport:   transport,
		Pid:         cmd.Process.Pid,
		BootTimeout: c.bootTimeout,
		AccelReason: c.accelReason,

		HypervisorStarted: started,
	}

	qemuExited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		if p.err == nil {
			switch {
			case p.killed:
				p.err = errKilled
			case err != nil:
				p.err = fmt.Errorf("qemu exited: %v%s", err, p.qemuLog.summary())
			}
		}
		p.mu.Unlock()
		close(qemuExited)
	}()
	var wg sync.WaitGroup
	for _, h := range helpers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-h.exited:
				// A share without its server is a broken VM: stop it so the
				// failure is seen at once instead of as hung file access.
				p.mu.Lock()
				if p.err == nil && !p.killed {
					p.err = fmt.Errorf("virtiofsd for %s exited: %v%s", h.share.GuestPath, h.waitErr, h.log.summary())
				}
				p.mu.Unlock()
				p.qemu.Kill()
			case <-qemuExited:
				h.stop()
			}
		}()
	}
	go func() {
		<-qemuExited
		wg.Wait()
		os.Remove(l.pidFile)
		close(p.done)
	}()
	return p, nil
}

// startHelpers starts one virtiofsd per share, all at once (each is a
// process start), each on a socket that listens before QEMU starts.
func startHelpers(ctx context.Context, c processConfig, l layout) ([]*helper, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	helpers := make([]*helper, len(c.spec.Shares))
	errs := make([]error, len(c.spec.Shares))
	var wg sync.WaitGroup
	for i, sh := range c.spec.Shares {
		wg.Add(1)
		go func() {
			defer wg.Done()
			helpers[i], errs[i] = startVirtiofsd(c.virtiofsd, sh, l.fsSocks[i], l.fsPids[i], c.killWithParent)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, h := range helpers {
			if h != nil {
				h.stop()
			}
		}
		return nil, err
	}
	return helpers, nil
}

// DialAgent implements vm.Process.
func (p *process) DialAgent(ctx context.Context) (net.Conn, error) {
	if p.plan.vsockCID != 0 {
		return vsock.Dial(p.plan.vsockCID, AgentVsockPort, nil)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", p.plan.layout.agentSock)
	if err != nil {
		return nil, err
	}
	// The virtio-serial port outlives every session on it: claim it, so
	// a session an earlier owner left in the guest gives way to this one.
	c, err := agentproto.ClaimStream(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// RequestStop implements vm.Process: an ACPI power-button press.
func (p *process) RequestStop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return qmpCommand(ctx, p.plan.layout.qmpSock, "system_powerdown")
}

// Pause implements vm.Pauser: QMP stop.
func (p *process) Pause(ctx context.Context) error {
	return qmpCommand(ctx, p.plan.layout.qmpSock, "stop")
}

// Resume implements vm.Pauser: QMP cont.
func (p *process) Resume(ctx context.Context) error {
	return qmpCommand(ctx, p.plan.layout.qmpSock, "cont")
}

// Kill implements vm.Process.
func (p *process) Kill() error {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.qemu.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill qemu: %w", err)
	}
	return nil
}

// Done implements vm.Process.
func (p *process) Done() <-chan struct{} { return p.done }

// Err implements vm.Process.
func (p *process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Info implements vm.Process.
func (p *process) Info() vm.ProcessInfo { return p.info }

func sysProcAttr(killWithParent bool) *syscall.SysProcAttr {
	// Own process group: a Ctrl-C in the terminal that started the app
	// must not kill the VM behind the app's back.
	a := &syscall.SysProcAttr{Setpgid: true}
	if killWithParent {
		a.Pdeathsig = syscall.SIGKILL
	}
	return a
}

// livePid returns the pid in a QEMU pid file if that process still runs.
func livePid(pidFile string) int {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if syscall.Kill(pid, 0) != nil {
		return 0
	}
	comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if !bytes.HasPrefix(comm, []byte("qemu")) {
		return 0
	}
	return pid
}

// tailBuffer keeps the last bytes a helper printed, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// summary is the last few lines, formatted to follow an error message.
func (t *tailBuffer) summary() string {
	s := strings.TrimSpace(t.String())
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return ": " + strings.Join(lines, " | ")
}
