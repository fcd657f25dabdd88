package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/zalando/go-keyring"
)

// Service is the keychain service name every entry is stored under.
const Service = "osaurus-sandbox"

// MinScrubLen is the shortest value Scrub replaces: shorter ones would
// redact ordinary words.
const MinScrubLen = 6

var (
	// ErrNotFound: the agent has no secret of that name.
	ErrNotFound = errdefs.Class(errdefs.ErrNotFound, "secret not found")
	// ErrUnavailable: the keychain can't be reached.
	ErrUnavailable = errdefs.Class(errdefs.ErrUnavailable, "the OS keychain is not available")
	// ErrInvalid: a bad agent name, key or value.
	ErrInvalid = errdefs.Class(errdefs.ErrInvalid, "invalid secret")
)

var (
	agentRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	keyRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// Backend holds the values: the app uses the one its secretStore setting
// names (ForDataDir): Keychain, File or Clients. Tests of other packages may pass
// an in-memory one. An absent entry is keyring.ErrNotFound.
type Backend interface {
	Set(service, user, value string) error
	Get(service, user string) (string, error)
	Delete(service, user string) error
}

// ContextBackend is a Backend whose calls can end with their caller's
// ctx: Clients, whose every call is a request to another machine that a
// tool call or bridge request gone away need not wait for. The local
// stores answer at once and need no ctx.
type ContextBackend interface {
	GetContext(ctx context.Context, service, user string) (string, error)
	SetContext(ctx context.Context, service, user, value string) error
	DeleteContext(ctx context.Context, service, user string) error
}

// getCtx, setCtx and delCtx call b, with ctx when it takes one.
func getCtx(ctx context.Context, b Backend, service, user string) (string, error) {
	if cb, ok := b.(ContextBackend); ok {
		return cb.GetContext(ctx, service, user)
	}
	return b.Get(service, user)
}

func setCtx(ctx context.Context, b Backend, service, user, value string) error {
	if cb, ok := b.(ContextBackend); ok {
		return cb.SetContext(ctx, service, user, value)
	}
	return b.Set(service, user, value)
}

func delCtx(ctx context.Context, b Backend, service, user string) error {
	if cb, ok := b.(ContextBackend); ok {
		return cb.DeleteContext(ctx, service, user)
	}
	return b.Delete(service, user)
}

// Keychain is the OS keychain through go-keyring.
type Keychain struct{}

// Each call first checks a session bus is there: the D-Bus library would
// otherwise launch one, leaving daemons behind.
func (Keychain) Set(service, user, value string) error {
	if err := checkBus(); err != nil {
		return err
	}
	return keyring.Set(service, user, value)
}

func (Keychain) Get(service, user string) (string, error) {
	if err := checkBus(); err != nil {
		return "", err
	}
	return keyring.Get(service, user)
}

func (Keychain) Delete(service, user string) error {
	if err := checkBus(); err != nil {
		return err
	}
	return keyring.Delete(service, user)
}

// Where names the store in messages.
func (Keychain) Where() string { return "the OS keychain" }

// Store is the per-agent secret store.
type Store struct {
	B Backend
	// Marks is the file of agents whose secrets are marked for removal
	// (see RemoveAll); empty: none are kept.
	Marks string
	mu    sync.Mutex // serialises index updates within this process

	knownMu sync.Mutex
	known   map[string]map[string]string // agent → the values last read or set here
}

// NewKeychain returns a store on the OS keychain that keeps no removal
// marks, for tests; the app uses ForDataDir, which honours the
// secretStore setting.
func NewKeychain() *Store { return &Store{B: Keychain{}} }

func entry(agent, key string) string { return agent + "/" + key }
func indexEntry(agent string) string { return agent + "/" }

// CheckKey validates a secret name: an environment variable name.
func CheckKey(key string) error {
	if !keyRE.MatchString(key) {
		return fmt.Errorf("%w: key %q: use letters, digits and '_' (not starting with a digit), at most 128", ErrInvalid, key)
	}
	return nil
}

func checkAgent(agent string) error {
	if !agentRE.MatchString(agent) {
		return fmt.Errorf("%w: agent name %q: use the agent's short name (lower-case letters, digits, '-' or '_')", ErrInvalid, agent)
	}
	return nil
}

// fileHint is the way out on a machine with no keychain.
const fileHint = "on a server without a desktop session, keep secrets in a file only you can read instead: `osaurus-sandbox config set secretStore file` (see docs/secrets.md)"

// hint says how to get a keychain on this OS, or do without one.
func hint() string {
	if runtime.GOOS == "linux" {
		return "no Secret Service answers on the session D-Bus; run a keyring daemon (e.g. gnome-keyring) in your desktop session, or, " + fileHint
	}
	return "the login keychain is locked or unavailable; unlock it in Keychain Access, or, " + fileHint
}

func (s *Store) wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, keyring.ErrNotFound) {
		return ErrNotFound
	}
	// The caller gave up (ContextBackend): its own error, not the store's.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	// Already explained: the bus check's, and the file store's own.
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalid) {
		return err
	}
	return fmt.Errorf("%w: %v (%s)", ErrUnavailable, err, hint())
}

