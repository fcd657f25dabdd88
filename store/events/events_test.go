package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/osaurus/osaurus-sandbox/internal/sqlitedb"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func open(t *testing.T, path string, o Options) *Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "events.db")
	}
	s, err := Open(context.Background(), path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func emit(t *testing.T, s *Store, agent, typ, payload string) Event {
	t.Helper()
	e, err := s.Emit(context.Background(), agent, typ, json.RawMessage(payload))
	if err != nil {
		t.Fatalf("emit %s %s: %v", agent, typ, err)
	}
	return e
}

func types(es []Event) string {
	var out []string
	for _, e := range es {
		out = append(out, e.Agent+":"+e.Type+":"+string(e.Payload))
	}
	return strings.Join(out, " ")
}

func TestEmitAndList(t *testing.T) {
	ctx := context.Background()
	s := open(t, "", Options{MaxPerAgent: 3})
	emit(t, s, "alice", "build.done", `{ "ok" : true }`)
	emit(t, s, "bob", "note", "")
	emit(t, s, "alice", "x", `"text"`)
	all, err := s.List(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := types(all), `alice:build.done:{"ok":true} bob:note:null alice:x:"text"`; got != want {
		t.Errorf("all:\n got %s\nwant %s", got, want)
	}
	if got, _ := s.List(ctx, Filter{Agent: "bob"}); types(got) != "bob:note:null" {
		t.Errorf("bob's: %s", types(got))
	}
	if got, _ := s.List(ctx, Filter{Last: 1}); types(got) != `alice:x:"text"` {
		t.Errorf("last 1: %s", types(got))
	}
	if got, _ := s.List(ctx, Filter{After: all[0].ID}); len(got) != 2 {
		t.Errorf("after the first: %s", types(got))
	}
	// The bound keeps each agent's newest.
	for i := range 4 {
		emit(t, s, "alice", fmt.Sprintf("n%d", i), "")
	}
	if got, _ := s.List(ctx, Filter{Agent: "alice"}); types(got) != "alice:n1:null alice:n2:null alice:n3:null" {
		t.Errorf("alice after the bound: %s", types(got))
	}
	if got, _ := s.List(ctx, Filter{Agent: "bob"}); len(got) != 1 {
		t.Errorf("alice's bound touched bob: %s", types(got))
	}
	if all[0].Time.IsZero() {
		t.Error("no time")
	}
}

func TestInvalid(t *testing.T) {
	s := open(t, "", Options{})
	big := `"` + strings.Repeat("a", MaxPayload) + `"`
	for _, tc := range []struct{ name, agent, typ, payload, field string }{
		{"empty type", "a", "", "", "type"},
		{"spaces", "a", "a b", "", "type"},
		{"escape in type", "a", "x\x1b[2J", "", "type"},
		{"long type", "a", strings.Repeat("t", 65), "", "type"},
		{"bad json", "a", "t", "{", "payload"},
		{"two values", "a", "t", "1 2", "payload"},
		{"too big", "a", "t", big, "payload"},
		{"bad agent", "A/../b", "t", "", "agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Emit(context.Background(), tc.agent, tc.typ, json.RawMessage(tc.payload))
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.Field != tc.field || !errors.Is(err, ErrInvalid) {
				t.Errorf("got %v, want an invalid %s", err, tc.field)
			}
		})
	}
	// Just under the bound, with whitespace compacted away, fits.
	ok := `[ "` + strings.Repeat("a", MaxPayload-4) + `" ]`
	if _, err := s.Emit(context.Background(), "a", "t", json.RawMessage(ok)); err != nil {
		t.Errorf("payload at the bound: %v", err)
	}
	// Control characters in a payload stay escaped in its JSON.
	e := emit(t, s, "a", "t", `"\u001b[2J"`)
	if strings.ContainsRune(string(e.Payload), 0x1b) {
		t.Errorf("payload holds a raw escape: %q", e.Payload)
	}
}

// follow runs Follow in the background and returns a channel of what it
// delivers.
func follow(t *testing.T, s *Store, f Filter) <-chan Event {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan Event, 16)
	done := make(chan error, 1)
	go func() { done <- s.Follow(ctx, f, func(e Event) error { ch <- e; return nil }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("follow ended with %v", err)
		}
	})
	return ch
}

