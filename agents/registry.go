package agents

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/internal/filelock"
	"github.com/osaurus/osaurus-sandbox/internal/subscribers"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// FileName is the registry's file in the config directory.
const FileName = "agents.json"

// fileVersion is the format of agents.json this code writes.
const fileVersion = 1

// lockTimeout bounds the wait for another process's modification.
const lockTimeout = 10 * time.Second

var errLockTimeout = fmt.Errorf("held for over %s", lockTimeout)

// record is an agent as stored: the agent plus its token.
type record struct {
	Agent
	Token string `json:"token"`
}

type fileData struct {
	Version int      `json:"version"`
	Agents  []record `json:"agents"`
	uidState
}

// uidState is the file's memory of Linux uids: the next one to try and
// those of removed agents, which are never handed out again (a kept home,
// or files in /workspace/shared, still belong to them).
type uidState struct {
	NextUID int       `json:"nextUID,omitempty"`
	Retired []Retired `json:"retiredUIDs,omitempty"`
}

// Retired is the uid a removed agent had, remembered with its slug so an
// agent added later with --adopt-home gets its files back under the same
// uid.
type Retired struct {
	UID  int    `json:"uid"`
	Slug string `json:"slug"`
}

// Registry is the set of agents. It is safe for concurrent use. Methods
// that take a ref accept an agent's id, slug or name (case-insensitive),
// tried in that order.
type Registry struct {
	path     string
	readOnly bool // OpenReadOnly: every change fails

	mu   sync.Mutex
	recs []record
	uids uidState
	seen os.FileInfo // the file as of the last Reload, for ReloadIfChanged
	// fetch, for a Mirror, is where Reload reads the agents: another
	// machine's owner, which has the file.
	fetch func() ([]Agent, error)

	subs subscribers.List[struct{}]
}

// Open loads the registry at path (normally <config dir>/agents.json). A
// missing file is an empty registry; the file is created by the first
// change.
func Open(path string) (*Registry, error) {
	f, err := load(path)
	if err != nil {
		return nil, err
	}
	return &Registry{path: path, recs: f.Agents, uids: f.uidState}, nil
}

// OpenReadOnly loads the registry of a process that only reads it (the
// CLI, a window that doesn't own the data folder, the stdio MCP server):
// the owner is agents.json's one writer (api.AgentOps), and every change
// made through this Registry fails. Reload follows the owner's changes.
func OpenReadOnly(path string) (*Registry, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	r.readOnly = true
	return r, nil
}

