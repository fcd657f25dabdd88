package memory

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func open(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "memory.db"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func add(t testing.TB, s *Store, agent, content string, sal ...float64) Entry {
	t.Helper()
	var p *float64
	if len(sal) > 0 {
		p = &sal[0]
	}
	e, err := s.Add(context.Background(), agent, content, p)
	if err != nil {
		t.Fatalf("add %q for %s: %v", content, agent, err)
	}
	return e
}

func contents(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Content
	}
	return out
}

func TestIsolation(t *testing.T) {
	ctx := context.Background()
	s := open(t, Options{})
	add(t, s, "alice", "the launch code is blue falcon")
	bobs := add(t, s, "bob", "bob likes falcon documentaries")
	got, err := s.Query(ctx, "alice", "falcon", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Agent != "alice" {
		t.Errorf("alice's query: %v, want only her entry", got)
	}
	got, _ = s.Query(ctx, "bob", "launch code blue", 10)
	if len(got) != 0 {
		t.Errorf("bob's query finds %v, want nothing of alice's", contents(got))
	}
	got, _ = s.Query(ctx, "carol", "falcon", 10)
	if len(got) != 0 {
		t.Errorf("carol (no memories) finds %v", contents(got))
	}
	// An agent can't remove another's entry by id.
	if err := s.Remove(ctx, "alice", bobs.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("alice removing bob's entry: %v, want ErrNotFound", err)
	}
	if n, _ := s.Count(ctx, "bob"); n != 1 {
		t.Errorf("bob has %d entries after alice's attempt, want 1", n)
	}
	if err := s.Remove(ctx, "bob", bobs.ID); err != nil {
		t.Errorf("bob removing his entry: %v", err)
	}
	if got, _ := s.Query(ctx, "bob", "falcon", 10); len(got) != 0 {
		t.Errorf("removed entry still found: %v", contents(got))
	}
}

func TestRanking(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := open(t, Options{Now: func() time.Time { now = now.Add(time.Second); return now }})
	add(t, s, "a", "groceries: milk, eggs, bread")
	add(t, s, "a", "the deploy key rotates every monday")
	add(t, s, "a", "deploy the staging server with make deploy, deploy often")
	add(t, s, "a", "unrelated note about the weather")
	add(t, s, "a", "running the deploy script needs the vpn")
	got, err := s.Query(ctx, "a", "deploy", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"deploy the staging server with make deploy, deploy often",
		"the deploy key rotates every monday",
		"running the deploy script needs the vpn",
	}
	if strings.Join(contents(got), "|") != strings.Join(want, "|") {
		t.Errorf("deploy:\n got %q\nwant %q", contents(got), want)
	}
	// More of the query's words matched ranks higher; stemming finds
	// "running" for "runs".
	got, _ = s.Query(ctx, "a", "runs deploy vpn", 10)
	if len(got) == 0 || got[0].Content != "running the deploy script needs the vpn" {
		t.Errorf("runs deploy vpn: %q", contents(got))
	}
	// Salience breaks a tie in relevance.
	t2 := open(t, Options{})
	add(t, t2, "a", "parrot fact one", 0.1)
	add(t, t2, "a", "parrot fact two", 1)
	add(t, t2, "a", "parrot fact six", 0.5)
	got, _ = t2.Query(ctx, "a", "parrot", 10)
	if strings.Join(contents(got), "|") != "parrot fact two|parrot fact six|parrot fact one" {
		t.Errorf("by salience: %q", contents(got))
	}
	if got[0].Salience != 1 || got[0].CreatedAt.IsZero() {
		t.Errorf("fields: %+v", got[0])
	}
	// The limit is honoured.
	for i := range 15 {
		add(t, t2, "b", fmt.Sprintf("note %d about owls", i))
	}
	if got, _ := t2.Query(ctx, "b", "owls", TopN); len(got) != TopN {
		t.Errorf("top %d: got %d", TopN, len(got))
	}
}

func TestBounds(t *testing.T) {
	ctx := context.Background()
	s := open(t, Options{MaxPerAgent: 3})
	for i := range 5 {
		add(t, s, "a", fmt.Sprintf("entry %d", i))
	}
	add(t, s, "b", "entry of b")
	got, _ := s.List(ctx, "a", 0)
	if strings.Join(contents(got), "|") != "entry 4|entry 3|entry 2" {
		t.Errorf("after 5 stores with a bound of 3: %q", contents(got))
	}
	if got, _ := s.Query(ctx, "a", "entry 0", 10); len(got) != 3 {
		t.Errorf("forgotten entries still searchable: %q", contents(got))
	}
	if n, _ := s.Count(ctx, "b"); n != 1 {
		t.Errorf("a's bound touched b: %d", n)
	}
	sal := func(f float64) *float64 { return &f }
	for _, tc := range []struct {
		name, agent, content string
		sal                  *float64
		field                string
	}{
		{"empty", "a", "  \n", nil, "content"},
		{"too long", "a", strings.Repeat("x", MaxContent+1), nil, "content"},
		{"escape sequence", "a", "hi \x1b[2J", nil, "content"},
		{"NUL", "a", "a\x00b", nil, "content"},
		{"bad utf-8", "a", "\xff\xfe", nil, "content"},
		{"salience high", "a", "x", sal(1.5), "salience"},
		{"salience negative", "a", "x", sal(-0.1), "salience"},
		{"bad agent", "../etc", "x", nil, "agent"},
		{"empty agent", "", "x", nil, "agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Add(ctx, tc.agent, tc.content, tc.sal)
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.Field != tc.field || !errors.Is(err, ErrInvalid) {
				t.Errorf("got %v, want an invalid %s", err, tc.field)
			}
		})
	}
	if _, err := s.Add(ctx, "a", strings.Repeat("x", MaxContent), nil); err != nil {
		t.Errorf("content of exactly MaxContent: %v", err)
	}
	if _, err := s.Add(ctx, "a", "line one\n\tline two", nil); err != nil {
		t.Errorf("newline and tab: %v", err)
	}
	for _, q := range []string{"", "   ", strings.Repeat("a ", MaxQuery)} {
		if _, err := s.Query(ctx, "a", q, 10); !errors.Is(err, ErrInvalid) {
			t.Errorf("query %.20q: %v, want ErrInvalid", q, err)
		}
	}
}

