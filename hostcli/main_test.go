package hostcli

import (
	"os"
	"testing"

	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
)

// TestMain keeps every test off the developer's session bus: commands that
// reach the keychain find none, unless a test starts its own keyring.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "standin-ssh" {
		os.Exit(standInSSH(os.Args[2:]))
	}
	testkeyring.Isolate()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
