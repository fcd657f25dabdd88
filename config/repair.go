package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// Problem is one bad entry of a hand-edited sandbox.json.
type Problem struct {
	Key  string // as written in the file ("" when the file doesn't parse)
	Line int    // 1-based; 0 when unknown
	Err  error
}

func (p Problem) String() string {
	fix := fmt.Sprintf("fix it with `osaurus-sandbox config set %s VALUE` or `config reset %s`", p.Key, p.Key)
	if !knownKey(p.Key) {
		fix = fmt.Sprintf("remove it with `osaurus-sandbox config reset %s`", p.Key)
	}
	if p.Key == "" {
		fix = "fix the file by hand, or delete it to start from the defaults"
	}
	return fmt.Sprintf("sandbox.json line %d: %v; %s", p.Line, p.Err, fix)
}

func knownKey(k string) bool {
	return slices.ContainsFunc(keyDocs, func(d struct{ Key, Doc string }) bool { return d.Key == k })
}

// DamagedError: sandbox.json is not a JSON object, so no setting can be
// read from it; the app runs on the defaults until it is fixed by hand
// or moved aside (MoveAside, `config reset`).
type DamagedError struct {
	Path string
	Line int
	Err  error
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("%s line %d is not valid JSON: %v; fix it by hand, or run `osaurus-sandbox config reset` to move it aside (to %s.damaged-TIME) and start from the defaults",
		e.Path, e.Line, e.Err, filepath.Base(e.Path))
}

func (e *DamagedError) Unwrap() error { return ErrInvalid }

// MoveAside renames sandbox.json to sandbox.json.damaged-TIME (when it
// is damaged) or sandbox.json.bak-TIME, so every setting is back at its
// default and nothing written by hand is lost. It returns the new name,
// "" when there was no file.
func MoveAside(path string) (string, error) {
	suffix := ".bak-"
	if _, err := readRaw(path); err != nil {
		var d *DamagedError
		if !errors.As(err, &d) {
			return "", err
		}
		suffix = ".damaged-"
	}
	aside := path + suffix + time.Now().UTC().Format("20060102T150405Z")
	if err := os.Rename(path, aside); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		return "", err
	}
	return aside, nil
}

// rawFile is sandbox.json as written: each key's JSON and its line.
type rawFile struct {
	vals  map[string]json.RawMessage
	lines map[string]int
}

func readRaw(path string) (rawFile, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return rawFile{vals: map[string]json.RawMessage{}, lines: map[string]int{}}, nil
	}
	if err != nil {
		return rawFile{}, err
	}
	return parseRaw(path, b)
}

// parseRaw is readRaw of the bytes b read from path.
func parseRaw(path string, b []byte) (rawFile, error) {
	r := rawFile{vals: map[string]json.RawMessage{}, lines: map[string]int{}}
	dec := json.NewDecoder(bytes.NewReader(b))
	line := func() int { return 1 + bytes.Count(b[:dec.InputOffset()], []byte("\n")) }
	syntax := func(err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("the file ends in the middle (cut short?)")
		}
		return &DamagedError{Path: path, Line: line(), Err: err}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		if err == nil {
			err = errors.New("want a JSON object")
		}
		return r, syntax(err)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return r, syntax(err)
		}
		key, _ := t.(string)
		r.lines[key] = line()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return r, syntax(err)
		}
		r.vals[key] = v
	}
	return r, nil
}

// check decodes the file into the defaults key by key: what is good is
// kept, each bad key is a Problem and keeps its default.
func (r rawFile) check() (Sandbox, []Problem) {
	s := Defaults()
	var probs []Problem
	keys := make([]string, 0, len(r.vals))
	for k := range r.vals {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return r.lines[keys[i]] < r.lines[keys[j]] })
	for _, k := range keys {
		if !knownKey(k) {
			probs = append(probs, Problem{k, r.lines[k], unknownKey(k)})
			continue
		}
		one, err := json.Marshal(map[string]json.RawMessage{k: r.vals[k]})
		next := s
		if err == nil {
			err = json.Unmarshal(one, &next)
		}
		if err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				err = fmt.Errorf("%w: %s: a %s is not allowed here", ErrInvalid, k, te.Value)
			}
			probs = append(probs, Problem{k, r.lines[k], err})
			continue
		}
		if err := next.Validate(); err != nil {
			probs = append(probs, Problem{k, r.lines[k], err})
			continue
		}
		s = next
	}
	return s, probs
}

// LoadSandboxLenient reads sandbox.json for `config`: the good settings,
// and what is wrong with the rest, so a hand-edited file with a bad or
// unknown key can still be shown and repaired. err is only for a file
// that can't be read or isn't JSON.
func LoadSandboxLenient(path string) (Sandbox, []Problem, error) {
	r, err := readRaw(path)
	if err != nil {
		return Defaults(), nil, err
	}
	s, probs := r.check()
	return s, probs, nil
}

// SetKey changes one key of sandbox.json, keeping every other entry as it
// is written (even bad ones: they are the user's to fix), and returns the
// settings before and after and the problems left.
func SetKey(path, key, value string) (old, next Sandbox, left []Problem, err error) {
	r, err := readRaw(path)
	if err != nil {
		return old, next, nil, err
	}
	old, _ = r.check()
	next, err = old.Set(key, value)
	if err != nil {
		return old, next, nil, err
	}
	// The key's value as SaveSandbox would write it.
	b, _ := json.Marshal(next)
	var all map[string]json.RawMessage
	json.Unmarshal(b, &all)
	if v, ok := all[key]; ok {
		r.vals[key] = v
	} else {
		delete(r.vals, key) // an omitted zero: the default
	}
	if err := r.write(path); err != nil {
		return old, next, nil, err
	}
	_, left = r.check()
	return old, next, left, nil
}

// ResetKey removes key from sandbox.json: a known key goes back to its
// default, an unknown one (a typo) is dropped.
func ResetKey(path, key string) (old, next Sandbox, left []Problem, err error) {
	r, err := readRaw(path)
	if err != nil {
		return old, next, nil, err
	}
	old, _ = r.check()
	if _, ok := r.vals[key]; !ok && !knownKey(key) {
		return old, old, nil, unknownKey(key)
	}
	delete(r.vals, key)
	next, left = r.check()
	if err := r.write(path); err != nil {
		return old, next, left, err
	}
	return old, next, left, nil
}

func (r rawFile) write(path string) error {
	// Known keys in the documented order, then the rest as written.
	var buf bytes.Buffer
	buf.WriteString("{")
	n := 0
	emit := func(k string) {
		if n > 0 {
			buf.WriteString(",")
		}
		n++
		kb, _ := json.Marshal(k)
		var v bytes.Buffer
		if json.Indent(&v, r.vals[k], "  ", "  ") != nil {
			v.Write(r.vals[k])
		}
		fmt.Fprintf(&buf, "\n  %s: %s", kb, v.String())
	}
	for _, d := range keyDocs {
		if _, ok := r.vals[d.Key]; ok {
			emit(d.Key)
		}
	}
	var rest []string
	for k := range r.vals {
		if !knownKey(k) {
			rest = append(rest, k)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return r.lines[rest[i]] < r.lines[rest[j]] })
	for _, k := range rest {
		emit(k)
	}
	buf.WriteString("\n}\n")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, buf.Bytes(), 0o644)
}

// ProblemsText is the problems one per line.
func ProblemsText(probs []Problem) string {
	var lines []string
	for _, p := range probs {
		lines = append(lines, p.String())
	}
	return strings.Join(lines, "\n")
}
