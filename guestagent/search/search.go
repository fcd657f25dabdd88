// Package search is `sandbox-agent search`, the guest agent's own text
// search (Run). It is pure file reading, so its tests run without root.
package search

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Run is `sandbox-agent search`, the guest agent's own text search:
// sandbox_search_files runs it, as the agent's user, when the image has no
// ripgrep. It takes the subset of ripgrep's arguments that tool passes and
// writes ripgrep's `-n --no-heading --null` output, with ripgrep's exit
// codes (0 matches, 1 none, 2 an error), so the tool reads either the same
// way. Like ripgrep it skips hidden files and folders, binary files and
// symbolic links, and what the ignore files in the searched tree leave out
// (.gitignore inside a git repository, .ignore and .rgignore anywhere; see
// ignore.go), and matches line by line. It never reads ignore files above
// the searched folder (the tool passes --no-ignore-parent), and its
// regular expressions are Go's RE2 syntax, which ripgrep's mostly shares.
func Run(args []string, stdout, stderr io.Writer) int {
	o, err := parseSearchArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-agent search: %v\n", err)
		return 2
	}
	w := bufio.NewWriterSize(stdout, 64<<10)
	s := &searcher{o: o, w: w, stderr: stderr}
	s.target(o.target)
	if err := w.Flush(); err != nil {
		return 2 // the reader went away: nothing more to say
	}
	switch {
	case s.failed:
		return 2
	case s.matched:
		return 0
	}
	return 1
}

type searchOpts struct {
	re         *regexp.Regexp
	context    int
	maxColumns int
	globs      []searchGlob
	target     string
	noIgnore   bool // --no-ignore: read no ignore files
}

type searchGlob struct {
	re     *regexp.Regexp
	negate bool
	path   bool // has a slash: matches the path from the search root
}

func parseSearchArgs(args []string) (*searchOpts, error) {
	o := &searchOpts{}
	var pattern string
	var havePattern, fold bool
	next := func(i *int, flag string) (string, error) {
		if *i+1 >= len(args) {
			return "", fmt.Errorf("%s needs a value", flag)
		}
		*i++
		return args[*i], nil
	}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		var err error
		switch a {
		case "-n", "--no-heading", "--with-filename", "--null", "--max-columns-preview", "--no-ignore-parent", "--no-ignore-global":
			// ripgrep's output shape, and ignore files this search never
			// reads (above the searched folder, the user's global one).
		case "--no-ignore":
			o.noIgnore = true
		case "--color":
			_, err = next(&i, a)
		case "-i":
			fold = true
		case "-C", "--max-columns":
			var v string
			if v, err = next(&i, a); err == nil {
				n, cerr := strconv.Atoi(v)
				if cerr != nil || n < 0 || n > 1<<20 {
					return nil, fmt.Errorf("%s %q: want a number", a, v)
				}
				if a == "-C" {
					o.context = n
				} else {
					o.maxColumns = n
				}
			}
		case "--glob":
			var v string
			if v, err = next(&i, a); err == nil {
				g, gerr := compileGlob(v)
				if gerr != nil {
					return nil, gerr
				}
				o.globs = append(o.globs, g)
			}
		case "-e":
			pattern, err = next(&i, a)
			havePattern = true
		case "--":
			if i+2 != len(args) {
				return nil, errors.New("want exactly one path after --")
			}
			o.target = args[i+1]
			i = len(args)
		default:
			return nil, fmt.Errorf("unknown argument %q", a)
		}
		if err != nil {
			return nil, err
		}
	}
	if !havePattern || o.target == "" {
		return nil, errors.New("usage: sandbox-agent search [-i] [-C N] [--glob G] -e PATTERN -- PATH")
	}
	if fold {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		// ripgrep's words, which the tool turns into a pattern error.
		return nil, fmt.Errorf("regex parse error: %v", err)
	}
	o.re = re
	return o, nil
}

