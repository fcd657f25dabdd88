//go:build linux

package owner

import (
	"cmp"
	"time"

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

// leftover is the QEMU a dead owner left running, if any.
func leftover(p config.Paths) (int, time.Time) { return qemu.Leftover(p.Run()) }

// helpers are the data dir's QEMU and virtiofsd processes still running.
func helpers(p config.Paths) []int { return qemu.Helpers(p.Run()) }
