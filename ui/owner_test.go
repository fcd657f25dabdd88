package ui

import (
	"context"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host"
)

// openOwner makes the test a short-lived owner of p (host.OpenData, the
// real Host without a VM): the one writer of its agents and projects.
func openOwner(t *testing.T, p config.Paths) (AgentOps, *agents.Registry) {
	t.Helper()
	ctl, err := host.OpenData(context.Background(), p, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctl.Close)
	return ctl, ctl.(interface{ Registry() *agents.Registry }).Registry()
}
