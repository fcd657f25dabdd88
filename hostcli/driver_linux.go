//go:build linux

package hostcli

import (
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/vm"
	"github.com/osaurus/osaurus-sandbox/vm/qemu"
)

// newDriver is QEMU on Linux. The VM outlives the app on purpose (a
// crashed app's VM is adopted by the next run), so no kill-with-parent.
func newDriver(p config.Paths) vm.Driver {
	return qemu.New(qemu.Config{StateDir: p.Root})
}
