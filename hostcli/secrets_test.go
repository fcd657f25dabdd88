package hostcli

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

func runStdin(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, strings.NewReader(stdin), &out, &errOut, testOwner)
	return out.String(), errOut.String(), code
}

// TestSecretCLI: the secret commands on a real keyring, and removing an
// agent deletes its secrets from the keychain, not just from our index.
// The keyring is one per process (go-keyring keeps one session bus), so
// every keychain test of this package lives here.
func TestSecretCLI(t *testing.T) {
	testkeyring.Start(t)
	t.Setenv(config.HomeEnv, t.TempDir())
	for _, n := range []string{"alice", "bob"} {
		if _, errOut, code := run(t, "agent", "add", n); code != ExitOK {
			t.Fatalf("agent add %s: %d %s", n, code, errOut)
		}
	}
	if out, errOut, code := runStdin(t, "sk-test-123456\n", "secret", "set", "alice", "OPENAI_API_KEY"); code != ExitOK || !strings.Contains(out, "stored OPENAI_API_KEY for alice") {
		t.Fatalf("secret set: %d %q %q", code, out, errOut)
	}
	if v, err := keyring.Get(secrets.ServiceName(), "alice/OPENAI_API_KEY"); err != nil || v != "sk-test-123456" {
		t.Fatalf("keychain holds %q, %v", v, err)
	}
	if _, errOut, code := runStdin(t, "", "secret", "set", "alice", "EMPTY"); code != ExitError || !strings.Contains(errOut, "no value on stdin") {
		t.Fatalf("empty secret set: %d %q", code, errOut)
	}
	runStdin(t, "other-value", "secret", "set", "alice", "OTHER")
	runStdin(t, "sk-bob-1234567", "secret", "set", "bob", "OPENAI_API_KEY")
	if out, _, code := run(t, "secret", "list", "alice", "--json"); code != ExitOK || strings.TrimSpace(out) != `["OPENAI_API_KEY","OTHER"]` {
		t.Fatalf("secret list: %d %q", code, out)
	}
	if out, _, code := run(t, "secret", "list", "alice"); code != ExitOK || out != "OPENAI_API_KEY\nOTHER\n" {
		t.Fatalf("secret list: %d %q", code, out)
	}
	if _, errOut, code := run(t, "secret", "remove", "alice", "NOPE"); code != ExitError || !strings.Contains(errOut, "alice has no secret NOPE") {
		t.Fatalf("remove absent: %d %q", code, errOut)
	}

	out, errOut, code := run(t, "agent", "remove", "alice")
	if code != ExitOK || !strings.Contains(out, "deleted its secrets from the OS keychain: OPENAI_API_KEY, OTHER") {
		t.Fatalf("agent remove: %d %q %q", code, out, errOut)
	}
	for _, k := range []string{"OPENAI_API_KEY", "OTHER"} {
		if _, err := keyring.Get(secrets.ServiceName(), "alice/"+k); !errors.Is(err, keyring.ErrNotFound) {
			t.Errorf("alice/%s still in the keychain after agent remove: %v", k, err)
		}
	}
	// A new agent of the same name starts without them.
	run(t, "agent", "add", "alice")
	if out, _, _ := run(t, "secret", "list", "alice", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("the new alice inherited secrets: %q", out)
	}
	if v, err := keyring.Get(secrets.ServiceName(), "bob/OPENAI_API_KEY"); err != nil || v != "sk-bob-1234567" {
		t.Errorf("bob's secret after removing alice: %q, %v", v, err)
	}

	// The app binary a test builds stores under the test service name
	// too, never the product's: a test can't touch a developer's entries.
	b := newBinRun(t)
	b.home = os.Getenv(config.HomeEnv)
	if out, errOut, code := b.run("sk-child-7654321", "secret", "set", "bob", "CHILD_KEY"); code != ExitOK {
		t.Fatalf("the binary's secret set: %d %q %q", code, out, errOut)
	}
	if v, err := keyring.Get(secrets.TestService, "bob/CHILD_KEY"); err != nil || v != "sk-child-7654321" {
		t.Errorf("under the test service: %q, %v", v, err)
	}
	if _, err := keyring.Get(secrets.Service, "bob/CHILD_KEY"); !errors.Is(err, keyring.ErrNotFound) {
		t.Errorf("the binary a test built wrote under the product's service name: %v", err)
	}
}
