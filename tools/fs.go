package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/sandboxpath"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// resolve checks a path argument on the host; "" means def.
func (c *call) resolve(field, raw, def string) (sandboxpath.Resolved, error) {
	if raw == "" && def != "" {
		raw = def
	}
	return c.agent.Paths().Resolve(field, raw)
}

// isRoot reports whether p names its root itself: the home or the shared
// directory, which the agent may use but not delete or replace.
func isRoot(p sandboxpath.Resolved) bool { return p.Path == p.Root }

func rootName(p sandboxpath.Resolved) string {
	if p.Root == sandboxpath.SharedDir {
		return "the shared directory " + p.Root
	}
	return "your home " + p.Root
}

type readFileArgs struct {
	Path      string `json:"path"`
	StartLine int    `json:"start_line"`
	LineCount int    `json:"line_count"`
	TailLines int    `json:"tail_lines"`
	MaxChars  int    `json:"max_chars"`
	// textOnly reads an image as text (sandbox_read_multiple_files).
	textOnly bool
}

type fileResult struct {
	Kind       string `json:"kind"`
	Path       string `json:"path"`
	Content    string `json:"content"`
	Size       int64  `json:"size"`
	StartLine  int    `json:"start_line,omitempty"`
	LineCount  int    `json:"line_count,omitempty"`
	TailLines  int    `json:"tail_lines,omitempty"`
	TotalLines int    `json:"total_lines,omitempty"`
	MaxChars   int    `json:"max_chars"`
	Truncated  bool   `json:"truncated,omitempty"`
}

func readFile(ctx context.Context, c *call, a readFileArgs) (any, error) {
	p, err := c.resolve("path", a.Path, "")
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"start_line", a.StartLine}, {"line_count", a.LineCount}, {"tail_lines", a.TailLines}} {
		if f.v < 0 {
			return nil, envelope.ArgErrorf(f.name, "a positive integer", "argument `%s` must be positive, got %d", f.name, f.v)
		}
	}
	if a.TailLines > 0 && (a.StartLine > 0 || a.LineCount > 0) {
		return nil, envelope.ArgErrorf("tail_lines", "either tail_lines, or start_line/line_count",
			"tail_lines can't be combined with start_line or line_count; use one or the other")
	}
	maxChars, err := c.bounded("max_chars", a.MaxChars, DefaultMaxChars, MaxMaxChars)
	if err != nil {
		return nil, err
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	if mime := imageTypes[strings.ToLower(path.Ext(p.Path))]; mime != "" && !a.textOnly && a.StartLine == 0 && a.LineCount == 0 && a.TailLines == 0 {
		if img, err := c.readImage(ctx, p, mime); img != nil || err != nil {
			return img, err
		}
	}
	r, err := c.g.ReadFile(ctx, agentproto.ReadFileRequest{
		Identity: c.as(p.Root), Path: p.Path,
		StartLine: a.StartLine, LineCount: a.LineCount, TailLines: a.TailLines,
		MaxBytes: int64(4 * maxChars), // enough bytes for maxChars characters
	})
	if errors.Is(err, agentproto.ErrIsDir) {
		return nil, envelope.ArgErrorf("path", "a file", "%s is a directory; list it with sandbox_list_directory", p.Path)
	}
	if err != nil {
		return nil, err
	}
	content, truncated := string(r.Data), r.Truncated
	if utf8.RuneCountInString(content) > maxChars {
		truncated = true
		if a.TailLines > 0 {
			content = lastChars(content, maxChars)
		} else {
			content = firstChars(content, maxChars)
		}
	}
	if bytes.IndexByte(r.Data, 0) >= 0 || !utf8.ValidString(content) {
		c.warn("%s does not look like UTF-8 text (a binary file?); invalid bytes are shown as U+FFFD", p.Path)
		content = valid(content)
	}
	if truncated {
		c.warn("content truncated to %d characters (the file has %d bytes); read on with start_line/line_count or tail_lines, or raise max_chars (up to %d)",
			maxChars, r.Size, MaxMaxChars)
	}
	if a.StartLine > r.TotalLines && r.TotalLines > 0 {
		c.warn("start_line %d is past the end: the file has %d lines", a.StartLine, r.TotalLines)
	}
	return fileResult{
		Kind: "file", Path: p.Path, Content: content, Size: r.Size,
		StartLine: a.StartLine, LineCount: a.LineCount, TailLines: a.TailLines, TotalLines: r.TotalLines,
		MaxChars: maxChars, Truncated: truncated,
	}, nil
}

