package ui

import (
	"errors"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"
	"github.com/zalando/go-keyring"

	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

// TestAgentSecrets runs the Agents tab's secret handling on a real
// keyring. One keyring serves the whole process (go-keyring keeps one
// session bus), so every keychain test of the window is a subtest here.
func TestAgentSecrets(t *testing.T) {
	testkeyring.Start(t)
	store := secrets.New()

	t.Run("remove deletes the agent's secrets", func(t *testing.T) {
		w, reg := newTestWindow(t, newFake(t))
		at := w.Agents
		at.secrets = store
		test.Type(at.NewName, "alice")
		test.Tap(at.Add)
		if err := store.Set("alice", "OPENAI_API_KEY", "sk-test-123456"); err != nil {
			t.Fatal(err)
		}
		if err := store.Set("bob", "OPENAI_API_KEY", "sk-bob-1234567"); err != nil {
			t.Fatal(err)
		}
		test.Tap(at.RemoveBtn)
		tapInOverlay(t, w.Win, "Yes")
		if n := len(reg.List()); n != 0 {
			t.Fatalf("%d agents after remove", n)
		}
		eventually(t, "the status naming the deleted secrets", func() bool {
			return strings.Contains(at.Status.Text, "its secrets OPENAI_API_KEY")
		})
		if _, err := keyring.Get(secrets.Service, "alice/OPENAI_API_KEY"); !errors.Is(err, keyring.ErrNotFound) {
			t.Errorf("alice's secret is still in the keychain: %v", err)
		}
		if v, err := store.Get("bob", "OPENAI_API_KEY"); err != nil || v != "sk-bob-1234567" {
			t.Errorf("bob's secret: %q, %v", v, err)
		}
	})
}
