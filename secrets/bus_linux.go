package secrets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// runtimeDir is where a desktop session's bus socket lives; a variable so
// tests can point it at a folder of their own.
var runtimeDir = func() string { return filepath.Join("/run/user", strconv.Itoa(os.Getuid())) }

// errNoBus: no session bus is running. The D-Bus library would then start
// one with dbus-launch, and that daemon (and the keyring it spawns) would
// outlive this process; so the keychain is simply not available.
var errNoBus = errors.New("no D-Bus session bus is running (DBUS_SESSION_BUS_ADDRESS is unset)")

// checkBus refuses to reach the keychain when the only way to a session
// bus would be launching one: the same discovery the D-Bus library does,
// minus its autolaunch.
func checkBus() error {
	if a := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" {
		for _, part := range strings.Split(a, ";") {
			if strings.HasPrefix(part, "autolaunch:") {
				return fmt.Errorf("%w: DBUS_SESSION_BUS_ADDRESS asks for autolaunch, which would leave a bus daemon running; %s", ErrUnavailable, hint())
			}
		}
		return nil
	}
	dir := runtimeDir()
	for _, f := range []string{"bus", "dbus-session"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: %w; %s", ErrUnavailable, errNoBus, hint())
}
