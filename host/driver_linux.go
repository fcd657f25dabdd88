//go:build linux

package host

import (
	"cmp"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/vm"
	"github.com/osaurus/osaurus-sandbox/vm/qemu"
)

// newDriver is QEMU on Linux. The VM outlives the app on purpose (a
// crashed app's VM is adopted by the next run), so no kill-with-parent.
// What it learns about KVM holds for the host, not just this data dir.
func newDriver(p config.Paths) vm.Driver {
	return qemu.New(qemu.Config{StateDir: cmp.Or(qemu.DefaultStateDir(), p.Root)})
}
