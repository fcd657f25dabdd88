package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// SaveChanges writes what changed and keeps the rest as written (a typo
// stays the user's to fix), and refuses a change based on an old read.
func TestSaveChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandbox.json")
	st, err := ReadState(path)
	if err != nil || st.Revision != "" || st.Settings != Defaults() {
		t.Fatalf("no file: %+v %v", st, err)
	}
	if err := os.WriteFile(path, []byte(`{"cpus": 3, "typo": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := SaveChanges(path, Changes{Settings: Defaults(), IfRevision: st.Revision}); !errors.Is(err, ErrChanged) {
		t.Fatalf("based on no file, the file exists: %v", err)
	}
	st, _ = ReadState(path)
	if st.Settings.CPUs != 3 || len(st.Problems) != 1 || st.Revision == "" {
		t.Fatalf("%+v", st)
	}
	next := st.Settings
	next.MemoryGB = 4
	after, _, err := SaveChanges(path, Changes{Settings: next, IfRevision: st.Revision})
	if err != nil || after.Settings.MemoryGB != 4 || after.Settings.CPUs != 3 || len(after.Problems) != 1 || after.Revision == st.Revision {
		t.Fatalf("%+v %v", after, err)
	}
	if _, _, err := SaveChanges(path, Changes{Settings: next, IfRevision: st.Revision}); !errors.Is(err, ErrChanged) {
		t.Fatalf("a second save on the first read: %v", err)
	}
	bad := next
	bad.CPUs = 99
	if _, _, err := SaveChanges(path, Changes{Settings: bad, IfRevision: after.Revision}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "cpus") {
		t.Fatalf("invalid: %v", err)
	}
	fixed, _, err := SaveChanges(path, Changes{Settings: next, Reset: []string{"typo"}, IfRevision: after.Revision})
	if err != nil || len(fixed.Problems) != 0 || fixed.Settings.MemoryGB != 4 {
		t.Fatalf("reset the typo: %+v %v", fixed, err)
	}
	if _, _, err := SaveChanges(path, Changes{Settings: next, Reset: []string{"nokey"}, IfRevision: fixed.Revision}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("reset of an unknown key not in the file: %v", err)
	}
	all, aside, err := SaveChanges(path, Changes{Settings: Defaults(), Aside: true, IfRevision: fixed.Revision})
	if err != nil || aside == "" || all.Settings != Defaults() {
		t.Fatalf("aside: %+v %q %v", all, aside, err)
	}
	if _, err := os.Stat(aside); err != nil {
		t.Fatal(err)
	}
}

// A damaged file reads as the defaults with the damage named, and only
// Aside writes over it.
func TestSaveChangesDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandbox.json")
	os.WriteFile(path, []byte(`{"cpus": `), 0o644)
	st, err := ReadState(path)
	if err != nil || st.Damaged == nil || st.Settings != Defaults() {
		t.Fatalf("%+v %v", st, err)
	}
	if _, _, err := SaveChanges(path, Changes{Settings: Defaults(), IfRevision: st.Revision}); !errors.As(err, new(*DamagedError)) {
		t.Fatalf("%v", err)
	}
	if _, aside, err := SaveChanges(path, Changes{Settings: Defaults(), Aside: true, IfRevision: st.Revision}); err != nil || !strings.Contains(aside, ".damaged-") {
		t.Fatalf("%q %v", aside, err)
	}
}

// WithDefault puts exactly one key back, even one whose zero means its
// default (mcpPort) or one with the default non-zero (cpus).
func TestWithDefault(t *testing.T) {
	s := Defaults()
	s.CPUs, s.MCPPort, s.MemoryGB = 4, 5000, 3
	for _, k := range []string{"cpus", "mcpPort"} {
		got, err := s.WithDefault(k)
		want := s
		switch k {
		case "cpus":
			want.CPUs = Defaults().CPUs
		case "mcpPort":
			want.MCPPort = 0
		}
		if err != nil || got != want {
			t.Errorf("%s: %+v %v", k, got, err)
		}
	}
	if _, err := s.WithDefault("nokey"); !errors.Is(err, ErrInvalid) {
		t.Error(err)
	}
}
