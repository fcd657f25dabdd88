package secrets_test

import (
	"errors"
	"testing"

	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

// TestAppSecretsApartFromAgents: an app secret is never one of an agent's,
// whatever the agent is called.
func TestAppSecretsApartFromAgents(t *testing.T) {
	testkeyring.Start(t)
	s := secrets.NewKeychain()
	if _, err := s.GetApp(secrets.InferenceKey); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("GetApp before set: %v, want ErrNotFound", err)
	}
	if err := s.SetApp(secrets.InferenceKey, "sk-app-9876543"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.GetApp(secrets.InferenceKey); err != nil || v != "sk-app-9876543" {
		t.Fatalf("GetApp = %q, %v", v, err)
	}
	for _, agent := range []string{"app", ":app", "_app"} {
		if v, err := s.Get(agent, secrets.InferenceKey); err == nil {
			t.Errorf("agent %q read the app secret: %q", agent, v)
		}
		if names, _ := s.List(agent); len(names) != 0 {
			t.Errorf("agent %q lists %v", agent, names)
		}
	}
	if err := s.SetApp("bad key", "v"); !errors.Is(err, secrets.ErrInvalid) {
		t.Errorf("SetApp(bad key): %v, want ErrInvalid", err)
	}
	if err := s.RemoveApp(secrets.InferenceKey); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveApp(secrets.InferenceKey); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("second RemoveApp: %v, want ErrNotFound", err)
	}
}