func next(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
		return Event{}
	}
}

func TestFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s := open(t, path, Options{})
	emit(t, s, "alice", "old", "")
	last, err := s.LastID(context.Background())
	if err != nil || last == 0 {
		t.Fatalf("LastID: %d %v", last, err)
	}
	ch := follow(t, s, Filter{Agent: "alice", After: last})
	emit(t, s, "bob", "not-for-alice", "")
	emit(t, s, "alice", "new", `{"n":1}`)
	if e := next(t, ch); e.Type != "new" || string(e.Payload) != `{"n":1}` {
		t.Errorf("first followed event: %+v", e)
	}
	// Another process writing the same file: a second Store stands in.
	other := open(t, path, Options{})
	emit(t, other, "alice", "from-another-process", "")
	if e := next(t, ch); e.Type != "from-another-process" {
		t.Errorf("event of another process: %+v", e)
	}
	// Last applies to the backlog.
	ch2 := follow(t, s, Filter{Last: 1})
	if e := next(t, ch2); e.Type != "from-another-process" {
		t.Errorf("backlog of 1: %+v", e)
	}
	emit(t, s, "carol", "later", "")
	if e := next(t, ch2); e.Type != "later" {
		t.Errorf("after the backlog: %+v", e)
	}
}

// An event another process emits reaches a follower by change
// notification: with an hour's poll only that can deliver it in time.
func TestFollowOtherProcessWithoutPolling(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	s := open(t, path, Options{Poll: time.Hour})
	ch := follow(t, s, Filter{Agent: "alice"})
	other := open(t, path, Options{})
	for _, typ := range []string{"first", "second", "third"} {
		emit(t, other, "alice", typ, "")
		if e := next(t, ch); e.Type != typ {
			t.Fatalf("followed %+v, want %s", e, typ)
		}
	}
}

// A plugin's filter keeps the events it emitted and its type family, of
// its own agent only; Type keeps a family, not a mere prefix.
func TestFilterByTypeFamilyAndPlugin(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "events.db"), Options{})
	ctx := context.Background()
	emit := func(agent, plugin, typ string) {
		t.Helper()
		if _, err := s.EmitFrom(ctx, agent, plugin, typ, nil); err != nil {
			t.Fatal(err)
		}
	}
	emit("alice", "", "build.done")        // 1: alice's own
	emit("alice", "greeter", "x.y")        // 2: emitted by greeter, another family
	emit("alice", "", "greeter.ping")      // 3: greeter's family, by alice
	emit("alice", "", "greeterx.ping")     // 4: not greeter's family
	emit("bob", "greeter", "greeter.ping") // 5: bob's greeter
	emit("alice", "other", "other:1")      // 6: another plugin
	ids := func(f Filter) (out []int64) {
		t.Helper()
		es, err := s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	for _, tt := range []struct {
		name string
		f    Filter
		want []int64
	}{
		{"alice sees hers and her plugins'", Filter{Agent: "alice"}, []int64{1, 2, 3, 4, 6}},
		{"alice's greeter", Filter{Agent: "alice", Plugin: "greeter"}, []int64{2, 3}},
		{"bob's greeter", Filter{Agent: "bob", Plugin: "greeter"}, []int64{5}},
		{"type family", Filter{Agent: "alice", Type: "greeter"}, []int64{3}},
		{"type family and since", Filter{Agent: "alice", Type: "build", After: 1}, nil},
	} {
		if got := ids(tt.f); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A log from before events recorded their plugin gets the column.
func TestOpenAddsThePluginColumn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	db, err := sqlitedb.Open(context.Background(), path, schema) // the schema has no plugin column

	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO events(agent, type, payload, created_at) VALUES ('alice', 'old', 'null', 1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := open(t, path, Options{})
	if _, err := s.EmitFrom(context.Background(), "alice", "greeter", "greeter.x", nil); err != nil {
		t.Fatal(err)
	}
	es, err := s.List(context.Background(), Filter{Agent: "alice"})
	if err != nil || len(es) != 2 || es[0].Plugin != "" || es[1].Plugin != "greeter" {
		t.Fatalf("%+v %v", es, err)
	}
}
