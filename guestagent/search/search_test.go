package search

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// searchTree is a folder like an agent's project: code, a hidden folder, a
// binary file, a symlink out, a long line.
func searchTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"src/a.go":        "package a\n\nfunc Alpha() {\n\treturn\n}\n\nfunc beta() {}\n",
		"src/b.py":        "def alpha():\n    pass\n",
		"notes.txt":       "nothing here\nALPHA in caps\n",
		".git/config":     "alpha hidden\n",
		"bin/tool":        "alpha\x00binary\n",
		"long.txt":        strings.Repeat("x", 600) + "alpha\n",
		"deep/x/y/z.go":   "func alpha() {}\n",
		"no-newline.txt":  "last alpha",
		"src/.hidden.txt": "alpha\n",
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte("alpha secret\n"), 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runSearch(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	var out, errOut bytes.Buffer
	code := Run(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// The arguments sandbox_search_files passes to ripgrep, which the
// fallback must take as they are.
func rgArgs(extra ...string) []string {
	return append([]string{"-n", "--no-heading", "--with-filename", "--null", "--color", "never", "--max-columns", "500", "--max-columns-preview"}, extra...)
}

func TestSearch(t *testing.T) {
	dir := searchTree(t)
	tests := []struct {
		name string
		args []string
		out  string
		code int
	}{
		{"matches, skipping hidden, binary and symlinked files", rgArgs("--no-ignore-parent", "--no-ignore-global", "-e", "alpha", "--", "."),
			"./deep/x/y/z.go\x001:func alpha() {}\n" +
				"./long.txt\x001:" + strings.Repeat("x", 500) + " [... omitted end of long line]\n" +
				"./no-newline.txt\x001:last alpha\n" +
				"./src/b.py\x001:def alpha():\n", 0},
		{"case-insensitive", rgArgs("-i", "-e", "^alpha", "--", "."),
			"./notes.txt\x002:ALPHA in caps\n", 0},
		{"context and group separators", rgArgs("-C", "1", "-e", "^func", "--", "./src/a.go"),
			"./src/a.go\x002-\n./src/a.go\x003:func Alpha() {\n./src/a.go\x004-\treturn\n--\n" +
				"./src/a.go\x006-\n./src/a.go\x007:func beta() {}\n", 0},
		{"include glob on the name", rgArgs("-i", "--glob", "*.go", "-e", "alpha", "--", "."),
			"./deep/x/y/z.go\x001:func alpha() {}\n./src/a.go\x003:func Alpha() {\n", 0},
		{"path glob and exclusion", rgArgs("-i", "--glob", "src/**", "--glob", "!*.py", "-e", "alpha", "--", "."),
			"./src/a.go\x003:func Alpha() {\n", 0},
		{"brace glob", rgArgs("--glob", "*.{py,txt}", "-e", "alpha", "--", "."),
			"./long.txt\x001:" + strings.Repeat("x", 500) + " [... omitted end of long line]\n" +
				"./no-newline.txt\x001:last alpha\n./src/b.py\x001:def alpha():\n", 0},
		{"a hidden file named directly is searched", rgArgs("-e", "alpha", "--", "./src/.hidden.txt"),
			"./src/.hidden.txt\x001:alpha\n", 0},
		{"no match", rgArgs("-e", "omega", "--", "."), "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runSearch(t, dir, tt.args...)
			if out != tt.out || code != tt.code {
				t.Fatalf("exit %d, stderr %q, output:\n%q\nwant exit %d:\n%q", code, errOut, out, tt.code, tt.out)
			}
		})
	}
}

func TestSearchErrors(t *testing.T) {
	dir := searchTree(t)
	tests := []struct {
		name string
		args []string
		want string // in stderr; sandbox_search_files looks for these words
	}{
		{"bad pattern", rgArgs("-e", "(", "--", "."), "regex parse error"},
		{"bad glob", rgArgs("--glob", "[a", "-e", "a", "--", "."), "glob"},
		{"unknown argument", rgArgs("--pre", "sh", "-e", "a", "--", "."), "unknown argument"},
		{"two paths", rgArgs("-e", "a", "--", ".", "/etc"), "exactly one path"},
		{"missing path", rgArgs("-e", "a", "--", "./nope"), "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := runSearch(t, dir, tt.args...)
			if code != 2 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, errOut, tt.want)
			}
		})
	}
}