type listArgs struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
}

type listEntry struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Type   string `json:"type"`
	Size   *int64 `json:"size,omitempty"`   // files
	Target string `json:"target,omitempty"` // symlinks
}

type listing struct {
	Kind       string      `json:"kind"`
	Path       string      `json:"path"`
	Entries    []listEntry `json:"entries"`
	EntryCount int         `json:"entry_count"`
	Truncated  bool        `json:"truncated"`
}

func listDirectory(ctx context.Context, c *call, a listArgs) (any, error) {
	p, err := c.resolve("path", a.Path, ".")
	if err != nil {
		return nil, err
	}
	depth := 1
	if a.Recursive {
		depth = ListMaxDepth
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	r, err := c.g.List(ctx, agentproto.ListRequest{Identity: c.as(p.Root), Path: p.Path, MaxDepth: depth, MaxEntries: ListMaxEntries})
	if errors.Is(err, agentproto.ErrNotDir) {
		return nil, envelope.ArgErrorf("path", "a directory", "%s is a file, not a directory; read it with sandbox_read_file", p.Path)
	}
	if err != nil {
		return nil, err
	}
	out := listing{Kind: "listing", Path: p.Path, Entries: []listEntry{}, Truncated: r.Truncated}
	for _, e := range r.Entries {
		le := listEntry{Name: e.Name, Path: path.Join(p.Path, e.Path), Type: e.Type, Target: e.SymlinkTarget}
		if e.Type == "file" {
			le.Size = &e.Size
		}
		out.Entries = append(out.Entries, le)
	}
	out.EntryCount = len(out.Entries)
	if r.Truncated {
		c.warn("the listing stops at %d entries; list a subdirectory, or turn recursive off", ListMaxEntries)
	}
	return out, nil
}

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Append  bool   `json:"append"`
}

