package agents

import (
	"errors"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

func TestResources(t *testing.T) {
	for _, c := range []struct {
		r     Resources
		field string // "" when valid
	}{
		{Resources{}, ""},
		{Resources{MaxProcesses: 100, MemoryMB: 512, CPUWeight: 200}, ""},
		{Resources{MaxProcesses: 1}, "maxProcesses"},
		{Resources{MemoryMB: 1 << 20}, "memoryMB"},
		{Resources{CPUWeight: -5}, "cpuWeight"},
	} {
		err := c.r.Validate()
		if c.field == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.r, err)
			}
			continue
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || !errors.Is(err, ErrInvalid) || !strings.Contains(ve.Want, "default") {
			t.Errorf("%+v: %v, want a %s error naming the default", c.r, err, c.field)
		}
	}
	if got := (Resources{CPUWeight: 50}).Limits(); got != (agentproto.Limits{MaxProcesses: agentproto.DefaultMaxProcesses, MemoryMB: agentproto.DefaultMemoryMB, CPUWeight: 50}) {
		t.Errorf("limits: %+v", got)
	}
}

// TestResourcesStored: the settings survive the registry, and an invalid
// one is refused there.
func TestResourcesStored(t *testing.T) {
	reg, err := Open(t.TempDir() + "/agents.json")
	if err != nil {
		t.Fatal(err)
	}
	a, err := reg.Add("Alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Update(a.ID, func(a *Agent) error { a.Resources.MemoryMB = 10; return nil }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("memoryMB 10 accepted: %v", err)
	}
	if _, err := reg.Update(a.ID, func(a *Agent) error { a.Resources.MemoryMB = 2048; return nil }); err != nil {
		t.Fatal(err)
	}
	again, err := Open(reg.Path())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := again.Get("alice"); got.Resources.MemoryMB != 2048 || got.Resources.Limits().MaxProcesses != agentproto.DefaultMaxProcesses {
		t.Fatalf("stored resources: %+v", got.Resources)
	}
}
