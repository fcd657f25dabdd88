package ui

import (
	"os"
	"testing"

	"github.com/osaurus/osaurus-sandbox/hostcli"
	"github.com/osaurus/osaurus-sandbox/internal/testssh"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "standin-far" {
		// The far side's osaurus-sandbox of a remote context
		// (contexts_test.go): the real dial-stdio, owning nothing.
		os.Exit(hostcli.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr, hostcli.Owner{}))
	}
	if len(os.Args) > 2 && os.Args[1] == "standin-ssh-w" {
		// A remote context's `ssh -W 127.0.0.1:PORT` (TestFarPortsTab).
		testssh.Record(os.Args[2:])
		os.Exit(testssh.ForwardW(os.Args[2]))
	}
	os.Exit(m.Run())
}