func writeFile(ctx context.Context, c *call, a writeArgs) (any, error) {
	p, err := c.resolve("path", a.Path, "")
	if err != nil {
		return nil, err
	}
	if len(a.Content) > MaxWriteBytes {
		return nil, envelope.ArgErrorf("content", fmt.Sprintf("at most %d bytes", MaxWriteBytes),
			"content is %d bytes, over the %d-byte limit; write it in parts with append: true", len(a.Content), MaxWriteBytes)
	}
	if isRoot(p) {
		return nil, envelope.ArgErrorf("path", "a file path inside the directory", "%s is %s, not a file; name a file inside it", p.Path, rootName(p))
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	r, err := c.g.WriteFile(ctx, agentproto.WriteFileRequest{
		Identity: c.as(p.Root), Path: p.Path, Data: []byte(a.Content), MakeParents: true, Append: a.Append,
	})
	if errors.Is(err, agentproto.ErrIsDir) {
		return nil, envelope.ArgErrorf("path", "a file path", "%s is a directory; name a file", p.Path)
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": p.Path, "size": r.Size, "appended": a.Append}, nil
}

type editArgs struct {
	Path      string `json:"path"`
	OldString string `json:"old_string"`
	NewString string `json:"new_string"`
}

func editFile(ctx context.Context, c *call, a editArgs) (any, error) {
	p, err := c.resolve("path", a.Path, "")
	if err != nil {
		return nil, err
	}
	if a.OldString == "" {
		return nil, envelope.ArgErrorf("old_string", "the exact text to replace, copied from the file",
			"old_string is empty; copy the exact text to replace from the file (to create a file use sandbox_write_file)")
	}
	if a.OldString == a.NewString {
		return nil, envelope.ArgErrorf("new_string", "text different from old_string", "new_string is the same as old_string; nothing would change")
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	r, err := c.g.ReadFile(ctx, agentproto.ReadFileRequest{Identity: c.as(p.Root), Path: p.Path, MaxBytes: MaxWriteBytes})
	if errors.Is(err, agentproto.ErrIsDir) {
		return nil, envelope.ArgErrorf("path", "a file", "%s is a directory, not a file", p.Path)
	}
	if err != nil {
		return nil, err
	}
	if r.Truncated {
		return nil, envelope.Errorf(envelope.ExecutionError, "%s is %d bytes, over the %d-byte edit limit; change it with sandbox_exec (e.g. sed) instead",
			p.Path, r.Size, MaxWriteBytes)
	}
	content := string(r.Data)
	switch n := strings.Count(content, a.OldString); n {
	case 1:
	case 0:
		return nil, envelope.ArgErrorf("old_string", "text that occurs exactly once in the file",
			"old_string matched 0 times in %s; it must match exactly once. Read the file and copy the text exactly, including whitespace and indentation", p.Path)
	default:
		return nil, envelope.ArgErrorf("old_string", "text that occurs exactly once in the file",
			"old_string matched %d times in %s; it must match exactly once. Include more of the surrounding lines to make it unique", n, p.Path)
	}
	updated := strings.Replace(content, a.OldString, a.NewString, 1)
	w, err := c.g.WriteFile(ctx, agentproto.WriteFileRequest{Identity: c.as(p.Root), Path: p.Path, Data: []byte(updated)})
	if err != nil {
		return nil, err
	}
	line := strings.Count(content[:strings.Index(content, a.OldString)], "\n") + 1
	return map[string]any{"path": p.Path, "replacements": 1, "line": line, "size": w.Size}, nil
}

type moveArgs struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	Overwrite   bool   `json:"overwrite"`
}

func move(ctx context.Context, c *call, a moveArgs) (any, error) {
	src, err := c.resolve("source", a.Source, "")
	if err != nil {
		return nil, err
	}
	dst, err := c.resolve("destination", a.Destination, "")
	if err != nil {
		return nil, err
	}
	if isRoot(src) {
		return nil, envelope.ArgErrorf("source", "a file or directory inside it", "%s is %s; it can't be moved", src.Path, rootName(src))
	}
	if isRoot(dst) {
		return nil, envelope.ArgErrorf("destination", "a new path inside it", "%s is %s; name a path inside it", dst.Path, rootName(dst))
	}
	// A move between the home and the shared directory needs one root
	// holding both: their common parent. The guest still refuses symlinks
	// that lead out of it, and other agents' homes (0700) stay closed by
	// their permissions.
	root := commonDir(src.Root, dst.Root)
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	err = c.g.Move(ctx, agentproto.MoveRequest{Identity: c.as(root), Src: src.Path, Dst: dst.Path, Overwrite: a.Overwrite})
	switch {
	case errors.Is(err, agentproto.ErrExists):
		return nil, envelope.ArgErrorf("destination", "a path that doesn't exist yet, or overwrite: true",
			"%s already exists; pass overwrite: true to replace it, or choose another destination", dst.Path)
	case errors.Is(err, agentproto.ErrNotFound):
		if _, serr := c.g.Stat(ctx, agentproto.PathRequest{Identity: c.as(src.Root), Path: src.Path}); serr == nil {
			return nil, envelope.Errorf(envelope.NotFound, "the directory %s does not exist; create it first (sandbox_write_file creates parents)", path.Dir(dst.Path))
		}
		return nil, envelope.Errorf(envelope.NotFound, "%s does not exist", src.Path)
	case err != nil:
		return nil, err
	}
	return map[string]any{"source": src.Path, "destination": dst.Path}, nil
}

// commonDir is the deepest directory containing both clean absolute paths.
func commonDir(a, b string) string {
	for !sandboxpath.Within(a, b) {
		a = path.Dir(a)
	}
	return a
}

type deleteArgs struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
}

func deletePath(ctx context.Context, c *call, a deleteArgs) (any, error) {
	p, err := c.resolve("path", a.Path, "")
	if err != nil {
		return nil, err
	}
	if isRoot(p) {
		return nil, envelope.ArgErrorf("path", "a file or directory inside it",
			"%s is %s; it can't be deleted. Delete the things inside it instead", p.Path, rootName(p))
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	err = c.g.Remove(ctx, agentproto.PathRequest{Identity: c.as(p.Root), Path: p.Path, Recursive: a.Recursive})
	if errors.Is(err, agentproto.ErrNotEmpty) || (!a.Recursive && errors.Is(err, agentproto.ErrExists)) {
		return nil, envelope.ArgErrorf("recursive", "true to delete a directory with its contents",
			"%s is a directory that isn't empty; pass recursive: true to delete it with everything in it", p.Path)
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"deleted": p.Path, "recursive": a.Recursive}, nil
}

type searchArgs struct {
	Pattern         string `json:"pattern"`
	Path            string `json:"path"`
	Include         string `json:"include"`
	ContextLines    int    `json:"context_lines"`
	CaseInsensitive bool   `json:"case_insensitive"`
	MaxResults      int    `json:"max_results"`
}

type searchLine struct {
	Path  string `json:"path"`
	Line  int    `json:"line"`
	Text  string `json:"text"`
	Match bool   `json:"match"` // false: a context line
}

func searchFiles(ctx context.Context, c *call, a searchArgs) (any, error) {
	if a.Pattern == "" {
		return nil, envelope.ArgErrorf("pattern", "a regular expression", "pattern is empty")
	}
	if strings.ContainsRune(a.Pattern+a.Include, 0) {
		return nil, envelope.ArgErrorf("pattern", "text without NUL bytes", "pattern and include must not contain NUL bytes")
	}
	if a.ContextLines < 0 {
		return nil, envelope.ArgErrorf("context_lines", "an integer from 0 to 10", "context_lines must not be negative")
	}
	ctxLines := a.ContextLines
	if ctxLines > MaxContextLines {
		c.warn("context_lines %d is over the maximum; used %d", ctxLines, MaxContextLines)
		ctxLines = MaxContextLines
	}
	maxResults, err := c.bounded("max_results", a.MaxResults, DefaultResults, MaxResults)
	if err != nil {
		return nil, err
	}
	p, err := c.resolve("path", a.Path, ".")
	if err != nil {
		return nil, err
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	dir, target, err := c.searchTarget(ctx, p)
	if err != nil {
		return nil, err
	}
	argv := []string{"rg", "-n", "--no-heading", "--with-filename", "--null", "--color", "never", "--max-columns", "500", "--max-columns-preview"}
	// --with-filename: rg leaves the name out when searching one file,
	// and parseRg needs it on every line.
	if a.CaseInsensitive {
		argv = append(argv, "-i")
	}
	if ctxLines > 0 {
		argv = append(argv, "-C", strconv.Itoa(ctxLines))
	}
	if a.Include != "" {
		argv = append(argv, "--glob", a.Include)
	}
	argv = append(argv, ignoreRules(p)...)
	argv = append(argv, "-e", a.Pattern, "--", target)

	out := &prefix{max: 4 << 20}
	errOut := newCapture(StderrCap)
	st, err := c.exec(ctx, agentproto.ExecRequest{Identity: c.as(p.Root), Argv: argv, Cwd: dir}, DefaultExecTimeout, out, errOut)
	if missingProgram(err) {
		// No ripgrep in the image: the guest agent's own search takes the
		// same arguments and prints the same output, as the same user.
		argv = append([]string{GuestSearch, "search"}, argv[1:]...)
		out, errOut = &prefix{max: 4 << 20}, newCapture(StderrCap)
		st, err = c.exec(ctx, agentproto.ExecRequest{Identity: c.as(p.Root), Argv: argv, Cwd: dir}, DefaultExecTimeout, out, errOut)
		if err == nil {
			c.warn("ripgrep is not installed, so the guest agent's built-in search ran instead (it reads .gitignore, .ignore and .rgignore as ripgrep does, but its regular expressions are Go's RE2 syntax); " +
				`sandbox_install {"packages": ["ripgrep"]} installs ripgrep`)
		}
	}
	if errors.Is(err, agentproto.ErrNotDir) {
		return nil, envelope.ArgErrorf("path", "a file, a directory or a link to a directory",
			"%s is a symbolic link to a file; search the file it points to instead", p.Path)
	}
	if err != nil {
		return nil, c.startError(err, "rg", "")
	}
	stderr, _ := errOut.Text()
	if st.TimedOut {
		return nil, envelope.Errorf(envelope.Timeout, "the search took over %s and was stopped; search a smaller directory or add include", DefaultExecTimeout)
	}
	lines, matches, truncated := parseRg(out.b, dir, maxResults)
	truncated = truncated || out.over
	if st.Code == 2 && matches == 0 {
		switch {
		case strings.Contains(stderr, "regex parse error"), strings.Contains(stderr, "error parsing regex"):
			return nil, envelope.ArgErrorf("pattern", "a valid regular expression (Rust regex syntax; escape ( [ { . * + ? with \\)", "%s", strings.TrimSpace(stderr))
		case strings.Contains(stderr, "glob"):
			return nil, envelope.ArgErrorf("include", "a file glob such as *.py", "%s", strings.TrimSpace(stderr))
		}
		return nil, envelope.Errorf(envelope.ExecutionError, "ripgrep failed: %s", strings.TrimSpace(stderr))
	}
	if st.Code == 2 {
		c.warn("some files could not be searched: %s", truncTail(strings.TrimSpace(stderr), 1000))
	}
	if matches == 0 {
		c.warn("no matches for %q in %s", a.Pattern, p.Path)
	}
	if truncated {
		c.warn("stopped at %d matches; narrow the pattern or path, or raise max_results (up to %d)", maxResults, MaxResults)
	}
	return map[string]any{
		"kind": "search", "pattern": a.Pattern, "path": p.Path,
		"lines": lines, "match_count": matches, "truncated": truncated,
	}, nil
}

// GuestSearch is the guest agent's copy on the root disk; its "search"
// command is sandbox_search_files' fallback when ripgrep is missing.
const GuestSearch = "/usr/local/bin/sandbox-agent"

// searchTarget picks the directory to run a search in and what to name
// there. The directory is opened beneath the path's root by the guest, and
// the target is "." or a plain file in it, so a search never follows a
// symlink out of the allowed directories.
func (c *call) searchTarget(ctx context.Context, p sandboxpath.Resolved) (dir, target string, err error) {
	fi, err := c.g.Stat(ctx, agentproto.PathRequest{Identity: c.as(p.Root), Path: p.Path})
	if err != nil {
		return "", "", err
	}
	switch fi.Type {
	case "dir":
		return p.Path, ".", nil
	case "file":
		return path.Dir(p.Path), "./" + path.Base(p.Path), nil
	case "symlink":
		// A link to a directory works as the working directory, which the
		// guest resolves beneath the root. A link to a file does not.
		return p.Path, ".", nil
	}
	return "", "", envelope.ArgErrorf("path", "a file or directory", "%s is neither a file nor a directory", p.Path)
}

// parseRg turns `rg -n --no-heading --null` output into lines, keeping at
// most max matches (and their context).
func parseRg(out []byte, dir string, max int) (lines []searchLine, matches int, truncated bool) {
	lines = []searchLine{}
	for raw := range strings.SplitSeq(string(out), "\n") {
		file, rest, ok := strings.Cut(raw, "\x00")
		if !ok {
			continue // "--" group separators, a cut last line
		}
		i := strings.IndexAny(rest, ":-")
		if i <= 0 {
			continue
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil {
			continue
		}
		match := rest[i] == ':'
		if match {
			if matches == max {
				return lines, matches, true
			}
			matches++
		}
		lines = append(lines, searchLine{Path: path.Join(dir, file), Line: n, Text: valid(rest[i+1:]), Match: match})
	}
	return lines, matches, false
}

type findArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	MaxResults int    `json:"max_results"`
}

func findFiles(ctx context.Context, c *call, a findArgs) (any, error) {
	glob := a.Pattern
	switch {
	case glob == "":
		return nil, envelope.ArgErrorf("pattern", "a file name glob such as *.py", "pattern is empty")
	case strings.ContainsAny(glob, "/\x00"):
		return nil, envelope.ArgErrorf("pattern", "a file name glob without /, such as *.py; pick the directory with path",
			"pattern %q contains a slash; it matches file names only, choose the directory with path", glob)
	case !strings.ContainsAny(glob, "*?["):
		glob = "*" + glob + "*"
	}
	maxResults, err := c.bounded("max_results", a.MaxResults, DefaultResults, MaxResults)
	if err != nil {
		return nil, err
	}
	p, err := c.resolve("path", a.Path, ".")
	if err != nil {
		return nil, err
	}
	out := &prefix{max: 4 << 20}
	errOut := newCapture(StderrCap)
	// find doesn't follow symlinks, and the guest opens the working
	// directory beneath the root.
	st, err := c.exec(ctx, agentproto.ExecRequest{Identity: c.as(p.Root), Argv: []string{"find", ".", "-name", glob}, Cwd: p.Path},
		DefaultExecTimeout, out, errOut)
	if errors.Is(err, agentproto.ErrNotDir) {
		return nil, envelope.ArgErrorf("path", "a directory", "%s is not a directory", p.Path)
	}
	if err != nil {
		return nil, c.startError(err, "find", "path")
	}
	if st.TimedOut {
		return nil, envelope.Errorf(envelope.Timeout, "the search took over %s and was stopped; search a smaller directory", DefaultExecTimeout)
	}
	files := []string{}
	truncated := out.over
	for l := range strings.SplitSeq(string(out.b), "\n") {
		if l == "" || l == "." || !strings.HasPrefix(l, "./") {
			continue
		}
		if len(files) == maxResults {
			truncated = true
			break
		}
		files = append(files, valid(path.Join(p.Path, l)))
	}
	if stderr, _ := errOut.Text(); st.Code != 0 {
		if len(files) == 0 && !strings.Contains(stderr, "Permission denied") {
			return nil, envelope.Errorf(envelope.ExecutionError, "find failed (exit %d): %s", st.Code, strings.TrimSpace(stderr))
		}
		c.warn("some directories could not be searched: %s", truncTail(strings.TrimSpace(stderr), 1000))
	}
	if len(files) == 0 {
		c.warn("no file names match %q in %s", glob, p.Path)
	}
	if truncated {
		c.warn("stopped at %d paths; narrow the pattern or path, or raise max_results (up to %d)", maxResults, MaxResults)
	}
	return map[string]any{"kind": "find", "pattern": glob, "path": p.Path, "files": files, "count": len(files), "truncated": truncated}, nil
}

// prefix keeps the first max bytes written and notes whether more came.
type prefix struct {
	b    []byte
	max  int
	over bool
}

func (p *prefix) Write(b []byte) (int, error) {
	n := len(b)
	room := p.max - len(p.b)
	if len(b) > room {
		p.over = true
		b = b[:max(room, 0)]
	}
	p.b = append(p.b, b...)
	return n, nil
}

// ignoreRules keeps a search from obeying ignore files (.ignore, .rgignore,
// .gitignore) that the calling agent doesn't own: anyone can plant one in
// the shared area to hide files from another agent's searches. In the
// agent's own home every ignore file is its own, but the ones above the
// home are not.
func ignoreRules(p sandboxpath.Resolved) []string {
	if p.Root == sandboxpath.SharedDir {
		return []string{"--no-ignore"}
	}
	return []string{"--no-ignore-parent", "--no-ignore-global"}
}
