// Package events is the event log behind the bridge's /api/events/emit:
// what agents announce (a type and a JSON payload), persisted in SQLite
// on the host, listed and followed by `osaurus-sandbox events`, and
// delivered to the agent's MCP sessions as log notifications.
package events

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/internal/filewatch"
	"github.com/osaurus/osaurus-sandbox/internal/sqlitedb"
)

// Bounds: an agent can't grow the log past MaxPerAgent events of
// MaxPayload bytes each.
const (
	// MaxPayload is the largest payload, in bytes of compact JSON.
	MaxPayload = 64 << 10
	// DefaultMaxPerAgent is how many events an agent keeps; emitting
	// more forgets its oldest.
	DefaultMaxPerAgent = 10000
	// DefaultPoll is how often Follow looks for events written by
	// another process where file changes aren't notified (see
	// filewatch). Those of this process wake it at once.
	DefaultPoll = 250 * time.Millisecond
	// After a notified change Follow looks again every settle until it
	// finds the new events, for at most settleFor (see Follow).
	settle    = 100 * time.Millisecond
	settleFor = 3 * time.Second
)

var (
	// ErrInvalid: a field the caller sent is not acceptable (HTTP 400).
	ErrInvalid = errdefs.Class(errdefs.ErrInvalid, "invalid")

	agentRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	typeRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}$`)
)

// InvalidError names the field and the fix.
type InvalidError struct{ Field, Problem string }

func (e *InvalidError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Problem) }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool {
	return target == ErrInvalid || errors.Is(ErrInvalid, target)
}

// Event is one emitted event. Payload is compact JSON, or null; the
// control socket carries it as is.
type Event = control.Event

const schema = `
CREATE TABLE IF NOT EXISTS events (
	id         INTEGER PRIMARY KEY,
	agent      TEXT    NOT NULL,
	type       TEXT    NOT NULL,
	payload    TEXT    NOT NULL,
	created_at INTEGER NOT NULL -- unix milliseconds
);
CREATE INDEX IF NOT EXISTS events_by_agent ON events(agent, id);
`

// Options configure a Store.
type Options struct {
	MaxPerAgent int              // default DefaultMaxPerAgent
	Poll        time.Duration    // default DefaultPoll
	Now         func() time.Time // default time.Now
}

// Store is the event log; safe for concurrent use by several processes.
type Store struct {
	db   *sql.DB
	o    Options
	path string

	mu   sync.Mutex
	wake chan struct{} // closed and replaced on every Emit
}

// Open opens or creates the log at path.
func Open(ctx context.Context, path string, o Options) (*Store, error) {
	if o.MaxPerAgent <= 0 {
		o.MaxPerAgent = DefaultMaxPerAgent
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	db, err := sqlitedb.Open(ctx, path, schema)
	if err != nil {
		return nil, fmt.Errorf("events database: %w", err)
	}
	if err := addPluginColumn(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("events database %s: %w", path, err)
	}
	return &Store{db: db, o: o, path: path, wake: make(chan struct{})}, nil
}

// addPluginColumn adds the plugin column to a log made before events
// recorded their plugin; another process may be adding it too.
func addPluginColumn(ctx context.Context, db *sql.DB) error {
	has := func() (bool, error) {
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('events') WHERE name = 'plugin'`).Scan(&n)
		return n > 0, err
	}
	if ok, err := has(); err != nil || ok {
		return err
	}
	if _, err := db.ExecContext(ctx, `ALTER TABLE events ADD COLUMN plugin TEXT NOT NULL DEFAULT ''`); err != nil {
		if ok, err2 := has(); err2 == nil && ok {
			return nil
		}
		return err
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// CheckType reports why typ can't be an event type, or nil.
func CheckType(typ string) error {
	if !typeRE.MatchString(typ) {
		return &InvalidError{"type", fmt.Sprintf("%q is not an event type: use 1-64 letters, digits, '_', '.', ':', '/' or '-', starting with a letter or digit", typ)}
	}
	return nil
}

// compactPayload validates and compacts a payload; empty means null.
func compactPayload(p json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(p)) == 0 {
		return json.RawMessage("null"), nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, p); err != nil {
		return nil, &InvalidError{"payload", "is not valid JSON: " + err.Error()}
	}
	if b.Len() > MaxPayload {
		return nil, &InvalidError{"payload", fmt.Sprintf("is %d bytes of JSON, over the limit of %d; send less, or a reference to a file", b.Len(), MaxPayload)}
	}
	return b.Bytes(), nil
}

// Emit appends an event for agent and wakes this process's followers.
func (s *Store) Emit(ctx context.Context, agent, typ string, payload json.RawMessage) (Event, error) {
	return s.EmitFrom(ctx, agent, "", typ, payload)
}

