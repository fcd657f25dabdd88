package host

import (
	"context"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diskquota"
)

// enforceDisk runs the owner's disk quota monitor until ctx ends or the
// returned func is called.
func (h *Host) enforceDisk(ctx context.Context) (stop func()) {
	p, m := h.paths, h.m
	t := diskquota.NewTracker(p.AgentHomes(), p.Workspace(), p.Output())
	mon := &diskquota.Monitor{
		Tracker:  t,
		Registry: h.reg,
		// Housekeeping neither wakes a sleeping VM nor keeps it awake.
		Guest: func() (*agentproto.Client, error) { return m.Awake() },
		Free:  func() (int64, error) { return diskquota.FreeBytes(p.Workspace()) },
		Floor: func() int64 {
			cfg, _ := config.LoadSandbox(p.SandboxJSON()) // defaults on error
			return cfg.HostFreeFloor()
		},
		UsageFile: p.DiskUsageFile(),
		Logf:      h.logf,
	}
	h.disk.Store(mon)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		mon.Run(ctx)
	}()
	return func() { h.disk.Store(nil); cancel(); <-done; t.Close() }
}
