package owner

import (
	"context"
	"errors"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/plugins"
)

// Without a VM, uninstalling drops the records (so no agent lists the
// tools) and says why the folder waits; removing from every agent does
// the same for each, a removed agent's record included.
func TestPluginOpsWithoutVM(t *testing.T) {
	ctx := context.Background()
	p := config.Paths{Root: t.TempDir()}
	reg, err := agents.Open(p.AgentsJSON())
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := reg.Add("alice")
	bob, _ := reg.Add("bob")
	noVM := errors.New("the VM is not running")
	ops := &PluginOps{Paths: p, Guest: func(context.Context) (*agentproto.Client, error) { return nil, noVM },
		Agents: func() (*agents.Registry, error) { return reg, nil }}
	plug, err := plugins.DecodeBytes([]byte(`{"name":"Hello","description":"Says hello","tools":[{"id":"hi","description":"Hi","run":"echo hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	store := ops.Installed()
	for _, id := range []string{alice.ID, bob.ID, "gone-agent"} {
		if err := store.Record(ctx, id, plug, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := ops.Install(ctx, alice, plugins.Version{Number: 1, Recipe: plug}, nil); !errors.Is(err, noVM) {
		t.Fatalf("install without a VM: %v", err)
	}
	deferred, err := ops.Uninstall(ctx, alice, "hello")
	if err != nil || !errors.Is(deferred, noVM) {
		t.Fatalf("uninstall: deferred %v, err %v", deferred, err)
	}
	if ids, _ := store.Agents("hello"); len(ids) != 2 {
		t.Fatalf("after uninstalling alice: %v", ids)
	}
	if err := ops.UninstallEverywhere(ctx, "hello"); err != nil {
		t.Fatal(err)
	}
	if ids, _ := store.Agents("hello"); len(ids) != 0 {
		t.Fatalf("after uninstalling everywhere: %v", ids)
	}
}
