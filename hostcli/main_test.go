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
	if len(os.Args) > 1 && os.Args[1] == "standin-far" {
		// The far side's osaurus-sandbox (remote_agents_test.go).
		os.Exit(Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr, Owner{}))
	}
	testkeyring.Isolate()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