// Set stores an agent's secret.
func (s *Store) Set(agent, key, value string) error {
	return s.SetContext(context.Background(), agent, key, value)
}

// SetContext is Set, given up when ctx ends while the backend asks
// another machine (secretStore client).
func (s *Store) SetContext(ctx context.Context, agent, key, value string) error {
	if err := checkAgent(agent); err != nil {
		return err
	}
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := checkValue(key, value); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.settle(ctx, agent); err != nil {
		return err
	}
	if err := setCtx(ctx, s.B, ServiceName(), entry(agent, key), value); err != nil {
		return s.wrap(err)
	}
	s.remember(agent, map[string]string{key: value})
	names, err := s.list(ctx, agent)
	if err != nil {
		return err
	}
	if !slices.Contains(names, key) {
		return s.writeIndex(ctx, agent, append(names, key))
	}
	return nil
}

// Get returns an agent's secret, ErrNotFound when it has none of that name.
func (s *Store) Get(agent, key string) (string, error) {
	return s.GetContext(context.Background(), agent, key)
}

// GetContext is Get, given up when ctx ends while the backend asks
// another machine (secretStore client).
func (s *Store) GetContext(ctx context.Context, agent, key string) (string, error) {
	if err := checkAgent(agent); err != nil {
		return "", err
	}
	if err := CheckKey(key); err != nil {
		return "", ErrNotFound // a name that can't exist is simply absent
	}
	s.mu.Lock()
	err := s.settle(ctx, agent)
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	v, err := getCtx(ctx, s.B, ServiceName(), entry(agent, key))
	if err == nil {
		// For Scrub while the store can't be read: with secretStore
		// client, once the machine that holds the values disconnects.
		s.remember(agent, map[string]string{key: v})
	}
	return v, s.wrap(err)
}

// Remove deletes an agent's secret; removing an absent one is ErrNotFound.
func (s *Store) Remove(agent, key string) error {
	if err := checkAgent(agent); err != nil {
		return err
	}
	if err := CheckKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx := context.Background()
	if err := s.settle(ctx, agent); err != nil {
		return err
	}
	derr := s.wrap(delCtx(ctx, s.B, ServiceName(), entry(agent, key)))
	if derr != nil && !errors.Is(derr, ErrNotFound) {
		return derr
	}
	names, err := s.list(ctx, agent)
	if err != nil {
		return err
	}
	if i := slices.Index(names, key); i >= 0 {
		if err := s.writeIndex(ctx, agent, slices.Delete(names, i, i+1)); err != nil {
			return err
		}
		return nil
	}
	return derr
}

// RemoveAll deletes every secret of an agent, for when the agent is
// removed: a later agent of the same name must not inherit them. It
// returns the names it deleted. When the keychain can't delete them now,
// the agent is marked (in Marks) and its secrets are deleted before
// anything next touches that name; marked reports that.
func (s *Store) RemoveAll(agent string) (done []string, err error) {
	if err := checkAgent(agent); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	done, err = s.removeAll(context.Background(), agent)
	if err != nil {
		if merr := s.mark(agent); merr != nil {
			return done, fmt.Errorf("%w; and they could not be marked for removal: %v", err, merr)
		}
		return done, &MarkedError{Agent: agent, Err: err}
	}
	return done, nil
}

// MarkedError: RemoveAll could not delete the secrets now and marked them
// for removal; they go before any later use of the name.
type MarkedError struct {
	Agent string
	Err   error
}

func (e *MarkedError) Error() string {
	return fmt.Sprintf("%v; they are marked for removal and will be deleted before an agent named %s uses secrets again", e.Err, e.Agent)
}
func (e *MarkedError) Unwrap() error { return e.Err }

func (s *Store) removeAll(ctx context.Context, agent string) ([]string, error) {
	names, err := s.list(ctx, agent)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, n := range names {
		if err := s.wrap(delCtx(ctx, s.B, ServiceName(), entry(agent, n))); err != nil && !errors.Is(err, ErrNotFound) {
			// Keep the index of what is left, so a retry finds it.
			return done, errors.Join(err, s.writeIndex(ctx, agent, slices.DeleteFunc(names, func(x string) bool { return slices.Contains(done, x) })))
		}
		done = append(done, n)
	}
	if err := s.writeIndex(ctx, agent, nil); err != nil {
		return done, err
	}
	s.knownMu.Lock()
	delete(s.known, agent)
	s.knownMu.Unlock()
	return done, nil
}

// List returns the names of an agent's secrets, sorted.
func (s *Store) List(agent string) ([]string, error) {
	if err := checkAgent(agent); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx := context.Background()
	if err := s.settle(ctx, agent); err != nil {
		return nil, err
	}
	return s.list(ctx, agent)
}

func (s *Store) list(ctx context.Context, agent string) ([]string, error) {
	b, err := getCtx(ctx, s.B, ServiceName(), indexEntry(agent))
	if errors.Is(err, keyring.ErrNotFound) {
		return []string{}, nil
	}
	if err != nil {
		return nil, s.wrap(err)
	}
	var names []string
	if err := json.Unmarshal([]byte(b), &names); err != nil {
		return nil, fmt.Errorf("%w: the index of %s's secrets in %s is corrupt: %v", ErrUnavailable, agent, s.Where(), err)
	}
	sort.Strings(names)
	return names, nil
}

