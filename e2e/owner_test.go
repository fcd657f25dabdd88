//go:build linux

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

// ownerSetup gives a test its own provisioned data dir and the real
// binary. Nothing is left running when the test ends.
func ownerSetup(t *testing.T, autoStart bool) (cliRun, config.Paths) {
	t.Helper()
	requireGuest(t)
	srv := newSwitchableServer(t)
	p := copyContainer(t)
	cfg := testConfig(t)
	cfg.ImageManifest = srv.URL + "/manifest.json"
	cfg.AutoStart = autoStart
	if a := os.Getenv("OSAURUS_TEST_ACCEL"); a != "" {
		cfg.Accel = a
	}
	if err := config.SaveSandbox(p.SandboxJSON(), cfg); err != nil {
		t.Fatal(err)
	}
	c := cliRun{t: t, bin: buildCLI(t), home: p.Root}
	t.Cleanup(func() {
		c.run("stop")
		if n := countQEMU(p) + countProcs(p, "virtiofsd"); n != 0 {
			t.Errorf("%d QEMU or virtiofsd processes left after the test", n)
		}
	})
	return c, p
}

func (c cliRun) status() api.Status {
	c.t.Helper()
	var st api.Status
	out := c.ok("status", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		c.t.Fatalf("status --json: %v: %s", err, out)
	}
	return st
}

// serveProc runs `osaurus-sandbox serve` and waits until it owns the data
// dir.
func (c cliRun) serveProc() (*exec.Cmd, chan struct{}) {
	c.t.Helper()
	cmd := exec.Command(c.bin, "serve")
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+c.home)
	cmd.Stdout, cmd.Stderr = testLog{c.t, "serve: "}, testLog{c.t, "serve: "}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	c.t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	waitFor(c.t, "serve to own the sandbox", 30*time.Second, func() bool { return c.status().Owner == "serve" })
	return cmd, exited
}

func noneLeft(t *testing.T, p config.Paths, after string) {
	t.Helper()
	if n := countQEMU(p) + countProcs(p, "virtiofsd"); n != 0 {
		t.Fatalf("after %s: %d QEMU or virtiofsd processes still run", after, n)
	}
}

// TestOwnerDeath: a wedged guest shows in `status` within seconds; then
// the owner is killed with SIGKILL in the middle of a call; `status` says
// the VM still runs (adoptable, with its pid), and `stop` adopts and stops
// it, leaving nothing running. Then SIGTERM to `serve` stops the VM it
// owns, as Quit does.
func TestOwnerDeath(t *testing.T) {
	c, p := ownerSetup(t, false)
	srv, exited := c.serveProc()
	c.ok("start")
	st := c.status()
	if st.State != control.Running || st.Pid == 0 {
		t.Fatalf("after start: %+v", st)
	}
	qemuPid := st.Pid

	// Freeze QEMU: the process lives, the guest answers nothing.
	if err := syscall.Kill(qemuPid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	waitFor(t, "the guest to be reported unresponsive", time.Minute, func() bool { return c.status().Unresponsive != nil })
	t.Logf("unresponsive reported %s after the guest froze", time.Since(frozen).Round(100*time.Millisecond))
	if out := c.ok("status"); !strings.Contains(out, "NOT RESPONDING") {
		t.Errorf("status of a frozen guest: %s", out)
	}
	syscall.Kill(qemuPid, syscall.SIGCONT)
	waitFor(t, "the guest to answer again", time.Minute, func() bool { return c.status().Unresponsive == nil })

	// A call in flight through the owner.
	call := exec.Command(c.bin, "exec", "--", "sh", "-c", "echo started; sleep 600")
	call.Env = append(os.Environ(), config.HomeEnv+"="+c.home)
	out, err := call.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := call.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("exec: %q %v", line, err)
	}
	srv.Process.Kill() // SIGKILL: no chance to stop the VM
	<-exited
	if err := call.Wait(); err == nil {
		t.Error("the call in flight succeeded although its owner died")
	}

	st = c.status()
	if st.State != control.Running || !st.Adoptable || st.Owner != "none" || st.Pid != qemuPid || st.Since.IsZero() {
		t.Fatalf("status after the owner died: %+v; want running, adoptable, pid %d", st, qemuPid)
	}
	if text := c.ok("status"); !strings.Contains(text, "adoptable") || !strings.Contains(text, strconv.Itoa(qemuPid)) {
		t.Errorf("status text: %s", text)
	}
	if text := c.ok("stop"); !strings.Contains(text, "stopped") || !strings.Contains(text, fmt.Sprintf("pid %d", qemuPid)) {
		t.Errorf("stop: %s", text)
	}
	noneLeft(t, p, "stop")
	if st := c.status(); st.State != control.Stopped || st.Adoptable {
		t.Fatalf("status after stop: %+v", st)
	}

	// SIGTERM to serve stops the VM cleanly and ends serve.
	srv, exited = c.serveProc()
	c.ok("start")
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("serve did not exit after SIGTERM")
	}
	if code := srv.ProcessState.ExitCode(); code != 0 {
		t.Errorf("serve exited with %d after SIGTERM", code)
	}
	noneLeft(t, p, "SIGTERM to serve")
	if st := c.status(); st.State != control.Stopped || st.Owner != "none" {
		t.Fatalf("status after SIGTERM: %+v", st)
	}
}

