package owner

import (
	"context"
	"path/filepath"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diskquota"
	"github.com/osaurus/osaurus-sandbox/sandbox"
)

// DiskUsageFile is where the owner's disk monitor leaves the latest usage.
func DiskUsageFile(p config.Paths) string { return filepath.Join(p.Run(), "disk-usage.json") }

// enforceDisk runs the owner's disk quota monitor until ctx ends or the
// returned func is called.
func enforceDisk(ctx context.Context, p config.Paths, m *sandbox.Manager, logf func(string, ...any)) (stop func()) {
	reg, err := agents.Open(p.AgentsJSON())
	if err != nil {
		logf("disk quota: %v", err)
		return func() {}
	}
	t := diskquota.NewTracker(filepath.Join(p.Workspace(), "agents"), p.Workspace(), p.Output())
	mon := &diskquota.Monitor{
		Tracker:  t,
		Registry: reg,
		Guest:    func() (*agentproto.Client, error) { return m.Agent() },
		Free:     func() (int64, error) { return diskquota.FreeBytes(p.Workspace()) },
		Floor: func() int64 {
			cfg, _ := config.LoadSandbox(p.SandboxJSON()) // defaults on error
			return cfg.HostFreeFloor()
		},
		UsageFile: DiskUsageFile(p),
		Logf:      logf,
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		mon.Run(ctx)
	}()
	return func() { cancel(); <-done; t.Close() }
}
