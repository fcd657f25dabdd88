//go:build darwin

package host

import (
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/vm"
	"github.com/osaurus/osaurus-sandbox/vm/vz"
)

// newDriver is Apple's Virtualization framework on macOS. The VM runs in
// the app's process, so unlike QEMU on Linux it can't outlive the app.
func newDriver(config.Paths) vm.Driver { return vz.New() }
