//go:build linux

package guestagent

import (
	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// BootClock is the guest's uptime in seconds from CLOCK_BOOTTIME: zero
// when the kernel started, readable before /proc is mounted, and at
// nanosecond resolution (/proc/uptime has 10 ms).
func BootClock() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return float64(ts.Nano()) / 1e9
}

// phaseClock records when each boot step ended, for the boot benchmark's
// breakdown (reported to the host in Hello). One clock read per step.
type PhaseClock struct {
	Phases []agentproto.BootPhase
}

func (c *PhaseClock) Mark(name string) {
	c.Phases = append(c.Phases, agentproto.BootPhase{Name: name, Seconds: BootClock()})
}
