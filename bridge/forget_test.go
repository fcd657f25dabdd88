package bridge

import (
	"context"
	"testing"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/store/memory"
)

// A removed agent's memories and config must not pass to a later agent of
// the same name, while another agent's stay.
func TestForgetAgent(t *testing.T) {
	ctx := context.Background()
	p := config.Paths{Root: t.TempDir()}
	mem, err := memory.Open(ctx, p.MemoryDB(), memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	cfg := &ConfigStore{Dir: p.BridgeConfigDir()}
	for _, agent := range []string{"alice", "bob"} {
		if _, err := mem.Add(ctx, agent, "the deploy key is in the vault", nil); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Set(agent, "region", "eu"); err != nil {
			t.Fatal(err)
		}
	}
	if err := ForgetAgent(ctx, mem, cfg, "alice"); err != nil {
		t.Fatal(err)
	}
	if n, err := mem.Count(ctx, "alice"); err != nil || n != 0 {
		t.Errorf("alice's memories after ForgetAgent: %d, %v; want none", n, err)
	}
	if _, ok, err := cfg.Get("alice", "region"); ok || err != nil {
		t.Errorf("alice's config after ForgetAgent: found %v, %v", ok, err)
	}
	if n, _ := mem.Count(ctx, "bob"); n != 1 {
		t.Errorf("bob's memories: %d, want 1", n)
	}
	if v, ok, _ := cfg.Get("bob", "region"); !ok || v != "eu" {
		t.Errorf("bob's config: %q, %v", v, ok)
	}
	// Forgetting an agent with nothing stored is no error.
	if err := ForgetAgent(ctx, mem, cfg, "carol"); err != nil {
		t.Errorf("ForgetAgent of an agent with nothing stored: %v", err)
	}
}
