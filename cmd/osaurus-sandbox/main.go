// Command osaurus-sandbox is the app: a management window by default, and a
// command line for everything the window does.
package main

import (
	"os"

	"github.com/osaurus/osaurus-sandbox/hostcli"
	// Before the UI toolkit reads the locale; see the package comment.
	_ "github.com/osaurus/osaurus-sandbox/internal/localefix"
)

func main() {
	os.Exit(hostcli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
