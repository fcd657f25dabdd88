package agents

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// FileName is the registry's file in the config directory.
const FileName = "agents.json"

// fileVersion is the format of agents.json this code writes.
const fileVersion = 1

// lockTimeout bounds the wait for another process's modification.
const lockTimeout = 10 * time.Second

// record is an agent as stored: the agent plus its token.
type record struct {
	Agent
	Token string `json:"token"`
}

type fileData struct {
	Version int      `json:"version"`
	Agents  []record `json:"agents"`
}

// Registry is the set of agents. It is safe for concurrent use. Methods
// that take a ref accept an agent's id, slug or name (case-insensitive),
// tried in that order.
type Registry struct {
	path string

	mu   sync.Mutex
	recs []record

	subMu   sync.Mutex
	subs    map[int]func()
	nextSub int
}

// Open loads the registry at path (normally <config dir>/agents.json). A
// missing file is an empty registry; the file is created by the first
// change.
func Open(path string) (*Registry, error) {
	recs, err := load(path)
	if err != nil {
		return nil, err
	}
	return &Registry{path: path, recs: recs, subs: make(map[int]func())}, nil
}

// Path is the registry file.
func (r *Registry) Path() string { return r.path }

// List returns every agent, oldest first.
func (r *Registry) List() []Agent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Agent, len(r.recs))
	for i, rec := range r.recs {
		out[i] = rec.Agent
	}
	return out
}

// Get finds an agent by id, slug or name.
func (r *Registry) Get(ref string) (Agent, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, err := find(r.recs, ref)
	if err != nil {
		return Agent{}, err
	}
	return r.recs[i].Agent, nil
}

// Add creates an agent with default settings, a fresh slug and token.
func (r *Registry) Add(name string) (Agent, error) {
	name = strings.TrimSpace(name)
	if err := validateName(name); err != nil {
		return Agent{}, err
	}
	id, err := newID()
	if err != nil {
		return Agent{}, err
	}
	tok, err := newToken()
	if err != nil {
		return Agent{}, err
	}
	var added Agent
	err = r.modify(func(recs []record) ([]record, error) {
		if err := nameFree(recs, name, ""); err != nil {
			return nil, err
		}
		taken := make(map[string]bool, len(recs))
		for _, rec := range recs {
			taken[rec.Slug] = true
		}
		added = Agent{
			ID:             id,
			Name:           name,
			Slug:           uniqueSlug(name, taken),
			AutonomousExec: DefaultAutonomousExec(),
			CreatedAt:      time.Now().UTC().Truncate(time.Second),
		}
		if err := added.Validate(); err != nil {
			return nil, err
		}
		return append(recs, record{Agent: added, Token: tok}), nil
	})
	return added, err
}

// Update applies fn to a copy of the agent and stores the result if it is
// valid. id, slug and createdAt can't change: the slug names the agent's
// Linux user and home.
func (r *Registry) Update(ref string, fn func(*Agent) error) (Agent, error) {
	var updated Agent
	err := r.modify(func(recs []record) ([]record, error) {
		i, err := find(recs, ref)
		if err != nil {
			return nil, err
		}
		a := recs[i].Agent
		if err := fn(&a); err != nil {
			return nil, err
		}
		old := recs[i].Agent
		switch {
		case a.ID != old.ID:
			return nil, &ValidationError{Field: "id", Got: fmt.Sprintf("%q", a.ID), Want: fmt.Sprintf("%q (it can't change)", old.ID)}
		case a.Slug != old.Slug:
			return nil, &ValidationError{Field: "slug", Got: fmt.Sprintf("%q", a.Slug),
				Want: fmt.Sprintf("%q (it names the Linux user and home, so it can't change; add a new agent instead)", old.Slug)}
		case !a.CreatedAt.Equal(old.CreatedAt):
			return nil, &ValidationError{Field: "createdAt", Got: a.CreatedAt.String(), Want: old.CreatedAt.String() + " (it can't change)"}
		}
		if err := a.Validate(); err != nil {
			return nil, err
		}
		if p, err := a.NetworkPolicy(); err == nil {
			a.AutonomousExec.Network = NetworkSetting(p.String()) // canonical form
		}
		if err := nameFree(recs, a.Name, a.ID); err != nil {
			return nil, err
		}
		recs[i].Agent = a
		updated = a
		return recs, nil
	})
	return updated, err
}

// Remove deletes an agent from the registry and returns it, so the caller
// can remove its Linux user and processes.
func (r *Registry) Remove(ref string) (Agent, error) {
	var removed Agent
	err := r.modify(func(recs []record) ([]record, error) {
		i, err := find(recs, ref)
		if err != nil {
			return nil, err
		}
		removed = recs[i].Agent
		return slices.Delete(recs, i, i+1), nil
	})
	return removed, err
}

// Token returns the agent's MCP bearer token.
func (r *Registry) Token(ref string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, err := find(r.recs, ref)
	if err != nil {
		return "", err
	}
	return r.recs[i].Token, nil
}

// RegenerateToken replaces the agent's token; the old one stops working at
// once in this process.
func (r *Registry) RegenerateToken(ref string) (string, error) {
	tok, err := newToken()
	if err != nil {
		return "", err
	}
	err = r.modify(func(recs []record) ([]record, error) {
		i, err := find(recs, ref)
		if err != nil {
			return nil, err
		}
		recs[i].Token = tok
		return recs, nil
	})
	if err != nil {
		return "", err
	}
	return tok, nil
}

