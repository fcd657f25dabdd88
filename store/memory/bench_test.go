package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// BenchmarkMemoryQuery100k measures a bridge query (top 10) against a
// database of 100,000 entries: 90,000 of the querying agent (the worst
// case, all of them candidates) and 10,000 of another. Entries are ten
// words from a 2,000-word vocabulary, so a word matches about 500
// entries and a three-word query about 1,500.
func BenchmarkMemoryQuery100k(b *testing.B) {
	ctx := context.Background()
	s := open(b, Options{MaxPerAgent: 200_000})
	r := rand.New(rand.NewPCG(1, 2))
	vocab := make([]string, 2000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%dx%c", i, 'a'+rune(i%26))
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO memories(agent, content, salience, created_at) VALUES (?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for i := range 100_000 {
		agent := "alice"
		if i%10 == 9 {
			agent = "bob"
		}
		words := make([]string, 10)
		for j := range words {
			words[j] = vocab[r.IntN(len(vocab))]
		}
		if _, err := ins.ExecContext(ctx, agent, strings.Join(words, " "), r.Float64(), now+int64(i)); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	queries := make([]string, 64)
	for i := range queries {
		queries[i] = vocab[r.IntN(len(vocab))] + " " + vocab[r.IntN(len(vocab))] + " " + vocab[r.IntN(len(vocab))]
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		got, err := s.Query(ctx, "alice", queries[i%len(queries)], TopN)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) == 0 {
			b.Fatalf("no results for %q", queries[i%len(queries)])
		}
		i++
	}
}
