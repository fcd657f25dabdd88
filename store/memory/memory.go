// Package memory is the agents' long-term memory behind the bridge's
// /api/agent/memory routes: short texts an agent stores and later finds
// again by full-text search. It lives in SQLite on the host (FTS5,
// ranked by BM25 weighted by salience); every read and write is scoped
// to one agent, and an agent's query text is turned into quoted terms so
// it can never be FTS5 syntax.
package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/internal/sqlitedb"
)

// Bounds. An agent can't grow the database past MaxPerAgent entries of
// MaxContent bytes each.
const (
	// MaxContent is the longest entry, in bytes of UTF-8.
	MaxContent = 8 << 10
	// DefaultMaxPerAgent is how many entries an agent keeps; storing
	// more forgets its oldest.
	DefaultMaxPerAgent = 5000
	// MaxQuery is the longest query text, in bytes.
	MaxQuery = 1 << 10
	// MaxTerms is how many distinct words of a query are searched for.
	MaxTerms = 32
	// TopN is how many results the bridge's query returns.
	TopN = 10
	// DefaultSalience is an entry's salience when the agent gives none.
	DefaultSalience = 0.5
)

var (
	// ErrInvalid: a field the caller sent is not acceptable (HTTP 400).
	ErrInvalid = errdefs.Class(errdefs.ErrInvalid, "invalid")
	// ErrNotFound: no such entry for this agent.
	ErrNotFound = errdefs.Class(errdefs.ErrNotFound, "memory entry not found")
)

// InvalidError names the field and the fix.
type InvalidError struct{ Field, Problem string }

func (e *InvalidError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Problem) }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool {
	return target == ErrInvalid || errors.Is(ErrInvalid, target)
}

var agentRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

func checkAgent(agent string) error {
	if !agentRE.MatchString(agent) {
		return &InvalidError{"agent", fmt.Sprintf("%q is not an agent name (1-64 of a-z, 0-9, '_', '-')", agent)}
	}
	return nil
}

// Entry is one memory; the control socket carries it as is.
type Entry = control.MemoryEntry

const schema = `
CREATE TABLE IF NOT EXISTS memories (
	id         INTEGER PRIMARY KEY,
	agent      TEXT    NOT NULL,
	content    TEXT    NOT NULL,
	salience   REAL    NOT NULL,
	created_at INTEGER NOT NULL -- unix milliseconds
);
CREATE INDEX IF NOT EXISTS memories_by_agent ON memories(agent, id);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
	content, content='memories', content_rowid='id',
	tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS memories_fts_insert AFTER INSERT ON memories BEGIN
	INSERT INTO memories_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER IF NOT EXISTS memories_fts_delete AFTER DELETE ON memories BEGIN
	INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
`

