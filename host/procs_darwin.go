//go:build darwin

package host

import (
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
)

// leftover: the VM runs inside the owner's process, so none outlives it.
func leftover(config.Paths) (int, time.Time) { return 0, time.Time{} }

// Helpers: no helper processes on macOS.
func Helpers(config.Paths) []int { return nil }
