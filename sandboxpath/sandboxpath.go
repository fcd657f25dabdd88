// Package sandboxpath checks and resolves the paths that tool arguments name
// inside the sandbox VM. It runs on the host, before a request reaches the
// guest, and returns a *Rejection the model can act on.
//
// Rules, in the order they are checked (the first failure wins):
//
//  1. empty: the path is empty.
//  2. too_long: more than MaxPathLen bytes, or a component over MaxNameLen.
//  3. invalid_utf8: the bytes are not valid UTF-8.
//  4. traversal: a `..` component. Names that merely contain two dots
//     (`notes..txt`) are fine: only a whole `..` component can climb.
//  5. null_byte: a NUL byte.
//  6. control_character: C0/C1 controls, DEL, line/paragraph separators and
//     bidirectional overrides (which can make a path display as another).
//  7. dangerous_character: one of DangerousChars (shell metacharacters).
//  8. `~` and `~/...` expand to the agent home; `~user` is refused as
//     outside_allowed_roots since it names somebody else's home.
//  9. Relative paths are joined to the home; every path is cleaned lexically.
//  10. outside_allowed_roots: the clean path must equal or lie beneath one
//     of the policy's roots, compared component by component, so
//     /workspace/agents/bob-evil is not inside /workspace/agents/bob.
//
// Lexical checks can't see symlinks. Resolve therefore also returns the root
// the path lies under; the guest opens the path beneath that root
// (agentproto.Identity.Root, RESOLVE_BENEATH), so a symlink in a home that
// points at /etc or another home fails there with ErrEscape.
//
// Guest paths are always POSIX, so this package uses "path", never
// "path/filepath".
package sandboxpath

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

const (
	// AgentsDir holds one home per agent.
	AgentsDir = "/workspace/agents"
	// SharedDir is open to every agent.
	SharedDir = "/workspace/shared"
	// ProjectsDir holds the agent's own views of the projects it was
	// granted (in its mount namespace, its views only).
	ProjectsDir = "/workspace/projects"

	// MaxPathLen is Linux's PATH_MAX.
	MaxPathLen = 4096
	// MaxNameLen is Linux's NAME_MAX.
	MaxNameLen = 255

	// DangerousChars are refused anywhere in a path: shell metacharacters
	// that have no business in a file name and would turn a path into a
	// command if anything downstream ever interpolated it. `<` and `>` are
	// added to Osaurus's set.
	DangerousChars = ";|&$`(){}'\"\\<>"
)

// Reason says why a path was rejected. The values are stable; they appear
// in tool envelopes.
type Reason string

const (
	ReasonEmpty       Reason = "empty"
	ReasonTraversal   Reason = "traversal"
	ReasonNullByte    Reason = "null_byte"
	ReasonDangerous   Reason = "dangerous_character"
	ReasonOutside     Reason = "outside_allowed_roots"
	ReasonTooLong     Reason = "too_long"
	ReasonControl     Reason = "control_character"
	ReasonInvalidUTF8 Reason = "invalid_utf8"
)

// ErrRejected matches every *Rejection with errors.Is.
var ErrRejected = errors.New("path rejected")

// Rejection is a refused path argument.
type Rejection struct {
	Field    string // the tool argument, e.g. "path" or "cwd"
	Reason   Reason
	Got      string // the argument as given
	Expected string // what would have been accepted, for the model
}

func (r *Rejection) Error() string {
	return fmt.Sprintf("Argument `%s` rejected: %s. Got `%s`.", r.Field, r.Reason, Display(r.Got))
}

// Is makes errors.Is(err, ErrRejected) true.
func (r *Rejection) Is(target error) bool { return target == ErrRejected }

// Policy says where one agent may point paths.
type Policy struct {
	// Home is where relative paths and `~` resolve. It should be one of
	// Roots, or lie beneath one.
	Home string
	// Roots are the directories paths may lie under (inclusive).
	Roots []string
}

// ForAgent is the policy of the agent with this slug: its home
// /workspace/agents/<slug>, /workspace/shared and its project views under
// /workspace/projects. The slug must already be
// valid (the agents registry guarantees it).
func ForAgent(slug string) Policy {
	home := AgentHome(slug)
	return Policy{Home: home, Roots: []string{home, SharedDir, ProjectsDir}}
}

// AgentHome is the home directory of the agent with this slug.
func AgentHome(slug string) string { return AgentsDir + "/" + slug }

// Resolved is an accepted path.
type Resolved struct {
	Path string // clean and absolute
	Root string // the most specific policy root Path lies under
}

// Resolve checks raw, the value of the tool argument field, and makes it an
// absolute clean guest path. Errors are *Rejection.
func (p Policy) Resolve(field, raw string) (Resolved, error) {
	reject := func(r Reason) (Resolved, error) {
		return Resolved{}, &Rejection{Field: field, Reason: r, Got: raw, Expected: p.expected(r)}
	}
	if r, ok := checkChars(raw); !ok {
		return reject(r)
	}

	p2 := raw
	switch {
	case raw == "~":
		p2 = p.Home
	case strings.HasPrefix(raw, "~/"):
		p2 = p.Home + raw[1:]
	case strings.HasPrefix(raw, "~"):
		return reject(ReasonOutside)
	}
	if !path.IsAbs(p2) {
		if !path.IsAbs(p.Home) {
			return reject(ReasonOutside)
		}
		p2 = p.Home + "/" + p2
	}
	p2 = path.Clean(p2)
	if len(p2) > MaxPathLen {
		// Joining the home can push a near-limit relative path over.
		return reject(ReasonTooLong)
	}
	root, ok := p.rootOf(p2)
	if !ok {
		return reject(ReasonOutside)
	}
	return Resolved{Path: p2, Root: root}, nil
}

