package ui

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/zalando/go-keyring"

	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/secretprompt"
)

// TestAgentSecrets runs the Agents tab's secret handling on a real
// keyring. One keyring serves the whole process (go-keyring keeps one
// session bus), so every keychain test of the window is a subtest here.
func TestAgentSecrets(t *testing.T) {
	testkeyring.Start(t)
	store := secrets.NewKeychain()

	t.Run("remove deletes the agent's secrets", func(t *testing.T) {
		w, reg := newTestWindow(t, newFake(t))
		at := w.Agents
		at.secrets = store
		typeIn(at.NewName, "alice")
		tap(at.Add)
		if err := store.Set("alice", "OPENAI_API_KEY", "sk-test-123456"); err != nil {
			t.Fatal(err)
		}
		if err := store.Set("bob", "OPENAI_API_KEY", "sk-bob-1234567"); err != nil {
			t.Fatal(err)
		}
		tap(at.RemoveBtn)
		tapInOverlay(t, w.Win, "Yes")
		eventually(t, "the owner's removal", func() bool { return len(reg.List()) == 0 })
		eventually(t, "the status naming the deleted secrets", func() bool {
			return strings.Contains(at.Status.Text, "its secrets OPENAI_API_KEY")
		})
		if _, err := keyring.Get(secrets.ServiceName(), "alice/OPENAI_API_KEY"); !errors.Is(err, keyring.ErrNotFound) {
			t.Errorf("alice's secret is still in the keychain: %v", err)
		}
		if v, err := store.Get("bob", "OPENAI_API_KEY"); err != nil || v != "sk-bob-1234567" {
			t.Errorf("bob's secret: %q, %v", v, err)
		}
	})

	t.Run("the window's password dialog answers a prompt", func(t *testing.T) {
		w, reg := newTestWindow(t, newFake(t))
		at := w.Agents
		a, err := reg.Add("alice")
		if err != nil {
			t.Fatal(err)
		}
		broker := &secretprompt.Broker{Store: store}
		defer broker.SetDialog(at.promptSecret)()
		ask := func(key, desc string) chan error {
			done := make(chan error, 1)
			go func() {
				done <- broker.PromptSecret(context.Background(), tools.SecretRequest{Agent: a, Key: key, Description: desc})
			}()
			eventually(t, "the dialog", func() bool { return at.PromptValue != nil })
			return done
		}

		done := ask("OPENAI_API_KEY", "for the weather API")
		lockedDo(func() {
			test.AssertObjectRendersToMarkup(t, "secret_prompt.xml", w.Win.Canvas().Overlays().Top())
		})
		var entry *widget.Entry
		lockedDo(func() { entry = at.PromptValue })
		typeIn(entry, "sk-from-the-dialog-1")
		tapInOverlay(t, w.Win, "Save")
		if err := <-done; err != nil {
			t.Fatalf("PromptSecret: %v", err)
		}
		if v, err := store.Get("alice", "OPENAI_API_KEY"); err != nil || v != "sk-from-the-dialog-1" {
			t.Fatalf("keychain: %q, %v", v, err)
		}

		done = ask("DENIED", "")
		tapInOverlay(t, w.Win, "Deny")
		if err := <-done; !errors.Is(err, tools.ErrSecretDenied) {
			t.Fatalf("Deny: %v, want ErrSecretDenied", err)
		}
		if _, err := store.Get("alice", "DENIED"); !errors.Is(err, secrets.ErrNotFound) {
			t.Fatalf("denied secret stored: %v", err)
		}

		// A call that gives up withdraws its dialog.
		broker.Timeout = 300 * time.Millisecond
		done = ask("LATE", "")
		if err := <-done; !errors.Is(err, tools.ErrSecretDenied) || !strings.Contains(err.Error(), "no answer within") {
			t.Fatalf("timeout: %v", err)
		}
		eventually(t, "the dialog to close", func() bool { return at.PromptValue == nil })
	})

	t.Run("the Agents tab lists, sets and removes secrets", func(t *testing.T) {
		w, reg := newTestWindow(t, newFake(t))
		at := w.Agents
		at.secrets = store
		a, err := reg.Add("carol")
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Set("carol", "EXISTING", "existing-value"); err != nil {
			t.Fatal(err)
		}
		at.refresh()
		at.selectAgent(a.ID)
		if got := strings.Join(at.sec.names, ","); got != "EXISTING" {
			t.Fatalf("names shown: %q", got)
		}
		tap(at.sec.SetBtn)
		typeIn(at.SecretKey, "NEW_KEY")
		typeIn(at.SecretValue, "new-value-123")
		tapInOverlay(t, w.Win, "Save")
		if v, err := store.Get("carol", "NEW_KEY"); err != nil || v != "new-value-123" {
			t.Fatalf("Set: %q, %v", v, err)
		}
		if got := strings.Join(at.sec.names, ","); got != "EXISTING,NEW_KEY" {
			t.Fatalf("names after Set: %q", got)
		}
		if strings.Contains(at.Status.Text, "new-value-123") {
			t.Fatal("the value is shown")
		}
		at.sec.List.Select(0)
		tap(at.sec.RemoveSec)
		tapInOverlay(t, w.Win, "Yes")
		if _, err := store.Get("carol", "EXISTING"); !errors.Is(err, secrets.ErrNotFound) {
			t.Fatalf("Remove: %v", err)
		}
		if got := strings.Join(at.sec.names, ","); got != "NEW_KEY" {
			t.Fatalf("names after Remove: %q", got)
		}
	})
}

// TestAgentLogView: the Agents tab shows the agent's log buffer as
// `osaurus-host log` wrote it, newest last, and Refresh reads new lines.
func TestAgentLogView(t *testing.T) {
	w, reg := newTestWindow(t, newFake(t))
	at := w.Agents
	logs := &bridge.LogStore{Dir: filepath.Join(t.TempDir(), "logs")}
	at.readLog = logs.Read
	a, err := reg.Add("dave")
	if err != nil {
		t.Fatal(err)
	}
	at.refresh()
	at.selectAgent(a.ID)
	if !strings.Contains(at.logs.Text.Text, "nothing logged yet") {
		t.Fatalf("empty log shows %q", at.logs.Text.Text)
	}
	if err := logs.Append("dave", "info", "first line"); err != nil {
		t.Fatal(err)
	}
	if err := logs.Append("dave", "error", "second\nforged 2020-01-01 info line"); err != nil {
		t.Fatal(err)
	}
	tap(at.logs.Refresh)
	lines := strings.Split(strings.TrimSpace(at.logs.Text.Text), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], " info first line") || !strings.Contains(lines[1], " error second") {
		t.Fatalf("log shown: %q", at.logs.Text.Text)
	}
	if !at.logs.Text.Disabled() {
		t.Error("the log view is editable")
	}
	// A big buffer shows its newest part from a line start.
	if err := os.WriteFile(logs.LogFile("dave"), []byte(strings.Repeat("old line\n", 8000)+"newest line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tap(at.logs.Refresh)
	if s := at.logs.Text.Text; len(s) > logTail || !strings.HasPrefix(s, "old line\n") || !strings.HasSuffix(s, "newest line\n") {
		t.Fatalf("tail: %d bytes, starts %q", len(s), s[:20])
	}
}
