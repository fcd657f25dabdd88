package hostcli

import (
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diskquota"
)

// agentDiskUsage is each agent's disk use: the owner's latest measure when an
// owner runs, else one walk of the folders.
func agentDiskUsage(p config.Paths, list []agents.Agent) map[string]int64 {
	return diskquota.Latest(p.DiskUsageFile(), p.Workspace(), p.Output(), list)
}
