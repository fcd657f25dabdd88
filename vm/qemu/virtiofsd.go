//go:build linux

package qemu

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/osaurus/osaurus-sandbox/vm"
)

// helper is a running virtiofsd.
type helper struct {
	share   vm.Share
	cmd     *exec.Cmd
	log     *tailBuffer
	exited  chan struct{}
	waitErr error
	once    sync.Once
}

// flavors caches virtiofsdFlavor per binary: asking costs a process start
// on every boot's critical path.
var flavors sync.Map // path → flavor

// virtiofsdFlavor tells the C virtiofsd (QEMU ≤ 7) from the Rust one; they
// take different flags.
func virtiofsdFlavor(path string) string {
	key := path
	if st, err := os.Stat(path); err == nil {
		// An upgrade in place replaces the binary: key on its identity too.
		key = fmt.Sprintf("%s\x00%d\x00%d", path, st.Size(), st.ModTime().UnixNano())
	}
	if f, ok := flavors.Load(key); ok {
		return f.(string)
	}
	f := askVirtiofsdFlavor(path)
	flavors.Store(key, f)
	return f
}

func askVirtiofsdFlavor(path string) string {
	out, _ := exec.Command(path, "--version").CombinedOutput()
	if strings.Contains(string(out), "using FUSE kernel interface") || strings.Contains(strings.ToLower(string(out)), "virtiofsd version") {
		return "c"
	}
	return "rust"
}

func virtiofsdArgs(flavor, sock, dir string) []string {
	if flavor == "c" {
		return []string{"--socket-path=" + sock, "-o", "source=" + dir, "-o", "cache=auto", "-o", "announce_submounts"}
	}
	sandbox := "namespace"
	if os.Geteuid() != 0 {
		// Unprivileged: no namespaces to set up; the host folder is ours.
		sandbox = "none"
	}
	return []string{"--socket-path=" + sock, "--shared-dir=" + dir, "--cache=auto", "--sandbox=" + sandbox, "--announce-submounts"}
}

func startVirtiofsd(ctx context.Context, path string, sh vm.Share, sock, pidFile string, killWithParent bool) (*helper, error) {
	h := &helper{share: sh, log: newTailBuffer(4 << 10), exited: make(chan struct{})}
	h.cmd = exec.Command(path, virtiofsdArgs(virtiofsdFlavor(path), sock, sh.HostPath)...)
	h.cmd.Stdout = h.log
	h.cmd.Stderr = h.log
	h.cmd.SysProcAttr = sysProcAttr(killWithParent)
	if err := h.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start virtiofsd for %s: %w", sh.GuestPath, err)
	}
	// The pid file lets a later run of the app find this virtiofsd if the
	// app dies while the VM runs.
	os.WriteFile(pidFile, []byte(strconv.Itoa(h.cmd.Process.Pid)+"\n"), 0o644)
	go func() {
		h.waitErr = h.cmd.Wait()
		os.Remove(pidFile)
		close(h.exited)
	}()
	// QEMU must find the socket when it starts.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			return h, nil
		}
		select {
		case <-h.exited:
			return nil, fmt.Errorf("virtiofsd for %s exited at start: %v%s", sh.GuestPath, h.waitErr, h.log.summary())
		case <-ctx.Done():
			h.stop()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			h.stop()
			return nil, fmt.Errorf("virtiofsd for %s did not create its socket in 10s%s", sh.GuestPath, h.log.summary())
		}
	}
}

// stop ends virtiofsd: politely, then firmly.
func (h *helper) stop() {
	h.once.Do(func() {
		h.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-h.exited:
		case <-time.After(2 * time.Second):
			h.cmd.Process.Kill()
			<-h.exited
		}
	})
}
