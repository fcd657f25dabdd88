package ui

import (
	"os"
	"testing"

	"github.com/osaurus/osaurus-sandbox/hostcli"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "standin-far" {
		// The far side's osaurus-sandbox of a remote context
		// (contexts_test.go): the real dial-stdio, owning nothing.
		os.Exit(hostcli.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr, hostcli.Owner{}))
	}
	os.Exit(m.Run())
}
