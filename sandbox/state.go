// Package sandbox is the VM's lifecycle as a user meets it: provision,
// start, stop, reset, remove, restart after a crash, and state that
// survives an app restart.
package sandbox

import (
	"encoding/json"
	"time"

	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// State is the sandbox's lifecycle state.
type State string

const (
	NotProvisioned State = "not-provisioned"
	Provisioning   State = "provisioning"
	Stopped        State = "stopped"
	Starting       State = "starting"
	Running        State = "running"
	Stopping       State = "stopping"
	Error          State = "error"
)

// Status is a snapshot for displays and `status --json`.
type Status struct {
	State  State     `json:"state"`
	Reason string    `json:"reason,omitempty"` // why Error, in plain words
	Since  time.Time `json:"since"`
	Driver string    `json:"driver,omitempty"`
	Accel  string    `json:"accel,omitempty"`
	// AccelReason says why the accelerator isn't the best one (why "auto"
	// runs under TCG).
	AccelReason string  `json:"accelReason,omitempty"`
	Transport   string  `json:"transport,omitempty"`
	Distro      string  `json:"distro,omitempty"`
	Kernel      string  `json:"kernel,omitempty"`
	Pid         int     `json:"pid,omitempty"`
	BootSecs    float64 `json:"bootSeconds,omitempty"`
	Restarts    int     `json:"restarts,omitempty"`
	// CooldownUntil is set while automatic restarts are paused.
	CooldownUntil *time.Time `json:"cooldownUntil,omitempty"`
	// Unresponsive is set, to when it started, while the VM runs but its
	// guest agent doesn't answer the watchdog's pings.
	Unresponsive *time.Time `json:"unresponsiveSince,omitempty"`
	// SleepingSince is set, to when it was paused, while the VM sleeps:
	// State stays Running, and the next call to the guest wakes it.
	SleepingSince *time.Time `json:"sleepingSince,omitempty"`
	// Progress of a running provision.
	Progress *Progress `json:"progress,omitempty"`
}

// Progress of provisioning.
type Progress struct {
	Phase string `json:"phase"`
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
}

// savedState is state.json: enough to find a VM left running by an app
// that crashed.
type savedState struct {
	State  State     `json:"state"`
	Reason string    `json:"reason,omitempty"`
	Pid    int       `json:"pid,omitempty"`
	At     time.Time `json:"at"`
}

func save(path string, s savedState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o644)
}