// TestWindowQuits: on a desktop without a tray host (plain Xvfb, no
// session bus), closing the window quits the app rather than hiding it;
// SIGTERM to the window stops the VM it owns, as Quit does.
func TestWindowQuits(t *testing.T) {
	for _, tool := range []string{"Xvfb", "xdotool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: apt-get install -y xvfb xdotool", tool)
		}
	}
	c, p := ownerSetup(t, true)
	display := startXvfb(t)
	xenv := append(os.Environ(), "DISPLAY="+display, "FYNE_SCALE=1", config.HomeEnv+"="+p.Root,
		// No session bus, so no tray host.
		"DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent/bus", "XDG_RUNTIME_DIR="+t.TempDir())
	window := func() (*exec.Cmd, chan struct{}, uint32) {
		t.Helper()
		app := exec.Command(c.bin)
		app.Env = xenv
		app.Stdout, app.Stderr = testLog{t, "window: "}, testLog{t, "window: "}
		if err := app.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { app.Wait(); close(exited) }()
		t.Cleanup(func() { app.Process.Kill(); <-exited })
		var win uint64
		waitFor(t, "the window", time.Minute, func() bool {
			cmd := exec.Command("xdotool", "search", "--name", "Osaurus Sandbox")
			cmd.Env = xenv
			out, _ := cmd.Output()
			if f := strings.Fields(string(out)); len(f) > 0 {
				win, _ = strconv.ParseUint(f[0], 10, 32)
			}
			return win != 0
		})
		return app, exited, uint32(win)
	}
	exitedWithin := func(exited chan struct{}, what string) {
		t.Helper()
		select {
		case <-exited:
		case <-time.After(2 * time.Minute):
			t.Fatalf("the app did not exit after %s", what)
		}
	}

	// autoStart: the window's process owns and starts the VM.
	app, exited, _ := window()
	waitFor(t, "the window's VM to run", 5*time.Minute, func() bool {
		st := c.status()
		return st.Owner == "app" && st.State == control.Running
	})
	t.Logf("running: %+v", c.status())
	if err := app.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exitedWithin(exited, "SIGTERM")
	if code := app.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	noneLeft(t, p, "SIGTERM to the window")

	// Closing the window without a tray host quits (with autoStart off,
	// there is no VM to wait for).
	cfg, err := config.LoadSandbox(p.SandboxJSON())
	if err != nil {
		t.Fatal(err)
	}
	cfg.AutoStart = false
	if err := config.SaveSandbox(p.SandboxJSON(), cfg); err != nil {
		t.Fatal(err)
	}
	_, exited, win := window()
	waitFor(t, "the window to own the sandbox", 30*time.Second, func() bool { return c.status().Owner == "app" })
	if err := closeWindow(display, win); err != nil {
		t.Fatal(err)
	}
	exitedWithin(exited, "closing its window")
	if st := c.status(); st.Owner != "none" || st.State != control.Stopped {
		t.Fatalf("after closing the window: %+v", st)
	}
}

// TestOwnerMCPPortTaken: the owner serves MCP over HTTP on the port the
// mcpPort setting names, and when another program has it, `status` says
// so with the fix instead of the owner silently going without.
func TestOwnerMCPPortTaken(t *testing.T) {
	c, _ := ownerSetup(t, false)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	c.ok("config", "set", "mcpPort", strconv.Itoa(port))
	serve, exited := c.serveProc()
	st := c.status()
	if st.MCPURL != "" || !strings.Contains(st.MCPError, "config set mcpPort") || !strings.Contains(st.MCPError, strconv.Itoa(port)) {
		t.Fatalf("status with the port taken: url %q, error %q; want the error naming the port and the fix", st.MCPURL, st.MCPError)
	}
	if out := c.ok("status"); !strings.Contains(out, "mcp: MCP over HTTP is off") {
		t.Errorf("status does not say MCP over HTTP is off: %q", out)
	}
	serve.Process.Signal(syscall.SIGTERM)
	<-exited

	// A free port: served there, and agent show's snippet names it.
	free := freePort(t)
	c.ok("config", "set", "mcpPort", strconv.Itoa(free))
	c.serveProc()
	want := fmt.Sprintf("http://127.0.0.1:%d/mcp", free)
	if st := c.status(); st.MCPURL != want || st.MCPError != "" {
		t.Fatalf("status with a free port: url %q, error %q; want %s", st.MCPURL, st.MCPError, want)
	}
	c.ok("agent", "add", "porter")
	if out := c.ok("agent", "show", "porter"); !strings.Contains(out, want) {
		t.Errorf("agent show does not name the configured port %d:\n%s", free, out)
	}
}
