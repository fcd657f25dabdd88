// Package testkeyring starts a real Secret Service for tests: a private
// D-Bus session (dbus-run-session) with gnome-keyring-daemon holding an
// unlocked login keyring in a temporary home, so keychain code is tested
// against the real thing without touching the user's keyring.
package testkeyring

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/internal/testwait"
)

// DeadBus is a session bus address nothing listens on: processes given it
// find no keychain instead of reaching the developer's desktop session.
const DeadBus = "unix:path=/nonexistent/osaurus-sandbox-test-bus"

// Isolate points this process's session bus, and so every child's that
// inherits the environment, at DeadBus. Call it from TestMain of a package
// whose tests run code that may reach the keychain; Start then gives one
// test a private keyring of its own.
func Isolate() {
	os.Setenv("DBUS_SESSION_BUS_ADDRESS", DeadBus)
}

const hint = "install the test dependencies with `make deps-test` (scripts/install-deps.sh test: gnome-keyring, dbus-daemon, dbus-bin)"

// Start runs the keyring for the rest of the test and points this
// process's D-Bus session (DBUS_SESSION_BUS_ADDRESS) at it. Tests using it
// can't run in parallel with tests that need another session bus.
func Start(t testing.TB) {
	t.Helper()
	for _, bin := range []string{"dbus-run-session", "gnome-keyring-daemon"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not found: %s", bin, hint)
		}
	}
	home := t.TempDir()
	run := filepath.Join(home, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	// The daemon's parent returns once the keyring is unlocked and on the
	// bus; only then is the address printed, so reading it is the
	// readiness signal. cat keeps the session alive until stdin closes.
	cmd := exec.Command("dbus-run-session", "--", "sh", "-c",
		`printf %s test-keyring-password | gnome-keyring-daemon --unlock --components=secrets >/dev/null || exit 1
echo "$DBUS_SESSION_BUS_ADDRESS"
exec cat >/dev/null`)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"),
		"XDG_RUNTIME_DIR="+run, "XDG_CONFIG_HOME="+filepath.Join(home, "config"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("dbus-run-session: %v (%s)", err, hint)
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Logf("keyring session ended: %v %s", err, stderr.String())
		}
		// The daemon forked away from the session and outlives its bus:
		// stop it, and wait until it is gone, so no process is left and
		// TempDir's cleanup finds its files finished.
		for _, pid := range withEnv("HOME=" + home) {
			syscall.Kill(pid, syscall.SIGTERM)
		}
		testwait.Eventually(t, "the keyring daemon exits", 30*time.Second, 20*time.Millisecond, func() bool {
			return len(withEnv("HOME="+home)) == 0
		})
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr := strings.TrimSpace(line)
	if err != nil || addr == "" {
		stdin.Close()
		t.Fatalf("the keyring session did not start: %v; stderr: %s (%s)", err, stderr.String(), hint)
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", addr)
}

// withEnv lists the processes with env (KEY=VALUE) in their environment.
func withEnv(env string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if n := e.Name(); n[0] < '0' || n[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			if kv == env {
				if pid, err := strconv.Atoi(e.Name()); err == nil {
					pids = append(pids, pid)
				}
				break
			}
		}
	}
	return pids
}
