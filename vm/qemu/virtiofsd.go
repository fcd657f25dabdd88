//go:build linux

package qemu

import (
	"fmt"
	"net"
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

// virtiofsdArgs are the flags for a virtiofsd serving dir on the
// listening socket it inherits as fd 3 (listenFD).
func virtiofsdArgs(flavor, dir string) []string {
	fd := "--fd=" + strconv.Itoa(listenFD)
	if flavor == "c" {
		return []string{fd, "-o", "source=" + dir, "-o", "cache=auto", "-o", "announce_submounts"}
	}
	sandbox := "namespace"
	if os.Geteuid() != 0 {
		// Unprivileged: no namespaces to set up; the host folder is ours.
		sandbox = "none"
	}
	return []string{fd, "--shared-dir=" + dir, "--cache=auto", "--sandbox=" + sandbox, "--announce-submounts"}
}

// listenFD is the vhost-user socket's descriptor in virtiofsd: the first
// of ExtraFiles.
const listenFD = 3

// startVirtiofsd starts a virtiofsd for sh on a socket at sock. The socket
// is made here and handed over already listening, so QEMU can start at
// once: its connection waits in the backlog until virtiofsd accepts it,
// instead of QEMU waiting for virtiofsd to create the socket.
func startVirtiofsd(path string, sh vm.Share, sock, pidFile string, killWithParent bool) (*helper, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("virtiofsd socket for %s: %w", sh.GuestPath, err)
	}
	// The socket file stays for QEMU; our descriptor goes to virtiofsd.
	ln.SetUnlinkOnClose(false)
	lf, err := ln.File()
	ln.Close()
	if err != nil {
		os.Remove(sock)
		return nil, fmt.Errorf("virtiofsd socket for %s: %w", sh.GuestPath, err)
	}
	defer lf.Close()
	h := &helper{share: sh, log: newTailBuffer(4 << 10), exited: make(chan struct{})}
	h.cmd = exec.Command(path, virtiofsdArgs(virtiofsdFlavor(path), sh.HostPath)...)
	h.cmd.ExtraFiles = []*os.File{lf}
	h.cmd.Stdout = h.log
	h.cmd.Stderr = h.log
	h.cmd.SysProcAttr = sysProcAttr(killWithParent)
	if err := h.cmd.Start(); err != nil {
		os.Remove(sock)
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
	return h, nil
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
