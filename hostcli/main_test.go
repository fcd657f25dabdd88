package hostcli

import (
	"os"
	"testing"

	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
)

// TestMain keeps every test off the developer's session bus: commands that
// reach the keychain find none, unless a test starts its own keyring.
func TestMain(m *testing.M) {
	testkeyring.Isolate()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