func (s *Store) writeIndex(ctx context.Context, agent string, names []string) error {
	if len(names) == 0 {
		err := delCtx(ctx, s.B, ServiceName(), indexEntry(agent))
		if errors.Is(err, keyring.ErrNotFound) {
			return nil
		}
		return s.wrap(err)
	}
	sort.Strings(names)
	b, _ := json.Marshal(names)
	return s.wrap(setCtx(ctx, s.B, ServiceName(), indexEntry(agent), string(b)))
}

// Values returns an agent's secrets by name.
func (s *Store) Values(agent string) (map[string]string, error) {
	names, err := s.List(agent)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(names))
	for _, n := range names {
		v, err := s.Get(agent, n)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[n] = v
	}
	return out, nil
}

// remember keeps values this process has seen, for Scrub to fall back on.
func (s *Store) remember(agent string, vals map[string]string) {
	s.knownMu.Lock()
	defer s.knownMu.Unlock()
	if s.known == nil {
		s.known = map[string]map[string]string{}
	}
	if s.known[agent] == nil {
		s.known[agent] = map[string]string{}
	}
	for k, v := range vals {
		s.known[agent][k] = v
	}
}

// Scrub replaces the agent's secret values in text. When the keychain
// can't be read right now, the values this process read or stored before
// are still replaced; a machine without any keychain has no secrets to
// hide, so its output passes unchanged rather than every result of every
// agent being withheld.
func (s *Store) Scrub(agent, text string) string {
	if text == "" || checkAgent(agent) != nil {
		return text
	}
	vals, err := s.Values(agent)
	if err == nil {
		s.remember(agent, vals)
	}
	s.knownMu.Lock()
	all := make(map[string]string, len(vals)+len(s.known[agent]))
	for k, v := range s.known[agent] {
		all[k] = v
	}
	s.knownMu.Unlock()
	for k, v := range vals {
		all[k] = v
	}
	return ScrubValues(all, text)
}

// Redact is Scrub under the tools package's Redactor interface.
func (s *Store) Redact(agent, text string) string { return s.Scrub(agent, text) }

// minPartial is the shortest piece of a cut value Scrub replaces: one or
// two characters would redact ordinary text next to every cut and reveal
// next to nothing.
const minPartial = 3

// echoForms are v as JSON and URLs write it, when that differs from v.
func echoForms(v string) []string {
	var out []string
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) == nil {
		if j := strings.TrimSuffix(strings.TrimSuffix(b.String(), "\n"), `"`)[1:]; j != v {
			out = append(out, j)
		}
	}
	if h, _ := json.Marshal(v); string(h[1:len(h)-1]) != v {
		out = append(out, string(h[1:len(h)-1])) // HTML-safe JSON (\u0026, \u003c)
	}
	for _, u := range []string{url.QueryEscape(v), url.PathEscape(v)} {
		if u != v {
			out = append(out, u)
		}
	}
	return out
}

// omittedRE is the marker tools put between the head and tail of
// truncated output.
var omittedRE = regexp.MustCompile(`\n\n\[\.\.\. \d+ bytes omitted of \d+ \.\.\.\]\n\n`)

// ScrubValues replaces each value (6+ characters) with [REDACTED:KEY].
// Around a truncation marker it also replaces a value's beginning that
// ends the head and its end that starts the tail, so a secret cut in two
// by truncation is not shown in halves.
func ScrubValues(vals map[string]string, text string) string {
	keys := make([]string, 0, len(vals))
	for k, v := range vals {
		if len(v) >= MinScrubLen {
			keys = append(keys, k)
		}
	}
	// Longer values first, so a value containing another is replaced whole.
	sort.Slice(keys, func(i, j int) bool {
		if len(vals[keys[i]]) != len(vals[keys[j]]) {
			return len(vals[keys[i]]) > len(vals[keys[j]])
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		text = strings.ReplaceAll(text, vals[k], "[REDACTED:"+k+"]")
		// The forms a program prints a value in without meaning to
		// encode it: inside a JSON string, and in a URL.
		for _, form := range echoForms(vals[k]) {
			text = strings.ReplaceAll(text, form, "[REDACTED:"+k+"]")
		}
	}
	loc := omittedRE.FindStringIndex(text)
	if loc == nil {
		return text
	}
	head, marker, tail := text[:loc[0]], text[loc[0]:loc[1]], text[loc[1]:]
	for _, k := range keys {
		v := vals[k]
		// The longest proper prefix of v that ends the head.
		for n := len(v) - 1; n >= minPartial; n-- {
			if strings.HasSuffix(head, v[:n]) {
				head = head[:len(head)-n] + "[REDACTED:" + k + "]"
				break
			}
		}
		for n := len(v) - 1; n >= minPartial; n-- {
			if strings.HasPrefix(tail, v[len(v)-n:]) {
				tail = "[REDACTED:" + k + "]" + tail[n:]
				break
			}
		}
	}
	return head + marker + tail
}