// compileGlob turns a ripgrep glob into a regular expression: * and ? stay
// within a path element, ** crosses them, [..] and {a,b} as usual, a
// leading ! excludes.
func compileGlob(g string) (searchGlob, error) {
	orig := g
	sg := searchGlob{}
	if rest, ok := strings.CutPrefix(g, "!"); ok {
		sg.negate, g = true, rest
	}
	g = strings.TrimPrefix(g, "/")
	sg.path = strings.Contains(g, "/")
	var b strings.Builder
	b.WriteString("^")
	depth := 0
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case strings.HasPrefix(g[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(g[i:], "/**") && i+3 == len(g):
			b.WriteString("(?:/.*)?")
			i += 2
		case strings.HasPrefix(g[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			end := strings.IndexByte(g[i+1:], ']')
			if end == 0 && i+2 < len(g) { // []...] : ] first is literal
				if e := strings.IndexByte(g[i+2:], ']'); e >= 0 {
					end = e + 1
				} else {
					end = -1
				}
			}
			if end < 0 {
				return sg, fmt.Errorf("error parsing glob %q: unclosed character class", orig)
			}
			class := g[i+1 : i+1+end]
			if neg, ok := strings.CutPrefix(class, "!"); ok {
				class = "^" + neg
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += end + 1
		case c == '{':
			b.WriteString("(?:")
			depth++
		case c == '}' && depth > 0:
			b.WriteString(")")
			depth--
		case c == ',' && depth > 0:
			b.WriteString("|")
		case c == '\\' && i+1 < len(g):
			i++
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		default:
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		}
	}
	if depth != 0 {
		return sg, fmt.Errorf("error parsing glob %q: unclosed alternation", orig)
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return sg, fmt.Errorf("error parsing glob %q: %v", orig, err)
	}
	sg.re = re
	return sg, nil
}

// globDecides applies the globs as ripgrep does: the last glob that
// matches decides; with any non-negated glob, a file no glob matches is
// left out. Otherwise the globs don't decide.
func (o *searchOpts) globDecides(rel string, dir bool) (decided, in bool) {
	base := path.Base(rel)
	whitelist := false
	for _, g := range o.globs {
		if !g.negate {
			whitelist = true
		}
		name := base
		if g.path {
			name = rel
		}
		if g.re.MatchString(name) {
			decided, in = true, !g.negate
		}
	}
	if decided {
		return true, in
	}
	if !dir && whitelist {
		return true, false
	}
	return false, false
}

type searcher struct {
	o       *searchOpts
	ignores []ignoreFile // of the folders being walked, outermost first
	w       *bufio.Writer
	stderr  io.Writer
	matched bool
	failed  bool
}

func (s *searcher) warn(p string, err error) {
	s.failed = true
	fmt.Fprintf(s.stderr, "%s: %v\n", p, err)
}

func (s *searcher) target(t string) {
	fi, err := os.Lstat(t)
	if err != nil {
		s.warn(t, err)
		return
	}
	if fi.IsDir() {
		s.walk(t, "", !s.o.noIgnore && inGitRepo(t))
		return
	}
	if fi.Mode().IsRegular() {
		s.file(t, false)
	}
}

// walk searches a folder in name order, skipping hidden entries and what
// ignore files leave out, and never following a symbolic link. git tells
// whether the folder is in a git repository, where .gitignore applies.
func (s *searcher) walk(dir, rel string, git bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		s.warn(dir, err)
		return
	}
	if !s.o.noIgnore {
		if !git {
			git = slices.ContainsFunc(ents, func(e fs.DirEntry) bool { return e.Name() == ".git" })
		}
		n := len(s.ignores)
		s.ignores = append(s.ignores, readIgnores(dir, rel, git)...)
		defer func() { s.ignores = s.ignores[:n] }()
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range ents {
		name := e.Name()
		isDir, isFile := e.Type().IsDir(), e.Type().IsRegular()
		if !isDir && !isFile {
			continue
		}
		p, r := dir+"/"+name, path.Join(rel, name)
		if !s.wanted(r, isDir) {
			continue
		}
		if isDir {
			s.walk(p, r, git)
		} else {
			s.file(p, true)
		}
	}
}

// wanted decides an entry as ripgrep does: --glob first; then the ignore
// files, the nearest folder's first; then hidden entries are left out
// unless an ignore file's ! rule took them back in.
func (s *searcher) wanted(rel string, dir bool) bool {
	if decided, in := s.o.globDecides(rel, dir); decided {
		// As before ignore files were read: a --glob never brings a
		// hidden entry in.
		return in && !strings.HasPrefix(path.Base(rel), ".")
	}
	ignored, decided := matchIgnores(s.ignores, rel, dir)
	if decided {
		return !ignored
	}
	return !strings.HasPrefix(path.Base(rel), ".")
}

// maxLine bounds the memory one line may take; the rest of a longer line
// is not searched.
const maxLine = 16 << 20

func (s *searcher) file(p string, skipBinary bool) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		s.warn(p, err)
		return
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	if head, _ := r.Peek(8 << 10); skipBinary && bytes.IndexByte(head, 0) >= 0 {
		return // a binary file, which ripgrep skips too
	}
	type line struct {
		n    int
		text []byte
	}
	var before []line // the last context lines, not yet printed
	after := 0        // context lines still to print after a match
	lastPrinted := 0
	ctx := s.o.context
	emit := func(n int, text []byte, match bool) {
		if lastPrinted > 0 && n > lastPrinted+1 && ctx > 0 {
			s.w.WriteString("--\n")
		}
		sep := byte('-')
		if match {
			sep = ':'
		}
		s.w.WriteString(p)
		s.w.WriteByte(0)
		s.w.WriteString(strconv.Itoa(n))
		s.w.WriteByte(sep)
		if mc := s.o.maxColumns; mc > 0 && len(text) > mc {
			// ripgrep's preview: the first columns, then a note that the
			// rest is cut (also when the match is in the cut part).
			s.w.Write(text[:mc])
			s.w.WriteString(" [... omitted end of long line]")
		} else {
			s.w.Write(text)
		}
		s.w.WriteByte('\n')
		lastPrinted = n
	}
	for n := 1; ; n++ {
		text, err := readLine(r)
		if len(text) == 0 && err != nil {
			if !errors.Is(err, io.EOF) {
				s.warn(p, err)
			}
			return
		}
		if bytes.IndexByte(text, 0) >= 0 && skipBinary {
			return // binary from here on: ripgrep stops too
		}
		if s.o.re.Match(text) {
			s.matched = true
			for _, b := range before {
				emit(b.n, b.text, false)
			}
			before = before[:0]
			emit(n, text, true)
			after = ctx
		} else if after > 0 {
			emit(n, text, false)
			after--
		} else if ctx > 0 {
			if len(before) == ctx {
				before = append(before[:0], before[1:]...)
			}
			before = append(before, line{n, slices.Clone(text)})
		}
		if err != nil {
			return
		}
	}
}

// readLine reads one line without its newline, keeping at most maxLine
// bytes of it.
func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) <= maxLine {
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if n := len(buf); n > 0 && buf[n-1] == '\n' {
			buf = buf[:n-1]
		}
		return buf, err
	}
}
