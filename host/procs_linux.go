//go:build linux

package host

import (
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/vm/qemu"
)

// leftover is the QEMU a dead owner left running, if any.
func leftover(p config.Paths) (int, time.Time) { return qemu.Leftover(p.Run()) }

// Helpers are the data dir's QEMU and virtiofsd processes still running.
func Helpers(p config.Paths) []int { return qemu.Helpers(p.Run()) }
