package bridge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/store/events"
)

// Reading events from the guest: an agent sees what it and its plugins
// emitted; a plugin its own emissions and type family; nobody another
// agent's; a caller the guest can't attribute nothing. follow streams new
// events as they are emitted.
func TestEventsReadAndFollow(t *testing.T) {
	ev, err := events.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	s := bridge.New(bridge.Options{Events: ev})
	t.Cleanup(func() { s.Close() })
	alice := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"})
	greeter := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice", Plugin: "greeter"})
	hidden := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice", Unattributed: true})
	bob := relay(t, s, agentproto.BridgeRequest{UID: 1002, User: "agent-bob", Agent: "bob"})
	bobGreeter := relay(t, s, agentproto.BridgeRequest{UID: 1002, User: "agent-bob", Agent: "bob", Plugin: "greeter"})

	for _, e := range []struct {
		c    *http.Client
		body string
	}{
		{alice, `{"type":"build.done"}`},          // 1
		{greeter, `{"type":"hello","payload":1}`}, // 2: greeter's own
		{alice, `{"type":"greeter.ping"}`},        // 3: greeter's family
		{bob, `{"type":"greeter.bob"}`},           // 4: bob's, in greeter's family
		{bobGreeter, `{"type":"greeter.bob"}`},    // 5: bob's greeter
	} {
		if code, m := do(t, e.c, "POST", "/api/events/emit", e.body); code != 200 {
			t.Fatalf("emit %s: %d %v", e.body, code, m)
		}
	}
	ids := func(c *http.Client, query string) []int {
		t.Helper()
		code, m := do(t, c, "GET", "/api/events"+query, "")
		if code != 200 {
			t.Fatalf("list %s: %d %v", query, code, m)
		}
		var out []int
		for _, e := range m["events"].([]any) {
			out = append(out, int(e.(map[string]any)["id"].(float64)))
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		c     *http.Client
		query string
		want  []int
	}{
		{"alice", alice, "", []int{1, 2, 3}},
		{"alice's greeter", greeter, "", []int{2, 3}},
		{"bob", bob, "", []int{4, 5}},
		{"bob's greeter", bobGreeter, "", []int{4, 5}},
		{"bob's greeter, another family", bobGreeter, "?type=build", nil},
		{"alice, a type family", alice, "?type=greeter", []int{3}},
		{"alice, since", alice, "?since=2", []int{3}},
		{"alice, limit", alice, "?limit=1", []int{3}},
	} {
		if got := ids(tt.c, tt.query); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	for _, tt := range []struct {
		c     *http.Client
		query string
		want  int
	}{
		{hidden, "", 403},
		{alice, "?since=-1", 400},
		{alice, "?type=a%20b", 400},
		{alice, "?limit=1001", 400},
	} {
		if code, m := do(t, tt.c, "GET", "/api/events"+tt.query, ""); code != tt.want {
			t.Errorf("list %s: %d %v, want %d", tt.query, code, m, tt.want)
		}
	}

	// follow: bob's follower doesn't see alice's plugin's event; alice's
	// does, and her plugin's own.
	follow := func(c *http.Client, query string) (*bufio.Scanner, func()) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://bridge/api/events/follow"+query, nil)
		resp, err := c.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("follow: %v %v", err, resp)
		}
		sc := bufio.NewScanner(resp.Body)
		if !sc.Scan() { // {"following": true, ...}: the follow is in place
			t.Fatal("no first line")
		}
		return sc, func() { resp.Body.Close() }
	}
	next := func(sc *bufio.Scanner) map[string]any {
		t.Helper()
		if !sc.Scan() {
			t.Fatalf("the stream ended: %v", sc.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	aliceF, closeA := follow(alice, "")
	defer closeA()
	greeterF, closeG := follow(greeter, "")
	defer closeG()
	bobF, closeB := follow(bob, "")
	defer closeB()
	do(t, greeter, "POST", "/api/events/emit", `{"type":"greeter.new"}`) // 6
	do(t, bob, "POST", "/api/events/emit", `{"type":"bob.own"}`)         // 7
	if m := next(aliceF); m["type"] != "greeter.new" || m["plugin"] != "greeter" {
		t.Errorf("alice's follower: %v", m)
	}
	if m := next(greeterF); m["type"] != "greeter.new" {
		t.Errorf("the plugin's follower: %v", m)
	}
	// bob's next event is his own: alice's plugin's was never sent to him.
	if m := next(bobF); m["type"] != "bob.own" {
		t.Errorf("bob's follower: %v", m)
	}
	// since replays.
	sc, closeS := follow(alice, "?since=5&type=greeter")
	defer closeS()
	if m := next(sc); m["id"].(float64) != 6 {
		t.Errorf("follow since: %v", m)
	}
}
