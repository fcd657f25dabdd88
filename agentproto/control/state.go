package control

import (
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// The sandbox's lifecycle as every process sees it: the owner's manager
// (package sandbox) keeps it, the control socket carries it, and the front
// ends read it without linking the manager.

// Sentinel errors of the lifecycle, classed so they cross the socket.
var (
	ErrNotRunning = agentproto.Class(agentproto.ErrUnavailable, "the sandbox VM is not running")
	ErrBusy       = agentproto.Class(agentproto.ErrBusy, "the sandbox is busy")
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
