package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/osaurus/osaurus-sandbox/errdefs"
)

// ErrChanged: sandbox.json changed between the read a change was based
// on and the write (another front end saved it, or it was edited by hand).
var ErrChanged = errdefs.Class(errdefs.ErrBusy, "sandbox.json changed since it was read")

// Revision is what a change to sandbox.json is based on: the SHA-256 of
// its bytes, "" when there is no file.
func Revision(b []byte, exists bool) string {
	if !exists {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// FileState is sandbox.json as LoadSandboxLenient reads it, with its
// Revision.
type FileState struct {
	Settings Sandbox
	Problems []Problem
	// Damaged: the file is not JSON (Settings are the defaults).
	Damaged  *DamagedError
	Revision string
}

// ReadState reads sandbox.json for a front end that may change it later
// with SaveChanges.
func ReadState(path string) (FileState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return FileState{Settings: Defaults()}, nil
	}
	if err != nil {
		return FileState{}, err
	}
	st := FileState{Settings: Defaults(), Revision: Revision(b, true)}
	r, err := parseRaw(path, b)
	if errors.As(err, &st.Damaged) {
		return st, nil
	}
	if err != nil {
		return FileState{}, err
	}
	st.Settings, st.Problems = r.check()
	return st, nil
}

// Changes is a change to sandbox.json a front end asks for.
type Changes struct {
	// Settings are the settings wanted: each that differs from the file's
	// (as read leniently) is written; every other entry is kept as written,
	// as SetKey keeps them.
	Settings Sandbox
	// Reset are keys removed from the file first: a known key goes back
	// to its default, an unknown one (a typo) is dropped.
	Reset []string
	// Aside moves the file aside first (MoveAside), so what is not in
	// Settings is at its default: `config reset`, and the fix of a
	// damaged file.
	Aside bool
	// IfRevision is the Revision the change is based on: when the file's
	// is another, nothing is written and the error is ErrChanged.
	IfRevision string
}

// SaveChanges applies ch to sandbox.json, validated as SaveSandbox
// validates, written atomically. It returns the file as it is after, and
// where Aside moved the old one ("" when there was none). Its caller
// keeps two SaveChanges of one file from running at once.
func SaveChanges(path string, ch Changes) (FileState, string, error) {
	b, err := os.ReadFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return FileState{}, "", err
	}
	if rev := Revision(b, exists); rev != ch.IfRevision {
		return FileState{}, "", fmt.Errorf("%w: %s (read again and retry)", ErrChanged, path)
	}
	if err := ch.Settings.Validate(); err != nil {
		return FileState{}, "", err
	}
	aside := ""
	if ch.Aside {
		if aside, err = MoveAside(path); err != nil {
			return FileState{}, "", err
		}
		b, exists = nil, false
	}
	r := rawFile{vals: map[string]json.RawMessage{}, lines: map[string]int{}}
	if exists {
		if r, err = parseRaw(path, b); err != nil {
			return FileState{}, aside, err // damaged: fixed by hand, or with Aside
		}
	}
	for _, k := range ch.Reset {
		if _, ok := r.vals[k]; !ok && !knownKey(k) {
			return FileState{}, aside, unknownKey(k)
		}
		delete(r.vals, k)
	}
	cur, _ := r.check()
	was, next := keyValues(cur), keyValues(ch.Settings)
	for _, d := range keyDocs {
		if bytes.Equal(was[d.Key], next[d.Key]) {
			continue
		}
		if v, ok := next[d.Key]; ok {
			r.vals[d.Key] = v
		} else {
			delete(r.vals, d.Key) // an omitted zero: the default
		}
	}
	if err := r.write(path); err != nil {
		return FileState{}, aside, err
	}
	st, err := ReadState(path)
	return st, aside, err
}

// keyValues is each key's JSON as SaveSandbox writes s.
func keyValues(s Sandbox) map[string]json.RawMessage {
	b, _ := json.Marshal(s)
	var m map[string]json.RawMessage
	json.Unmarshal(b, &m)
	return m
}

// WithDefault is s with key at its default (as ResetKey leaves it).
func (s Sandbox) WithDefault(key string) (Sandbox, error) {
	if !knownKey(key) {
		return s, unknownKey(key)
	}
	m, d := keyValues(s), keyValues(Defaults())
	if v, ok := d[key]; ok {
		m[key] = v
	} else {
		delete(m, key) // omitted when zero: zero is its default
	}
	b, _ := json.Marshal(m)
	var out Sandbox
	err := json.Unmarshal(b, &out)
	return out, err
}
