//go:build linux

package ui

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"

	"github.com/godbus/dbus/v5"
)

// hasTrayHost asks a real (private) session bus: no tray host until a
// process owns the StatusNotifierWatcher name, and no bus at all is no
// tray either.
func TestHasTrayHost(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir()) // no /run/user/<uid>/bus to discover
	if hasTrayHost() {
		t.Fatal("a tray host without a session bus")
	}

	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		t.Fatal("dbus-daemon not found: apt-get install -y dbus")
	}
	daemon := exec.Command("dbus-daemon", "--session", "--nofork", "--print-address=1")
	out, err := daemon.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { daemon.Process.Kill(); daemon.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", strings.TrimSpace(addr))
	if hasTrayHost() {
		t.Fatal("a tray host on a bus where nobody owns " + statusNotifierWatcher)
	}

	conn, err := dbus.SessionBusPrivateNoAutoStartup()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Auth(nil); err != nil {
		t.Fatal(err)
	}
	if err := conn.Hello(); err != nil {
		t.Fatal(err)
	}
	if r, err := conn.RequestName(statusNotifierWatcher, dbus.NameFlagDoNotQueue); err != nil || r != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("claiming the watcher name: %v %v", r, err)
	}
	if !hasTrayHost() {
		t.Fatal("no tray host though " + statusNotifierWatcher + " is owned")
	}
}
