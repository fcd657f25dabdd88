package owner

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// An agent that uses up its commands through MCP gets no fresh quota
// through another way into the same owner (the bridge's runner or its
// plugin creation build their own tools environments).
func TestLimitsAreSharedAcrossEnvironments(t *testing.T) {
	reg, err := agents.Open(filepath.Join(t.TempDir(), "agents.json"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := reg.Add("alice")
	if err != nil {
		t.Fatal(err)
	}
	if a, err = reg.Update(a.ID, func(a *agents.Agent) error {
		a.AutonomousExec.Enabled = true
		a.AutonomousExec.MaxCommandsPerTurn = 100
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// No VM: every admitted call is charged, then fails as unavailable.
	stopped := func(context.Context) (*agentproto.Client, error) { return nil, errors.New("stopped") }
	for _, tt := range []struct {
		name   string
		lim    Limits
		shared bool
	}{{"one owner's limits", NewLimits(), true}, {"zero limits", Limits{}, false}} {
		t.Run(tt.name, func(t *testing.T) {
			mcp := tools.NewEnv(tt.lim.apply(tools.Options{Guest: stopped, Agents: reg})).Toolset(a)
			runner := tools.NewEnv(tt.lim.apply(tools.Options{Guest: stopped, Agents: reg})).Toolset(a)
			call := func(ts *tools.Toolset) envelope.Envelope {
				e, err := envelope.Parse(ts.Call(context.Background(), "sandbox_exec", []byte(`{"command":"true"}`)))
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			for i := 0; ; i++ {
				e := call(mcp)
				if e.Kind == envelope.Rejected {
					break
				}
				if e.Kind != envelope.Unavailable || i > 1000 {
					t.Fatalf("call %d: %+v", i, e)
				}
			}
			e := call(runner)
			if got := e.Kind == envelope.Rejected; got != tt.shared {
				t.Fatalf("after its quota ran out through MCP, the runner's call: %+v (want rejected: %v)", e, tt.shared)
			}
		})
	}
}