// ByToken finds the agent a bearer token belongs to. Every token is
// compared in constant time, so the timing doesn't reveal how much of a
// guess was right.
func (r *Registry) ByToken(token string) (Agent, bool) {
	if token == "" {
		return Agent{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var found Agent
	ok := false
	for _, rec := range r.recs {
		if subtle.ConstantTimeCompare([]byte(rec.Token), []byte(token)) == 1 {
			found, ok = rec.Agent, true
		}
	}
	return found, ok
}

// Subscribe calls fn after every change to the registry, made by this
// Registry or picked up from the file (by Reload or before a
// modification). fn runs on the goroutine that made the change, after the
// change is visible, and should return quickly. The returned func
// unsubscribes.
func (r *Registry) Subscribe(fn func()) (cancel func()) {
	r.subMu.Lock()
	defer r.subMu.Unlock()
	id := r.nextSub
	r.nextSub++
	r.subs[id] = fn
	return func() {
		r.subMu.Lock()
		delete(r.subs, id)
		r.subMu.Unlock()
	}
}

// Reload re-reads the file, to see changes made by another process.
func (r *Registry) Reload() error {
	recs, err := load(r.path)
	if err != nil {
		return err
	}
	r.mu.Lock()
	changed := !sameRecords(r.recs, recs)
	r.recs = recs
	r.mu.Unlock()
	if changed {
		r.notify()
	}
	return nil
}

// modify runs one read-modify-write cycle under the file lock. fn gets a
// private copy of the current records and returns the new ones.
func (r *Registry) modify(fn func([]record) ([]record, error)) error {
	changed, err := r.modifyLocked(fn)
	if changed {
		r.notify()
	}
	return err
}

func (r *Registry) modifyLocked(fn func([]record) ([]record, error)) (changed bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(r.path), 0o700); err != nil {
		return false, fmt.Errorf("agents: %w", err)
	}
	unlock, err := lockFile(r.path+".lock", lockTimeout)
	if err != nil {
		return false, fmt.Errorf("agents: %w", err)
	}
	defer unlock()

	current, err := load(r.path)
	if err != nil {
		return false, err
	}
	// Whatever happens next, memory now reflects the file.
	changed = !sameRecords(r.recs, current)
	r.recs = current

	next, err := fn(slices.Clone(current))
	if err != nil {
		return changed, err
	}
	if sameRecords(current, next) {
		return changed, nil
	}
	if err := save(r.path, next); err != nil {
		return changed, err
	}
	r.recs = next
	return true, nil
}

func (r *Registry) notify() {
	r.subMu.Lock()
	fns := make([]func(), 0, len(r.subs))
	for _, fn := range r.subs {
		fns = append(fns, fn)
	}
	r.subMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// find resolves a ref: id, then slug, then name ignoring case.
func find(recs []record, ref string) (int, error) {
	for i, rec := range recs {
		if rec.ID == ref {
			return i, nil
		}
	}
	for i, rec := range recs {
		if rec.Slug == ref {
			return i, nil
		}
	}
	for i, rec := range recs {
		if strings.EqualFold(rec.Name, ref) {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w: %q (list agents with `osaurus-sandbox agent list`)", ErrNotFound, ref)
}

// nameFree checks that no agent other than self uses name, ignoring case,
// so a name always finds one agent.
func nameFree(recs []record, name, self string) error {
	for _, rec := range recs {
		if rec.ID != self && strings.EqualFold(rec.Name, name) {
			return &ValidationError{Field: "name", Got: fmt.Sprintf("%q, already used by agent %s", name, rec.Slug), Want: "a name no other agent has"}
		}
	}
	return nil
}

func load(path string) ([]record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agents: %w", err)
	}
	var f fileData
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("agents: %s is not valid: %w", path, err)
	}
	if f.Version > fileVersion {
		return nil, fmt.Errorf("agents: %s has format version %d, newer than this program understands (%d); update osaurus-sandbox", path, f.Version, fileVersion)
	}
	ids, slugs := map[string]bool{}, map[string]bool{}
	for i, rec := range f.Agents {
		bad := func(err error) error {
			return fmt.Errorf("agents: %s: agent %d (%q): %w", path, i+1, rec.Name, err)
		}
		if rec.ID == "" || ids[rec.ID] {
			return nil, bad(fmt.Errorf("%w: missing or duplicate id", ErrInvalid))
		}
		if slugs[rec.Slug] {
			return nil, bad(fmt.Errorf("%w: duplicate slug %q", ErrInvalid, rec.Slug))
		}
		if f.Agents[i].AutonomousExec.Network == "" {
			// A file without the setting fails closed.
			f.Agents[i].AutonomousExec.Network = netpolicy.SettingNone
			rec = f.Agents[i]
		}
		if err := rec.Validate(); err != nil {
			return nil, bad(err)
		}
		if !validToken(rec.Token) {
			return nil, bad(fmt.Errorf("%w: token must be %d hex digits", ErrInvalid, 2*tokenBytes))
		}
		ids[rec.ID], slugs[rec.Slug] = true, true
	}
	return f.Agents, nil
}

func save(path string, recs []record) error {
	if recs == nil {
		recs = []record{}
	}
	b, err := json.MarshalIndent(fileData{Version: fileVersion, Agents: recs}, "", "  ")
	if err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	// 0600: the file holds bearer tokens.
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	return nil
}

func sameRecords(a, b []record) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// tokenBytes is 256 bits.
const tokenBytes = 32

func newToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("agents: token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func validToken(s string) bool {
	if len(s) != 2*tokenBytes {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// newID returns a random (version 4) UUID.
func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("agents: id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}
