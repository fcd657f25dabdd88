package owner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// The owner's bridge registers plugins through the tools pipeline, with
// the agents and library of its data dir: the gates are the agent's
// stored settings, and with them on the next step needs the VM.
func TestBridgePluginCreator(t *testing.T) {
	p := config.Paths{Root: t.TempDir()}
	if err := os.MkdirAll(filepath.Dir(p.AgentsJSON()), 0o755); err != nil {
		t.Fatal(err)
	}
	reg, err := agents.Open(p.AgentsJSON())
	if err != nil {
		t.Fatal(err)
	}
	a, err := reg.Add("alice")
	if err != nil {
		t.Fatal(err)
	}
	stopped := func(context.Context) (*agentproto.Client, error) { return nil, errors.New("the VM is stopped") }
	pc := pluginCreator(p, stopped, Limits{}, t.Logf)
	if pc == nil {
		t.Fatal("no plugin creator")
	}
	const recipe = `{"name":"Made","description":"d"}`
	ctx := context.Background()
	if _, err := pc.CreatePlugin(ctx, "alice", []byte(recipe)); !errors.Is(err, tools.ErrPluginCreateOff) {
		t.Fatalf("autonomous exec off: %v", err)
	}
	// Turned on by another process (the CLI): read at the next call.
	other, err := agents.Open(p.AgentsJSON())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Update(a.ID, func(a *agents.Agent) error { a.AutonomousExec.Enabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	var ee *envelope.Error
	if _, err := pc.CreatePlugin(ctx, "alice", []byte(recipe)); !errors.As(err, &ee) || ee.Kind != envelope.Unavailable {
		t.Fatalf("VM stopped: %v", err)
	}
}
