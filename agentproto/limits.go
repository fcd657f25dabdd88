package agentproto

import "fmt"

// Limits are the resource limits of one agent user in the guest: its
// cgroup's pids.max, memory.max (with memory.high a little below) and
// cpu.weight. Every process of the user, calls and background ones alike,
// counts against them together.
type Limits struct {
	MaxProcesses int `json:"max_processes"`
	MemoryMB     int `json:"memory_mb"`
	CPUWeight    int `json:"cpu_weight"`
	// DiskMB is the agent's disk quota (diskGB), which bounds its private
	// temporary directories in the guest; 0 leaves that to the guest.
	DiskMB int `json:"disk_mb,omitempty"`
}

// Defaults and bounds of Limits. The defaults let several busy agents
// share the default 2 GB VM: each may use half of it, and the guest caps
// all agents together below the VM's memory (see the guest agent).
const (
	DefaultMaxProcesses = 256
	MinMaxProcesses     = 16
	MaxMaxProcesses     = 4096

	DefaultMemoryMB = 1024
	MinMemoryMB     = 64
	MaxMemoryMB     = 65536

	DefaultCPUWeight = 100 // the kernel's own default
	MinCPUWeight     = 1
	MaxCPUWeight     = 10000
)

// Names of the limit a process ran into (ExitStatus.Limit).
const (
	LimitMemory    = "memory"
	LimitProcesses = "processes"
)

// DefaultLimits are the limits of an agent that set none.
func DefaultLimits() Limits {
	return Limits{MaxProcesses: DefaultMaxProcesses, MemoryMB: DefaultMemoryMB, CPUWeight: DefaultCPUWeight}
}

// WithDefaults fills zero fields with the defaults.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxProcesses == 0 {
		l.MaxProcesses = d.MaxProcesses
	}
	if l.MemoryMB == 0 {
		l.MemoryMB = d.MemoryMB
	}
	if l.CPUWeight == 0 {
		l.CPUWeight = d.CPUWeight
	}
	return l
}

// Validate checks every field is in range (zero fields are not allowed:
// call WithDefaults first).
func (l Limits) Validate() error {
	for _, f := range []struct {
		name      string
		v, lo, hi int
	}{
		{"maxProcesses", l.MaxProcesses, MinMaxProcesses, MaxMaxProcesses},
		{"memoryMB", l.MemoryMB, MinMemoryMB, MaxMemoryMB},
		{"cpuWeight", l.CPUWeight, MinCPUWeight, MaxCPUWeight},
	} {
		if f.v < f.lo || f.v > f.hi {
			return fmt.Errorf("%w: %s: %d, want %d–%d", ErrInvalid, f.name, f.v, f.lo, f.hi)
		}
	}
	if l.DiskMB < 0 {
		return fmt.Errorf("%w: diskMB: %d, want 0 or more", ErrInvalid, l.DiskMB)
	}
	return nil
}

// UsageRequest asks for the resource use of users (all agent users with a
// cgroup when empty).
type UsageRequest struct {
	Users []string `json:"users,omitempty"`
}

// UsageResponse is the use of each user that has a cgroup.
type UsageResponse struct {
	Users []UserUsage `json:"users"`
}

// UserUsage is one user's resource use from its cgroup.
type UserUsage struct {
	User        string `json:"user"`
	CPUMicros   int64  `json:"cpu_usec"`     // cpu.stat usage_usec, since the group was made
	MemoryBytes int64  `json:"memory_bytes"` // memory.current
	MemoryPeak  int64  `json:"memory_peak_bytes,omitempty"`
	Processes   int    `json:"processes"` // pids.current
	Limits      Limits `json:"limits"`    // in force
	OOMKills    int64  `json:"oom_kills"` // memory.events oom_kill
	PidsMax     int64  `json:"pids_max_events"`
	// TmpBytes is what the user's private temporary files take (its
	// tmpfs; 0 from a guest older than minor 7). The host counts it
	// against the user's disk quota with its home.
	TmpBytes int64 `json:"tmp_bytes,omitempty"`
}
