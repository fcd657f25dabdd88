package hostcli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/store/events"
)

// TestAgentTextReachesTheTerminalNeutralised: what an agent logged or
// emitted with escape sequences prints without a single control
// character but tab and newline.
func TestAgentTextReachesTheTerminalNeutralised(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	paths := config.Paths{Root: home}
	if _, errOut, code := run(t, "agent", "add", "alice"); code != ExitOK {
		t.Fatal(errOut)
	}
	const evil = "\x1b]0;pwned\x07\x1b[2J\x1b[1;1Hall good\r\u009b31m\u202e"
	if err := (&bridge.LogStore{Dir: paths.AgentLogDir()}).Append("alice", "info", evil); err != nil {
		t.Fatal(err)
	}
	ev, err := events.Open(context.Background(), paths.EventsDB(), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]string{"msg": "\u009b2J\u202eevil"})
	if _, err := ev.Emit(context.Background(), "alice", "note", payload); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"logs", "--agent", "alice"}, {"events", "--agent", "alice"}} {
		out, errOut, code := run(t, args...)
		if code != ExitOK {
			t.Fatalf("%v: %d %q", args, code, errOut)
		}
		for _, c := range out {
			if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 && c <= 0x9f || c == 0x202e {
				t.Errorf("%v prints control %U: %q", args, c, out)
				break
			}
		}
		if args[0] == "logs" && !strings.Contains(out, `\x1b]0;pwned`) {
			t.Errorf("logs --agent hides the text instead of showing it escaped: %q", out)
		}
	}
}
