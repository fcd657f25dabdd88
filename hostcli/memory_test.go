package hostcli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/store/memory"
)

func TestMemoryAndEventsCommands(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	for _, n := range []string{"alice", "bob"} {
		if _, errOut, code := run(t, "agent", "add", n); code != ExitOK {
			t.Fatalf("add %s: %s", n, errOut)
		}
	}
	p := config.Paths{Root: home}
	mem, err := memory.Open(ctx, p.MemoryDB(), memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a1, _ := mem.Add(ctx, "alice", "alice likes green tea\nand biscuits", nil)
	mem.Add(ctx, "alice", "the build uses make", nil)
	mem.Add(ctx, "bob", "bob likes tea too", nil)

	out, errOut, code := run(t, "memory", "list", "--agent", "alice", "--json")
	var es []memory.Entry
	if code != ExitOK || json.Unmarshal([]byte(out), &es) != nil || len(es) != 2 || es[0].Content != "the build uses make" {
		t.Fatalf("list --json: %d %q %q", code, out, errOut)
	}
	out, _, code = run(t, "memory", "search", "tea", "--agent", "alice")
	if code != ExitOK || !strings.Contains(out, `alice likes green tea\nand biscuits`) || strings.Contains(out, "bob") {
		t.Errorf("search tea as alice: %d %q", code, out)
	}
	if _, errOut, code := run(t, "memory", "remove", "--agent", "bob", "1"); code != ExitError || !strings.Contains(errOut, "no entry 1") {
		t.Errorf("bob removing alice's entry: %d %q", code, errOut)
	}
	if out, _, code := run(t, "memory", "remove", "--agent", "alice", "1"); code != ExitOK || a1.ID != 1 {
		t.Errorf("remove: %d %q", code, out)
	}
	if out, _, _ := run(t, "memory", "list", "--agent", "alice"); strings.Contains(out, "tea") || !strings.Contains(out, "make") {
		t.Errorf("after remove: %q", out)
	}
	if out, _, code := run(t, "memory", "remove", "--agent", "alice", "--all"); code != ExitOK || !strings.Contains(out, "removed 1 entries") {
		t.Errorf("remove --all: %d %q", code, out)
	}
	for _, args := range [][]string{{"memory"}, {"memory", "list"}, {"memory", "search", "--agent", "alice"}, {"memory", "frob", "--agent", "alice"}, {"events", "extra"}} {
		if _, _, code := run(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, ExitUsage)
		}
	}
	if _, errOut, code := run(t, "memory", "list", "--agent", "nobody"); code != ExitError || errOut == "" {
		t.Errorf("unknown agent: %d %q", code, errOut)
	}

	ev, err := events.Open(ctx, p.EventsDB(), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev.Emit(ctx, "alice", "build.done", json.RawMessage(`{"ok":true}`))
	ev.Emit(ctx, "bob", "note", nil)
	out, _, code = run(t, "events", "--json", "--agent", "alice")
	var e events.Event
	if code != ExitOK || strings.Count(out, "\n") != 1 || json.Unmarshal([]byte(out), &e) != nil || e.Type != "build.done" || string(e.Payload) != `{"ok":true}` {
		t.Errorf("events --json --agent alice: %d %q", code, out)
	}
	out, errOut, code = run(t, "events")
	if code != ExitOK || !strings.Contains(out, `alice  build.done  {"ok":true}`) || !strings.Contains(out, "bob  note  null") {
		t.Errorf("events: %d %q %q", code, out, errOut)
	}
}