// Mirror is a read-only registry of the agents another machine's owner
// has (a remote context's, asked over the control protocol): there is no
// file here to read, so Reload and ReloadIfChanged call fetch. Tokens are
// not carried: Token fails.
func Mirror(fetch func() ([]Agent, error)) (*Registry, error) {
	r := &Registry{readOnly: true, fetch: fetch}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// reloadMirror is Reload of a Mirror.
func (r *Registry) reloadMirror() error {
	list, err := r.fetch()
	if err != nil {
		return err
	}
	recs := make([]record, len(list))
	for i, a := range list {
		recs[i] = record{Agent: a}
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

// errReadOnly: a change through a registry opened by OpenReadOnly.
var errReadOnly = fmt.Errorf("%w: agents: this process only reads the registry; its changes go through the owner of the data folder", agentproto.ErrUnsupported)

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

// Add creates an agent with default settings, a fresh slug and token,
// refusing a name whose home is left over (see AddWith).
func (r *Registry) Add(name string) (Agent, error) { return r.AddWith(name, AddOptions{}) }

// AddWith creates an agent with default settings, a fresh slug, token and
// Linux uid. The uid is new: no agent, removed agent, or (as far as the
// host sees) file under <Workspace>/agents has it.
func (r *Registry) AddWith(name string, o AddOptions) (Agent, error) {
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
	err = r.modifyAll(func(f *fileData) error {
		recs := f.Agents
		if err := nameFree(recs, name, ""); err != nil {
			return err
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
		if err := o.prepareHome(added.Slug); err != nil {
			return err
		}
		added.AdoptHome = o.Home == HomeAdopt
		uid, err := f.allocUID(added.Slug, o)
		if err != nil {
			return err
		}
		added.UID = uid
		if err := added.Validate(); err != nil {
			return err
		}
		f.Agents = append(recs, record{Agent: added, Token: tok})
		return nil
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
		case a.UID != old.UID || a.AdoptHome != old.AdoptHome:
			return nil, &ValidationError{Field: "uid", Got: fmt.Sprint(a.UID), Want: fmt.Sprintf("%d (the Linux uid can't change)", old.UID)}
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
// can remove its Linux user and processes. Its uid is retired: never given
// to another agent, except one that adopts its home.
func (r *Registry) Remove(ref string) (Agent, error) {
	var removed Agent
	err := r.modifyAll(func(f *fileData) error {
		i, err := find(f.Agents, ref)
		if err != nil {
			return err
		}
		removed = f.Agents[i].Agent
		f.Agents = slices.Delete(f.Agents, i, i+1)
		f.Retired = slices.DeleteFunc(f.Retired, func(x Retired) bool { return x.UID == removed.UID })
		f.Retired = append(f.Retired, Retired{UID: removed.UID, Slug: removed.Slug})
		return nil
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
	if r.fetch != nil {
		return "", errMirrorToken
	}
	return r.recs[i].Token, nil
}

var errMirrorToken = fmt.Errorf("%w: agents: the token is kept on the agent's own machine", agentproto.ErrUnsupported)

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
	return r.subs.Add(func(struct{}) { fn() })
}

// Reload re-reads the file, to see changes made by another process.
func (r *Registry) Reload() error {
	if r.fetch != nil {
		return r.reloadMirror()
	}
	// Under mu, as modify's whole cycle is: a read begun before one of
	// this registry's writes must not land after it and put the old
	// records back (a Dispatch then missed a dispatchTo just granted).
	r.mu.Lock()
	// Stat first: a write between the stat and the read is read now and
	// read again by the next ReloadIfChanged, never missed.
	fi, _ := os.Stat(r.path)
	f, err := load(r.path)
	if err != nil {
		r.mu.Unlock()
		return err
	}
	changed := !sameRecords(r.recs, f.Agents)
	r.recs, r.uids, r.seen = f.Agents, f.uidState, fi
	r.mu.Unlock()
	if changed {
		r.notify()
	}
	return nil
}

// ReloadIfChanged reloads when the file changed since the last Reload
// (every save replaces it, so a new file, size or time): a stat, so a
// caller can afford it before acting on a setting another process may
// have just changed.
func (r *Registry) ReloadIfChanged() error {
	if r.fetch != nil {
		return r.reloadMirror() // nothing here says whether it changed
	}
	fi, err := os.Stat(r.path)
	r.mu.Lock()
	seen := r.seen
	r.mu.Unlock()
	if err == nil && seen != nil && os.SameFile(fi, seen) && fi.Size() == seen.Size() && fi.ModTime().Equal(seen.ModTime()) {
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) && seen == nil {
		return nil // still no file: still the empty registry
	}
	return r.Reload()
}

// modify runs one read-modify-write cycle under the file lock. fn gets a
// private copy of the current records and returns the new ones.
func (r *Registry) modify(fn func([]record) ([]record, error)) error {
	return r.modifyAll(func(f *fileData) error {
		next, err := fn(f.Agents)
		if err != nil {
			return err
		}
		f.Agents = next
		return nil
	})
}

// modifyAll is modify with the whole file, uid memory included.
func (r *Registry) modifyAll(fn func(*fileData) error) error {
	changed, err := r.modifyLocked(fn)
	if changed {
		r.notify()
	}
	return err
}

func (r *Registry) modifyLocked(fn func(*fileData) error) (changed bool, err error) {
	if r.readOnly {
		return false, errReadOnly
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(r.path), 0o700); err != nil {
		return false, fmt.Errorf("agents: %w", err)
	}
	ctx, cancel := context.WithTimeoutCause(context.Background(), lockTimeout, errLockTimeout)
	defer cancel()
	lock, err := filelock.Acquire(ctx, r.path+".lock")
	if err != nil {
		return false, fmt.Errorf("agents: %w", err)
	}
	defer lock.Unlock()

	cur, err := load(r.path)
	if err != nil {
		return false, err
	}
	// Whatever happens next, memory now reflects the file.
	changed = !sameRecords(r.recs, cur.Agents)
	r.recs, r.uids = cur.Agents, cur.uidState

	next := fileData{Agents: slices.Clone(cur.Agents), uidState: uidState{NextUID: cur.NextUID, Retired: slices.Clone(cur.Retired)}}
	if err := fn(&next); err != nil {
		return changed, err
	}
	if sameRecords(cur.Agents, next.Agents) && sameUIDs(cur.uidState, next.uidState) && !cur.migrated {
		return changed, nil
	}
	if err := save(r.path, next); err != nil {
		return changed, err
	}
	r.recs, r.uids = next.Agents, next.uidState
	// Its own write is no news to ReloadIfChanged.
	if fi, err := os.Stat(r.path); err == nil {
		r.seen = fi
	}
	return true, nil
}

func (r *Registry) notify() { r.subs.Notify(struct{}{}) }

// find resolves a ref: an id (random, so it names one agent), else the
// one agent whose slug is ref or whose name is ref ignoring case. A ref
// that is one agent's slug and another's name ("my-bot" beside "My Bot")
// names neither: an *AmbiguousError lists both, so a command never acts
// on an agent the user did not mean.
func find(recs []record, ref string) (int, error) {
	for i, rec := range recs {
		if rec.ID == ref {
			return i, nil
		}
	}
	var hits []int
	for i, rec := range recs {
		if rec.Slug == ref || strings.EqualFold(rec.Name, ref) {
			hits = append(hits, i)
		}
	}
	switch len(hits) {
	case 0:
		return -1, fmt.Errorf("%w: %q (list agents with `osaurus-sandbox agent list`)", ErrNotFound, ref)
	case 1:
		return hits[0], nil
	}
	e := &AmbiguousError{Ref: ref}
	for _, i := range hits {
		e.Candidates = append(e.Candidates, recs[i].Agent)
	}
	return -1, e
}

// findSlug resolves an exact slug, for callers that hold one (the bridge,
// the guest's user names): a slug is unique.
func findSlug(recs []record, slug string) (int, error) {
	for i, rec := range recs {
		if rec.Slug == slug {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w: no agent has the slug %q", ErrNotFound, slug)
}

// GetSlug finds an agent by its exact slug.
func (r *Registry) GetSlug(slug string) (Agent, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, err := findSlug(r.recs, slug)
	if err != nil {
		return Agent{}, err
	}
	return r.recs[i].Agent, nil
}

// AmbiguousError: a ref is the slug or name of more than one agent.
type AmbiguousError struct {
	Ref        string
	Candidates []Agent
}

func (e *AmbiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q matches %d agents; name one by its id or slug:", e.Ref, len(e.Candidates))
	for _, a := range e.Candidates {
		fmt.Fprintf(&b, "\n  %q  slug %s  id %s", a.Name, a.Slug, a.ID)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrAmbiguous) true.
func (e *AmbiguousError) Is(target error) bool {
	return target == ErrAmbiguous || errors.Is(ErrAmbiguous, target)
}

// nameFree checks that no agent other than self uses name, ignoring case,
// or a name that folds to the same slug ("Data Analyst", "data_analyst"),
// or has name as its slug: a name or slug always finds one agent.
func nameFree(recs []record, name, self string) error {
	f := folded(name)
	for _, rec := range recs {
		switch {
		case rec.ID == self:
		case strings.EqualFold(rec.Name, name):
			return &ValidationError{Field: "name", Got: fmt.Sprintf("%q, already used by agent %s", name, rec.Slug), Want: "a name no other agent has"}
		case f == folded(rec.Name) || f == rec.Slug:
			return &ValidationError{Field: "name", Got: fmt.Sprintf("%q, too like agent %q (slug %s): both would be %q on the command line", name, rec.Name, rec.Slug, f),
				Want: "a name that differs in letters or digits, not only in case, spaces or punctuation"}
		}
	}
	return nil
}

// loaded is the file as read; migrated says uids were just assigned to
// agents that had none, so the next modification saves them.
type loaded struct {
	fileData
	migrated bool
}

func load(path string) (loaded, error) {
	var f loaded
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("agents: %w", err)
	}
	if err := json.Unmarshal(b, &f.fileData); err != nil {
		return f, &DamagedError{Path: path, Err: errors.New(jsonProblem(b, err))}
	}
	if f.Version > fileVersion {
		return f, fmt.Errorf("agents: %s has format version %d, newer than this program understands (%d); update osaurus-sandbox", path, f.Version, fileVersion)
	}
	ids, slugs := map[string]bool{}, map[string]bool{}
	for i, rec := range f.Agents {
		bad := func(err error) error {
			return &DamagedError{Path: path, Err: fmt.Errorf("agent %d (%q): %w", i+1, rec.Name, err)}
		}
		if rec.ID == "" || ids[rec.ID] {
			return f, bad(fmt.Errorf("%w: missing or duplicate id", ErrInvalid))
		}
		if slugs[rec.Slug] {
			return f, bad(fmt.Errorf("%w: duplicate slug %q", ErrInvalid, rec.Slug))
		}
		if f.Agents[i].AutonomousExec.Network == "" {
			// A file without the setting fails closed.
			f.Agents[i].AutonomousExec.Network = netpolicy.SettingNone
			rec = f.Agents[i]
		}
		if err := rec.Validate(); err != nil {
			return f, bad(err)
		}
		if !validToken(rec.Token) {
			return f, bad(fmt.Errorf("%w: token must be %d hex digits", ErrInvalid, 2*tokenBytes))
		}
		ids[rec.ID], slugs[rec.Slug] = true, true
	}
	if err := f.checkUIDs(); err != nil {
		return f, &DamagedError{Path: path, Err: err}
	}
	// Agents from before uids were fixed get one now, in file order, so
	// every process reading this file agrees; their old home is adopted.
	for i := range f.Agents {
		if f.Agents[i].UID == 0 {
			uid, err := f.allocUID(f.Agents[i].Slug, AddOptions{})
			if err != nil {
				return f, fmt.Errorf("agents: %s: %w", path, err)
			}
			f.Agents[i].UID, f.Agents[i].AdoptHome = uid, true
			f.migrated = true
		}
	}
	return f, nil
}

func save(path string, f fileData) error {
	if f.Agents == nil {
		f.Agents = []record{}
	}
	f.Version = fileVersion
	b, err := json.MarshalIndent(f, "", "  ")
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

// DamagedError: agents.json can't be used as it is (not JSON, a value of
// the wrong type, an agent that doesn't validate). It names the file and
// the way back: Repair.
type DamagedError struct {
	Path string
	Err  error
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("agents: %s is damaged: %v. No agent, and no MCP server of one, works until it is repaired: `osaurus-sandbox agent repair` keeps every agent it can still read, moves the file aside (%s.damaged-TIME) and writes the rest (with none readable, it starts with no agents)",
		e.Path, e.Err, filepath.Base(e.Path))
}

func (e *DamagedError) Unwrap() error { return ErrInvalid }

// jsonProblem says where and what a JSON decoding error is, without Go's
// type names.
func jsonProblem(b []byte, err error) string {
	line := func(off int64) int { return 1 + bytes.Count(b[:min(max(off, 0), int64(len(b)))], []byte("\n")) }
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected end of JSON input"):
		return fmt.Sprintf("line %d: it ends in the middle (cut short?)", line(int64(len(b))))
	case errors.As(err, &se):
		return fmt.Sprintf("line %d: %v", line(se.Offset), se)
	case errors.As(err, &te):
		field := te.Field
		if i := strings.LastIndex(field, "."); i >= 0 {
			field = field[i+1:]
		}
		return fmt.Sprintf("line %d: %q holds a %s where a %s belongs", line(te.Offset), field, te.Value, kindOf(te.Type.Kind().String()))
	}
	return err.Error()
}

func kindOf(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"), strings.HasPrefix(k, "float"):
		return "number"
	case k == "slice":
		return "list"
	case k == "struct", k == "map":
		return "object"
	case k == "bool":
		return "true or false"
	}
	return k
}

// RepairResult is what Repair did.
type RepairResult struct {
	Kept    []Agent
	Dropped []string // the agents (or parts of the file) it could not read, and why
	Aside   string   // where the damaged file is now; "" when nothing needed repair
}

// Repair rewrites a damaged agents.json with every agent that can still
// be read and checks out, keeping the damaged file beside it
// (agents.json.damaged-TIME). An intact file is left alone.
func Repair(path string) (RepairResult, error) {
	var res RepairResult
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return res, fmt.Errorf("agents: %w", err)
	}
	ctx, cancel := context.WithTimeoutCause(context.Background(), lockTimeout, errLockTimeout)
	defer cancel()
	lock, err := filelock.Acquire(ctx, path+".lock")
	if err != nil {
		return res, fmt.Errorf("agents: %w", err)
	}
	defer lock.Unlock()
	f, err := load(path)
	var dmg *DamagedError
	if !errors.As(err, &dmg) {
		for _, rec := range f.Agents {
			res.Kept = append(res.Kept, rec.Agent)
		}
		return res, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return res, fmt.Errorf("agents: %w", err)
	}
	raws, state, why := salvage(b)
	if why != "" {
		res.Dropped = append(res.Dropped, why)
	}
	var kept fileData
	ids, slugs, uids := map[string]bool{}, map[string]bool{}, map[int]bool{}
	for i, raw := range raws {
		var rec record
		var named struct{ Name string }
		json.Unmarshal(raw, &named)
		drop := func(err error) {
			res.Dropped = append(res.Dropped, fmt.Sprintf("agent %d (%q): %v", i+1, named.Name, err))
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			drop(errors.New(jsonProblem(raw, err)))
			continue
		}
		if rec.AutonomousExec.Network == "" {
			rec.AutonomousExec.Network = netpolicy.SettingNone
		}
		switch err := rec.Validate(); {
		case rec.ID == "" || ids[rec.ID]:
			drop(errors.New("missing or duplicate id"))
		case slugs[rec.Slug]:
			drop(fmt.Errorf("duplicate slug %q", rec.Slug))
		case rec.UID != 0 && uids[rec.UID]:
			drop(fmt.Errorf("duplicate uid %d", rec.UID))
		case err != nil:
			drop(err)
		case !validToken(rec.Token):
			drop(errors.New("bad token"))
		default:
			ids[rec.ID], slugs[rec.Slug], uids[rec.UID] = true, true, true
			kept.Agents = append(kept.Agents, rec)
		}
	}
	kept.uidState = state
	if kept.checkUIDs() != nil {
		// The uid memory is what is damaged: start it again above every
		// uid kept (a removed agent's uid is not remembered any more).
		kept.uidState = uidState{}
		for _, rec := range kept.Agents {
			kept.NextUID = max(kept.NextUID, rec.UID+1)
		}
		if err := kept.checkUIDs(); err != nil {
			return res, &DamagedError{Path: path, Err: err}
		}
	}
	res.Aside = path + ".damaged-" + time.Now().UTC().Format("20060102T150405Z")
	if err := atomicfile.WriteFile(res.Aside, b, 0o600); err != nil {
		return res, fmt.Errorf("agents: keeping the damaged file: %w", err)
	}
	if err := save(path, kept); err != nil {
		return res, err
	}
	for _, rec := range kept.Agents {
		res.Kept = append(res.Kept, rec.Agent)
	}
	return res, nil
}

// salvage reads what it can of a damaged file: each agent's JSON up to
// where the file breaks, and the uid memory if it reads; why says what
// was cut off.
func salvage(b []byte) (raws []json.RawMessage, state uidState, why string) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, state, "the file is not a JSON object: nothing could be read"
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return raws, state, "the rest of the file, from " + jsonProblem(b, err)
		}
		switch t {
		case "agents":
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return raws, state, "\"agents\" is not a list"
			}
			for dec.More() {
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return raws, state, "the rest of the file, from " + jsonProblem(b, err)
				}
				raws = append(raws, raw)
			}
			if _, err := dec.Token(); err != nil {
				return raws, state, "the rest of the file, from " + jsonProblem(b, err)
			}
		default:
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return raws, state, "the rest of the file, from " + jsonProblem(b, err)
			}
			switch t {
			case "nextUID":
				json.Unmarshal(raw, &state.NextUID)
			case "retiredUIDs":
				json.Unmarshal(raw, &state.Retired)
			}
		}
	}
	return raws, state, ""
}