// rootOf returns the longest root that contains p.
func (p Policy) rootOf(clean string) (string, bool) {
	best := ""
	for _, r := range p.Roots {
		if !path.IsAbs(r) {
			continue // a relative root would make containment meaningless
		}
		r = path.Clean(r)
		if Within(r, clean) && len(r) > len(best) {
			best = r
		}
	}
	return best, best != ""
}

// Within reports whether the clean absolute path p equals root or lies
// beneath it, comparing whole components.
func Within(root, p string) bool {
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

// checkChars applies the character and length rules common to every path,
// in sanitizer order.
func checkChars(s string) (Reason, bool) {
	if s == "" {
		return ReasonEmpty, false
	}
	if len(s) > MaxPathLen {
		return ReasonTooLong, false
	}
	for _, c := range strings.Split(s, "/") {
		if len(c) > MaxNameLen {
			return ReasonTooLong, false
		}
	}
	if !utf8.ValidString(s) {
		return ReasonInvalidUTF8, false
	}
	for _, c := range strings.Split(s, "/") {
		if c == ".." {
			return ReasonTraversal, false
		}
	}
	if strings.IndexByte(s, 0) >= 0 {
		return ReasonNullByte, false
	}
	for _, r := range s {
		if isControl(r) {
			return ReasonControl, false
		}
	}
	if strings.ContainsAny(s, DangerousChars) {
		return ReasonDangerous, false
	}
	return "", true
}

// isControl covers what unicode.IsControl does (C0, DEL, C1) plus the
// invisible characters that change how a path is displayed or split lines.
func isControl(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x2028, r == 0x2029: // line and paragraph separators
		return true
	case r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069: // bidi
		return true
	}
	return false
}

func (p Policy) expected(r Reason) string {
	where := p.describeRoots()
	switch r {
	case ReasonEmpty:
		return "a non-empty path: " + where
	case ReasonTooLong:
		return fmt.Sprintf("a path of at most %d bytes with no component over %d bytes: %s", MaxPathLen, MaxNameLen, where)
	case ReasonInvalidUTF8:
		return "a path in valid UTF-8: " + where
	case ReasonTraversal:
		return "a path without `..` components; name the target directly: " + where
	case ReasonNullByte:
		return "a path without NUL bytes: " + where
	case ReasonControl:
		return "a path without control or invisible formatting characters: " + where
	case ReasonDangerous:
		return "a path without any of " + DangerousChars + ": " + where
	default:
		return where
	}
}

// describeRoots tells the model where paths may point.
func (p Policy) describeRoots() string {
	var others []string
	for _, r := range p.Roots {
		if r != p.Home {
			others = append(others, r)
		}
	}
	var b strings.Builder
	if path.IsAbs(p.Home) {
		fmt.Fprintf(&b, "relative to your home %s (`~` means the home), or an absolute path under %s", p.Home, p.Home)
		for _, r := range others {
			fmt.Fprintf(&b, " or %s", r)
		}
	} else {
		b.WriteString("an absolute path under " + strings.Join(others, " or "))
	}
	return b.String()
}

// Relative checks a path that must stay relative to some directory, such as
// a plugin file name, and returns it cleaned. The same character rules as
// Resolve apply; absolute paths, `~` and paths that clean to the directory
// itself are refused.
func Relative(field, raw string) (string, error) {
	const want = "a relative file path inside the directory, like `scripts/run.py`, without `..`, a leading `/` or `~`"
	reject := func(r Reason) (string, error) {
		return "", &Rejection{Field: field, Reason: r, Got: raw, Expected: want}
	}
	if r, ok := checkChars(raw); !ok {
		return reject(r)
	}
	if strings.HasPrefix(raw, "/") || strings.HasPrefix(raw, "~") {
		return reject(ReasonOutside)
	}
	c := path.Clean(raw)
	if c == "." {
		return reject(ReasonEmpty)
	}
	return c, nil
}

// ValidatePluginFiles checks the keys of a plugin's files map (paths
// relative to the plugin folder). Keys are checked in sorted order so the
// error is deterministic; two keys that clean to the same file are refused
// too, since one would silently overwrite the other.
func ValidatePluginFiles(files map[string]string) error {
	keys := slices.Sorted(maps.Keys(files))
	seen := make(map[string]string, len(keys))
	for _, k := range keys {
		c, err := Relative("files", k)
		if err != nil {
			return err
		}
		if prev, dup := seen[c]; dup {
			return fmt.Errorf("%w: files: %q and %q name the same file %q; keep one", ErrRejected, prev, k, c)
		}
		seen[c] = k
	}
	return nil
}

// Display makes s safe to quote in a one-line message: control and
// invisible characters are escaped and very long values shortened.
func Display(s string) string {
	const limit = 200
	var b strings.Builder
	for i, r := range s {
		if b.Len() >= limit {
			fmt.Fprintf(&b, "… (%d bytes)", len(s))
			break
		}
		switch {
		case r == utf8.RuneError && !validAt(s, i):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case isControl(r):
			q := fmt.Sprintf("%+q", string(r))
			b.WriteString(q[1 : len(q)-1])
		case r == '`':
			b.WriteString("\\`")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func validAt(s string, i int) bool {
	r, n := utf8.DecodeRuneInString(s[i:])
	return r != utf8.RuneError || n > 1
}