// hostile are queries an agent might send to break out of its terms:
// FTS5 operators, column filters, NEAR, prefixes, unbalanced quotes and
// brackets, and SQL.
var hostile = []string{
	`"`, `""`, `"unterminated`, `a" OR "b`, `*`, `a*`, `^a`, `(`, `)`, `(a OR`,
	`NOT`, `AND`, `OR`, `NEAR(a b, 1)`, `content:secret`, `agent:bob`, `{content}: x`,
	`-secret`, `+x`, `a AND NOT b`, `'; DROP TABLE memories; --`, `x' OR '1'='1`,
	`rowid:1`, `memories_fts`, `\`, "\u00a0", `:`, `a:b:c`,
}

func TestHostileQuery(t *testing.T) {
	ctx := context.Background()
	s := open(t, Options{})
	add(t, s, "alice", "alice secret one")
	add(t, s, "bob", "bob secret two")
	for _, q := range hostile {
		got, err := s.Query(ctx, "alice", q, 10)
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v", q, err)
		}
		for _, e := range got {
			if e.Agent != "alice" {
				t.Errorf("%q returned %s's entry %q", q, e.Agent, e.Content)
			}
		}
	}
	// Operators are words, not syntax: "NOT secret" finds what mentions
	// "secret" rather than excluding it.
	if got, _ := s.Query(ctx, "alice", "NOT secret", 10); len(got) != 1 {
		t.Errorf("NOT secret: %q", contents(got))
	}
	if got, _ := s.Query(ctx, "bob", "agent:alice", 10); len(got) != 0 {
		t.Errorf("bob with a column filter: %q", contents(got))
	}
	if n, _ := s.Count(ctx, "bob"); n != 1 {
		t.Errorf("bob's entries after the hostile queries: %d", n)
	}
}

func TestMatchExpr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"hello world", `"hello" OR "world"`},
		{`a" OR "b`, `"a" OR "or" OR "b"`},
		{"NEAR(x y)", `"near" OR "x" OR "y"`},
		{"content:secret*", `"content" OR "secret"`},
		{"Café café", `"café"`},
		{"!!!", ""},
		{strings.Repeat("w", 3) + " " + strings.Repeat("z ", 5), `"www" OR "z"`},
	} {
		if got := MatchExpr(tc.in); got != tc.want {
			t.Errorf("MatchExpr(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var many []string
	for i := range 100 {
		many = append(many, fmt.Sprintf("w%d", i))
	}
	if n := strings.Count(MatchExpr(strings.Join(many, " ")), " OR ") + 1; n != MaxTerms {
		t.Errorf("%d terms, want %d", n, MaxTerms)
	}
}

// FuzzQuery sends arbitrary query text: it must never be an SQL or FTS5
// error, and never return another agent's entry.
func FuzzQuery(f *testing.F) {
	for _, q := range hostile {
		f.Add(q)
	}
	s := open(f, Options{})
	add(f, s, "alice", "alice secret one")
	add(f, s, "bob", "bob secret two")
	f.Fuzz(func(t *testing.T, q string) {
		got, err := s.Query(context.Background(), "alice", q, 10)
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("%q: %v", q, err)
		}
		for _, e := range got {
			if e.Agent != "alice" {
				t.Fatalf("%q returned %s's entry", q, e.Agent)
			}
		}
	})
}

func TestPersistsAcrossOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	add(t, s, "a", "remember the milk")
	s.Close()
	s2, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got, _ := s2.Query(ctx, "a", "milk", 10); len(got) != 1 {
		t.Errorf("after reopening: %q", contents(got))
	}
}
