// Command osaurus-sandbox is the app: a management window by default, and a
// command line for everything the window does. It is where the command
// line (hostcli) and the window (ui) meet the owner of the VM (host):
// neither imports the other nor host.
package main

import (
	"os"

	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/hostcli"
	// Before the UI toolkit reads the locale; see the package comment.
	_ "github.com/osaurus/osaurus-sandbox/internal/localefix"
)

func main() {
	own := hostcli.Owner{GUI: gui, Serve: host.Serve, StopOrphan: host.StopOrphan, Probe: host.Probe, Helpers: host.Helpers, OpenData: host.OpenData}
	os.Exit(hostcli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, own))
}
