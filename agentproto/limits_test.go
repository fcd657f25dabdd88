package agentproto

import (
	"errors"
	"testing"
)

func TestLimits(t *testing.T) {
	if got := (Limits{}).WithDefaults(); got != DefaultLimits() {
		t.Fatalf("zero limits with defaults: %+v", got)
	}
	if got := (Limits{MemoryMB: 300}).WithDefaults(); got.MemoryMB != 300 || got.MaxProcesses != DefaultMaxProcesses {
		t.Fatalf("partial limits with defaults: %+v", got)
	}
	for _, c := range []struct {
		name string
		l    Limits
		ok   bool
	}{
		{"defaults", DefaultLimits(), true},
		{"lowest", Limits{MinMaxProcesses, MinMemoryMB, MinCPUWeight, 0}, true},
		{"highest", Limits{MaxMaxProcesses, MaxMemoryMB, MaxCPUWeight, 0}, true},
		{"too few processes", Limits{MinMaxProcesses - 1, DefaultMemoryMB, DefaultCPUWeight, 0}, false},
		{"too much memory", Limits{DefaultMaxProcesses, MaxMemoryMB + 1, DefaultCPUWeight, 0}, false},
		{"zero weight", Limits{DefaultMaxProcesses, DefaultMemoryMB, 0, 0}, false},
		{"negative", Limits{-1, DefaultMemoryMB, DefaultCPUWeight, 0}, false},
		{"negative disk", Limits{DefaultMaxProcesses, DefaultMemoryMB, DefaultCPUWeight, -1}, false},
	} {
		err := c.l.Validate()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
