package search

import (
	"bytes"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// The fallback search's reading of ignore files, after ripgrep's default:
// .gitignore counts inside a git repository (a .git in the folder or one
// above it), .ignore and .rgignore anywhere, later ones in that order
// taking precedence, and a deeper folder's over a shallower one's.

// maxIgnoreFile bounds what one ignore file may cost; the rest is not read.
const maxIgnoreFile = 1 << 20

// ignoreFiles are the names read in each folder, weakest first.
var ignoreFiles = []string{".gitignore", ".ignore", ".rgignore"}

type ignoreRule struct {
	re      *regexp.Regexp
	negate  bool // "!": takes back in what an earlier rule left out
	dirOnly bool // a trailing "/": folders only
	path    bool // has a "/": matches the path from the file's folder
}

// ignoreFile is one ignore file's rules and its folder, relative to the
// search root ("" for the root).
type ignoreFile struct {
	base  string
	rules []ignoreRule
}

// readIgnores reads dir's ignore files (its .gitignore only when git);
// a missing or unreadable one has no rules.
func readIgnores(dir, rel string, git bool) []ignoreFile {
	var out []ignoreFile
	for _, name := range ignoreFiles {
		if name == ".gitignore" && !git {
			continue
		}
		data, err := readSmall(dir + "/" + name)
		if err != nil {
			continue
		}
		if rules := parseIgnore(data); len(rules) > 0 {
			out = append(out, ignoreFile{base: rel, rules: rules})
		}
	}
	return out
}

// readSmall reads a regular file without following a symbolic link, at
// most maxIgnoreFile bytes of it.
func readSmall(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, os.ErrInvalid
	}
	return io.ReadAll(io.LimitReader(f, maxIgnoreFile))
}

// parseIgnore reads gitignore syntax: # comments, blank lines, ! to
// negate, \ to escape a leading # or !, trailing spaces dropped unless
// escaped, a trailing / for folders only, a / elsewhere anchoring the
// pattern to the file's folder, * ? [..] within a path element and **
// across them. A pattern that doesn't compile is skipped, as git does.
func parseIgnore(data []byte) []ignoreRule {
	var rules []ignoreRule
	for _, line := range bytes.Split(data, []byte("\n")) {
		p := strings.TrimSuffix(string(line), "\r")
		if !strings.HasSuffix(p, `\ `) {
			p = strings.TrimRight(p, " ")
		}
		if p == "" || p[0] == '#' {
			continue
		}
		r := ignoreRule{}
		if p[0] == '!' {
			r.negate, p = true, p[1:]
		}
		if rest, ok := strings.CutSuffix(p, "/"); ok {
			r.dirOnly, p = true, rest
		}
		if p == "" {
			continue
		}
		r.path = strings.Contains(p, "/")
		p = strings.TrimPrefix(p, "/")
		if p == "" || p[0] == '!' {
			p = `\` + p // a literal !, after an escaped one or a negation
		}
		g, err := compileGlob(p)
		if err != nil {
			continue
		}
		r.re = g.re
		rules = append(rules, r)
	}
	return rules
}

// matchIgnores tells whether the ignore files leave the entry at rel (from
// the search root) out, and whether any rule decided.
func matchIgnores(files []ignoreFile, rel string, dir bool) (ignored, decided bool) {
	base := path.Base(rel)
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		sub := rel
		if f.base != "" {
			sub = strings.TrimPrefix(rel, f.base+"/")
		}
		for j := len(f.rules) - 1; j >= 0; j-- {
			r := f.rules[j]
			if r.dirOnly && !dir {
				continue
			}
			name := base
			if r.path {
				name = sub
			}
			if r.re.MatchString(name) {
				return !r.negate, true
			}
		}
	}
	return false, false
}

// inGitRepo reports whether dir or a folder above it holds .git.
func inGitRepo(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		if _, err := os.Lstat(filepath.Join(abs, ".git")); err == nil {
			return true
		}
		up := filepath.Dir(abs)
		if up == abs {
			return false
		}
		abs = up
	}
}
