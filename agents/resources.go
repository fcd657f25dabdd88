package agents

import (
	"fmt"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// Resources are an agent's resource limits in the VM, enforced by the
// guest's cgroups on all of the agent's processes together. A zero field
// means the default (agentproto.Default*), so agents stored before these
// settings existed get the defaults.
type Resources struct {
	MaxProcesses int `json:"maxProcesses,omitempty"`
	MemoryMB     int `json:"memoryMB,omitempty"`
	CPUWeight    int `json:"cpuWeight,omitempty"`
}

// Limits are the limits in force: the settings with defaults filled in.
func (r Resources) Limits() agentproto.Limits {
	return agentproto.Limits{MaxProcesses: r.MaxProcesses, MemoryMB: r.MemoryMB, CPUWeight: r.CPUWeight}.WithDefaults()
}

// Limits are the limits the guest enforces on the agent: its resources
// with defaults filled in, and its disk quota, which bounds its private
// temporary directories there.
func (a Agent) Limits() agentproto.Limits {
	l := a.Resources.Limits()
	l.DiskMB = int(max(a.DiskQuota()/1e6, 1))
	return l
}

// ResourceSetting describes one resource setting for help texts and the
// settings form.
type ResourceSetting struct {
	Key      string
	Min, Max int
	Default  int
	Help     string
}

// ResourceSettings are the keys of Resources.
var ResourceSettings = []ResourceSetting{
	{"maxProcesses", agentproto.MinMaxProcesses, agentproto.MaxMaxProcesses, agentproto.DefaultMaxProcesses,
		"processes and threads the agent may have at once"},
	{"memoryMB", agentproto.MinMemoryMB, agentproto.MaxMemoryMB, agentproto.DefaultMemoryMB,
		"memory in MB for all the agent's processes; the biggest command is killed beyond it"},
	{"cpuWeight", agentproto.MinCPUWeight, agentproto.MaxCPUWeight, agentproto.DefaultCPUWeight,
		"the agent's share of CPU time against other busy agents (100 is an equal share)"},
}

// Field returns the setting called key, nil for another key.
func (r *Resources) Field(key string) *int {
	switch key {
	case "maxProcesses":
		return &r.MaxProcesses
	case "memoryMB":
		return &r.MemoryMB
	case "cpuWeight":
		return &r.CPUWeight
	}
	return nil
}

// Validate checks each set field is in range.
func (r Resources) Validate() error {
	for _, s := range ResourceSettings {
		v := *r.Field(s.Key)
		if v != 0 && (v < s.Min || v > s.Max) {
			return &ValidationError{Field: s.Key, Got: fmt.Sprint(v), Want: fmt.Sprintf("%d–%d (default %d)", s.Min, s.Max, s.Default)}
		}
	}
	return nil
}

// Usage is an agent's resource use in the VM as the CLI and the window
// show it.
type Usage struct {
	CPUSeconds   float64 `json:"cpuSeconds"`   // CPU time since the VM started
	MemoryMB     float64 `json:"memoryMB"`     // memory in use now
	MemoryPeakMB float64 `json:"memoryPeakMB"` // the most since the VM started
	Processes    int     `json:"processes"`    // processes and threads now
	OOMKills     int64   `json:"oomKills"`     // commands killed for memory
}

// UsageFrom converts the guest's report.
func UsageFrom(u agentproto.UserUsage) Usage {
	const mb = 1 << 20
	return Usage{
		CPUSeconds:   float64(u.CPUMicros) / 1e6,
		MemoryMB:     float64(u.MemoryBytes) / mb,
		MemoryPeakMB: float64(u.MemoryPeak) / mb,
		Processes:    u.Processes,
		OOMKills:     u.OOMKills,
	}
}

// Summary is one line for people, against the limits l.
func (u Usage) Summary(l agentproto.Limits) string {
	s := fmt.Sprintf("CPU %.1f s, memory %.0f of %d MB (peak %.0f MB), %d of %d processes",
		u.CPUSeconds, u.MemoryMB, l.MemoryMB, u.MemoryPeakMB, u.Processes, l.MaxProcesses)
	if u.OOMKills > 0 {
		s += fmt.Sprintf(", %d killed for memory", u.OOMKills)
	}
	return s
}