// Options configure a Store.
type Options struct {
	// MaxPerAgent bounds each agent's entries; default DefaultMaxPerAgent.
	MaxPerAgent int
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Store is the memory database. It is safe for concurrent use, also by
// several processes (the app writes, the CLI reads and removes).
type Store struct {
	db *sql.DB
	o  Options
	mu sync.Mutex // serialises this process's writers
}

// Open opens or creates the database at path.
func Open(ctx context.Context, path string, o Options) (*Store, error) {
	if o.MaxPerAgent <= 0 {
		o.MaxPerAgent = DefaultMaxPerAgent
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	db, err := sqlitedb.Open(ctx, path, schema)
	if err != nil {
		return nil, fmt.Errorf("memory database: %w", err)
	}
	return &Store{db: db, o: o}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// CheckContent reports why content can't be stored, or nil.
func CheckContent(content string) error {
	switch {
	case strings.TrimSpace(content) == "":
		return &InvalidError{"content", "is empty; send the text to remember"}
	case len(content) > MaxContent:
		return &InvalidError{"content", fmt.Sprintf("is %d bytes, over the limit of %d; store a shorter summary", len(content), MaxContent)}
	case !utf8.ValidString(content):
		return &InvalidError{"content", "is not valid UTF-8"}
	}
	// Control characters would reach the user's terminal through
	// `osaurus-sandbox memory list`; only newline and tab are text.
	for _, r := range content {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return &InvalidError{"content", fmt.Sprintf("contains control character %U; only newline and tab are allowed", r)}
		}
	}
	return nil
}

// Add stores an entry for agent. salience nil means DefaultSalience.
// When the agent is at its bound, its oldest entries are forgotten.
func (s *Store) Add(ctx context.Context, agent, content string, salience *float64) (Entry, error) {
	if err := checkAgent(agent); err != nil {
		return Entry{}, err
	}
	if err := CheckContent(content); err != nil {
		return Entry{}, err
	}
	sal := DefaultSalience
	if salience != nil {
		if math.IsNaN(*salience) || *salience < 0 || *salience > 1 {
			return Entry{}, &InvalidError{"salience", fmt.Sprintf("%v is not between 0 and 1", *salience)}
		}
		sal = *salience
	}
	now := s.o.Now().UTC().Truncate(time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Entry{}, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO memories(agent, content, salience, created_at) VALUES (?, ?, ?, ?)`,
		agent, content, sal, now.UnixMilli())
	if err != nil {
		return Entry{}, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return Entry{}, err
	}
	// Forget the oldest beyond the bound: everything older than the
	// newest MaxPerAgent ids.
	if _, err := tx.ExecContext(ctx, `DELETE FROM memories WHERE agent = ? AND id <= (
		SELECT id FROM memories WHERE agent = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
		agent, agent, s.o.MaxPerAgent); err != nil {
		return Entry{}, err
	}
	if err := tx.Commit(); err != nil {
		return Entry{}, err
	}
	return Entry{ID: id, Agent: agent, Content: content, Salience: sal, CreatedAt: now}, nil
}

// MatchExpr turns free text into an FTS5 expression that can't be FTS5
// syntax: each word (a run of letters, marks and digits) becomes a quoted
// string, joined with OR so entries matching more words rank higher.
// Operators, column filters, prefixes and quotes in the text are just
// separators. It returns "" when the text has no words.
func MatchExpr(text string) string {
	seen := map[string]bool{}
	var terms []string
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.IsMark(r) }) {
		w = strings.ToLower(w)
		if seen[w] {
			continue
		}
		seen[w] = true
		// Words hold only letters, marks and digits, so there is no quote to
		// escape; doubling is kept so the invariant doesn't rest on that.
		terms = append(terms, `"`+strings.ReplaceAll(w, `"`, `""`)+`"`)
		if len(terms) == MaxTerms {
			break
		}
	}
	return strings.Join(terms, " OR ")
}

// Query returns up to limit of agent's entries best matching text: BM25
// relevance weighted by salience, newest first among equals.
func (s *Store) Query(ctx context.Context, agent, text string, limit int) ([]Entry, error) {
	if err := checkAgent(agent); err != nil {
		return nil, err
	}
	switch {
	case strings.TrimSpace(text) == "":
		return nil, &InvalidError{"query", "is empty; send words to search for"}
	case len(text) > MaxQuery:
		return nil, &InvalidError{"query", fmt.Sprintf("is %d bytes, over the limit of %d", len(text), MaxQuery)}
	case !utf8.ValidString(text):
		return nil, &InvalidError{"query", "is not valid UTF-8"}
	}
	if limit <= 0 || limit > 100 {
		limit = TopN
	}
	expr := MatchExpr(text)
	if expr == "" {
		return []Entry{}, nil
	}
	// bm25() is negative, lower is better; (0.5 + salience) scales it so
	// a salient entry outranks an equally relevant one.
	rows, err := s.db.QueryContext(ctx, `SELECT m.id, m.agent, m.content, m.salience, m.created_at
		FROM memories_fts f JOIN memories m ON m.id = f.rowid
		WHERE memories_fts MATCH ? AND m.agent = ?
		ORDER BY bm25(memories_fts) * (0.5 + m.salience), m.id DESC
		LIMIT ?`, expr, agent, limit)
	if err != nil {
		return nil, fmt.Errorf("memory query: %w", err)
	}
	return scan(rows)
}

// List returns agent's newest entries, at most limit (0: all).
func (s *Store) List(ctx context.Context, agent string, limit int) ([]Entry, error) {
	if err := checkAgent(agent); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, agent, content, salience, created_at FROM memories
		WHERE agent = ? ORDER BY id DESC LIMIT ?`, agent, limit)
	if err != nil {
		return nil, err
	}
	return scan(rows)
}

// MaxPerAgent is how many entries each agent keeps in this store.
func (s *Store) MaxPerAgent() int { return s.o.MaxPerAgent }

// Count returns how many entries agent has.
func (s *Store) Count(ctx context.Context, agent string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM memories WHERE agent = ?`, agent).Scan(&n)
	return n, err
}

// Remove deletes agent's entry id; ErrNotFound when agent has no such
// entry (another agent's id included).
func (s *Store) Remove(ctx context.Context, agent string, id int64) error {
	if err := checkAgent(agent); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.db.ExecContext(ctx, `DELETE FROM memories WHERE agent = ? AND id = ?`, agent, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: %s has no entry %d (see `osaurus-sandbox memory list --agent %s`)", ErrNotFound, agent, id, agent)
	}
	return nil
}

// RemoveAll deletes every entry of agent and returns how many.
func (s *Store) RemoveAll(ctx context.Context, agent string) (int64, error) {
	if err := checkAgent(agent); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.db.ExecContext(ctx, `DELETE FROM memories WHERE agent = ?`, agent)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func scan(rows *sql.Rows) ([]Entry, error) {
	defer rows.Close()
	out := []Entry{}
	for rows.Next() {
		var e Entry
		var ms int64
		if err := rows.Scan(&e.ID, &e.Agent, &e.Content, &e.Salience, &ms); err != nil {
			return nil, err
		}
		e.CreatedAt = time.UnixMilli(ms).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}
