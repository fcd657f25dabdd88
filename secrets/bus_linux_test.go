package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoSessionBus: without a session bus the keychain is "not available"
// with the hint, and no bus is launched for it (the D-Bus library's
// autolaunch runs dbus-launch, whose daemons outlive the process).
func TestNoSessionBus(t *testing.T) {
	bin := t.TempDir()
	marker := filepath.Join(t.TempDir(), "launched")
	script := "#!/bin/sh\necho launched >" + marker + "\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "dbus-launch"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	empty := t.TempDir()
	old := runtimeDir
	runtimeDir = func() string { return empty }
	t.Cleanup(func() { runtimeDir = old })

	for _, addr := range []string{"", "autolaunch:"} {
		t.Run("address="+addr, func(t *testing.T) {
			t.Setenv("DBUS_SESSION_BUS_ADDRESS", addr)
			if addr == "" {
				os.Unsetenv("DBUS_SESSION_BUS_ADDRESS")
			}
			s := NewKeychain()
			err := s.Set("alice", "OPENAI_API_KEY", "sk-123456")
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "keychain is not available") || !strings.Contains(err.Error(), "D-Bus") {
				t.Errorf("Set without a bus: %v, want the keychain not available, with the hint", err)
			}
			if _, err := s.RemoveAll("alice"); !errors.Is(err, ErrUnavailable) {
				t.Errorf("RemoveAll without a bus: %v", err)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("dbus-launch was run: the keychain autolaunched a session bus")
			}
		})
	}
}

// TestServiceNameInTests: a test binary never uses the product's service
// name, so no test can touch a developer's real entries.
func TestServiceNameInTests(t *testing.T) {
	if ServiceName() == Service || ServiceName() != TestService {
		t.Fatalf("ServiceName() = %q in a test binary", ServiceName())
	}
}
