//go:build darwin

package owner

import (
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/vm"
	"github.com/osaurus/osaurus-sandbox/vm/vz"
)

// newDriver is Apple's Virtualization framework on macOS. The VM runs in
// the app's process, so unlike QEMU on Linux it can't outlive the app.
func newDriver(config.Paths) vm.Driver { return vz.New() }

// leftover: the VM runs inside the owner's process, so none outlives it.
func leftover(config.Paths) (int, time.Time) { return 0, time.Time{} }

// helpers: no helper processes on macOS.
func helpers(config.Paths) []int { return nil }