// EmitFrom is Emit of an event a command of agent's plugin emitted.
func (s *Store) EmitFrom(ctx context.Context, agent, plugin, typ string, payload json.RawMessage) (Event, error) {
	if plugin != "" && !agentRE.MatchString(plugin) {
		return Event{}, &InvalidError{"plugin", fmt.Sprintf("%q is not a plugin id", plugin)}
	}
	if !agentRE.MatchString(agent) {
		return Event{}, &InvalidError{"agent", fmt.Sprintf("%q is not an agent name", agent)}
	}
	if err := CheckType(typ); err != nil {
		return Event{}, err
	}
	p, err := compactPayload(payload)
	if err != nil {
		return Event{}, err
	}
	now := s.o.Now().UTC().Truncate(time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Event{}, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO events(agent, type, payload, created_at, plugin) VALUES (?, ?, ?, ?, ?)`, agent, typ, string(p), now.UnixMilli(), plugin)
	if err != nil {
		return Event{}, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return Event{}, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE agent = ? AND id <= (
		SELECT id FROM events WHERE agent = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`, agent, agent, s.o.MaxPerAgent); err != nil {
		return Event{}, err
	}
	if err := tx.Commit(); err != nil {
		return Event{}, err
	}
	close(s.wake)
	s.wake = make(chan struct{})
	return Event{ID: id, Agent: agent, Type: typ, Payload: p, Time: now, Plugin: plugin}, nil
}

// Filter selects events: of Agent (all when empty), with ids above
// After, the Last n of those (all when 0), oldest first. Type, when set,
// keeps events of that type family (InFamily); Plugin, when set, keeps
// only what that plugin may see: the events it emitted and those of its
// own type family (its id).
type Filter = control.EventFilter

// InFamily reports whether typ is in the type family of family: the type
// itself, or family followed by '.', ':' or '/' and more ("build" has
// "build.done" and "build:x", not "builder").
func InFamily(typ, family string) bool {
	if typ == family {
		return true
	}
	rest, ok := strings.CutPrefix(typ, family)
	return ok && rest != "" && strings.ContainsRune(".:/", rune(rest[0]))
}

// familySQL is InFamily in SQL for the parameter numbered n.
func familySQL(n int) string {
	return fmt.Sprintf(`(type = ?%[1]d OR substr(type, 1, length(?%[1]d) + 1) IN (?%[1]d || '.', ?%[1]d || ':', ?%[1]d || '/'))`, n)
}

// List returns the events f selects, oldest first.
func (s *Store) List(ctx context.Context, f Filter) ([]Event, error) {
	if f.Agent != "" && !agentRE.MatchString(f.Agent) {
		return nil, &InvalidError{"agent", fmt.Sprintf("%q is not an agent name", f.Agent)}
	}
	limit := f.Last
	if limit <= 0 {
		limit = -1
	}
	if f.Type != "" {
		if err := CheckType(f.Type); err != nil {
			return nil, err
		}
	}
	if f.Plugin != "" && !agentRE.MatchString(f.Plugin) {
		return nil, &InvalidError{"plugin", fmt.Sprintf("%q is not a plugin id", f.Plugin)}
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, agent, type, payload, created_at, plugin FROM (
		SELECT * FROM events WHERE id > ?1 AND (?2 = '' OR agent = ?2)
			AND (?4 = '' OR `+familySQL(4)+`)
			AND (?5 = '' OR plugin = ?5 OR `+familySQL(5)+`)
		ORDER BY id DESC LIMIT ?3
	) ORDER BY id`, f.After, f.Agent, limit, f.Type, f.Plugin)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var e Event
		var p string
		var ms int64
		if err := rows.Scan(&e.ID, &e.Agent, &e.Type, &p, &ms, &e.Plugin); err != nil {
			return nil, err
		}
		e.Payload, e.Time = json.RawMessage(p), time.UnixMilli(ms).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}

// Count returns how many events agent has, for `agent show`.
func (s *Store) Count(ctx context.Context, agent string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE agent = ?`, agent).Scan(&n)
	return n, err
}

// MaxPerAgent is how many events each agent keeps in this store.
func (s *Store) MaxPerAgent() int { return s.o.MaxPerAgent }

// LastID is the id of the newest event (0 when there is none), where a
// follower that wants only new events starts.
func (s *Store) LastID(ctx context.Context) (int64, error) {
	var id sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT max(id) FROM events`).Scan(&id)
	return id.Int64, err
}

// Follow calls fn with every event f selects (its Last applies to the
// first batch only) and then each new one as it is emitted, until ctx
// ends or fn fails. Events of this process arrive at once; those of
// another process when the database's files change.
func (s *Store) Follow(ctx context.Context, f Filter, fn func(Event) error) error {
	// Another process's commit appends to the write-ahead log (and a
	// checkpoint writes the database).
	w := filewatch.Watch(ctx, s.o.Poll, filewatch.File(s.path+"-wal"), filewatch.File(s.path))
	defer w.Close()
	var (
		again       <-chan time.Time
		settleUntil time.Time
	)
	for {
		s.mu.Lock()
		wake := s.wake
		s.mu.Unlock()
		es, err := s.List(ctx, f)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		for _, e := range es {
			if err := fn(e); err != nil {
				return err
			}
			f.After = e.ID
		}
		f.Last = 0
		// A commit is seen once the writer updates the shared WAL index,
		// just after its write to the log, which may be what woke this
		// read: look again shortly after, until the events are there.
		if len(es) > 0 {
			settleUntil = time.Time{}
		}
		if again == nil && time.Now().Before(settleUntil) {
			again = time.After(settle)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-w.C():
			settleUntil = time.Now().Add(settleFor)
		case <-again:
			again = nil
		}
	}
}
