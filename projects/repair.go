package projects

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// DamagedError: projects.json can't be read as a project list (not JSON,
// a value of the wrong type, a project that doesn't check out). It names
// the file and the way back, as agents.json and sandbox.json do.
type DamagedError struct {
	Path string
	Err  error
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("projects: %s is damaged: %v. Run `osaurus-sandbox project repair`: it keeps every project it can still read, moves the file aside (%s.damaged-TIME) and writes the rest; your folders are not touched",
		e.Path, e.Err, filepath.Base(e.Path))
}

func (e *DamagedError) Unwrap() error { return ErrInvalid }

// check reports what is wrong with one project record.
func (p Project) check() error {
	switch {
	case !agents.ValidProjectName(p.Name):
		return fmt.Errorf("name %q is not a project name", p.Name)
	case p.Path == "" || !filepath.IsAbs(p.Path):
		return fmt.Errorf("project %q: path %q is not an absolute path", p.Name, p.Path)
	}
	return nil
}

// parse reads a project list, or says what is damaged in it.
func parse(path string, b []byte) ([]Project, error) {
	var f listFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, &DamagedError{Path: path, Err: errors.New(jsonProblem(b, err))}
	}
	names, paths := map[string]bool{}, map[string]bool{}
	for i, p := range f.Projects {
		err := p.check()
		switch {
		case err != nil:
		case names[p.Name]:
			err = fmt.Errorf("the name %q appears twice", p.Name)
		case paths[p.Path]:
			err = fmt.Errorf("the folder %s appears twice", p.Path)
		}
		if err != nil {
			return nil, &DamagedError{Path: path, Err: fmt.Errorf("project %d: %w", i+1, err)}
		}
		names[p.Name], paths[p.Path] = true, true
	}
	return f.Projects, nil
}

// jsonProblem says where and what a decoding error is, in plain words.
func jsonProblem(b []byte, err error) string {
	line := func(off int64) int { return 1 + bytes.Count(b[:min(max(off, 0), int64(len(b)))], []byte("\n")) }
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case strings.Contains(err.Error(), "unexpected end of JSON input"):
		return fmt.Sprintf("line %d: it ends in the middle (cut short?)", line(int64(len(b))))
	case errors.As(err, &se):
		return fmt.Sprintf("line %d: %v", line(se.Offset), se)
	case errors.As(err, &te):
		field := te.Field
		if i := strings.LastIndex(field, "."); i >= 0 {
			field = field[i+1:]
		}
		return fmt.Sprintf("line %d: %q holds a %s of the wrong kind", line(te.Offset), field, te.Value)
	}
	return err.Error()
}

// RepairResult is what Repair did.
type RepairResult struct {
	Kept    []Project
	Dropped []string // the projects (or parts of the file) it could not read, and why
	Aside   string   // where the damaged file is now; "" when nothing needed repair
}

// Repair rewrites a damaged projects.json with every project that can
// still be read and checks out, keeping the damaged file beside it
// (projects.json.damaged-TIME). An intact or missing file is left alone.
func Repair(path string) (RepairResult, error) {
	var res RepairResult
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return res, err
	}
	list, err := parse(path, b)
	var dmg *DamagedError
	if !errors.As(err, &dmg) {
		res.Kept = list
		return res, err
	}
	raws, why := salvage(b)
	if why != "" {
		res.Dropped = append(res.Dropped, why)
	}
	names, paths := map[string]bool{}, map[string]bool{}
	for i, raw := range raws {
		var p Project
		err := json.Unmarshal(raw, &p)
		if err != nil {
			err = errors.New(jsonProblem(raw, err))
		} else if err = p.check(); err == nil {
			switch {
			case names[p.Name]:
				err = fmt.Errorf("the name %q appears twice", p.Name)
			case paths[p.Path]:
				err = fmt.Errorf("the folder %s appears twice", p.Path)
			}
		}
		if err != nil {
			res.Dropped = append(res.Dropped, fmt.Sprintf("project %d: %v", i+1, err))
			continue
		}
		names[p.Name], paths[p.Path] = true, true
		res.Kept = append(res.Kept, p)
	}
	res.Aside = path + ".damaged-" + time.Now().UTC().Format("20060102T150405Z")
	if err := atomicfile.WriteFile(res.Aside, b, 0o600); err != nil {
		return res, fmt.Errorf("projects: keeping the damaged file: %w", err)
	}
	return res, save(path, res.Kept)
}

// salvage reads each project's JSON up to where the file breaks; why
// says what was cut off.
func salvage(b []byte) (raws []json.RawMessage, why string) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, "the file is not a JSON object: nothing could be read"
	}
	rest := func(err error) string { return "the rest of the file, from " + jsonProblem(b, err) }
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return raws, rest(err)
		}
		if t != "projects" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return raws, rest(err)
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return raws, "\"projects\" is not a list"
		}
		for dec.More() {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return raws, rest(err)
			}
			raws = append(raws, raw)
		}
		if _, err := dec.Token(); err != nil {
			return raws, rest(err)
		}
	}
	return raws, ""
}
