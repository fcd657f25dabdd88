package search

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeTree makes files (path: content) under a new folder.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// matchedFiles is the sorted list of files a search printed.
func matchedFiles(out string) []string {
	var files []string
	for _, line := range strings.Split(out, "\n") {
		if name, _, ok := strings.Cut(line, "\x00"); ok && !slices.Contains(files, name) {
			files = append(files, name)
		}
	}
	slices.Sort(files)
	return files
}

// The fallback search leaves out what ripgrep's defaults leave out: the
// .gitignore files of a git repository (root and nested), .ignore and
// .rgignore anywhere, hidden entries unless a rule takes them back in.
func TestSearchHonoursIgnoreFiles(t *testing.T) {
	repo := func(files map[string]string) map[string]string {
		files[".git/HEAD"] = "ref: refs/heads/main\n"
		return files
	}
	tests := []struct {
		name  string
		files map[string]string
		args  []string // before -e; default: what the tool passes outside the shared folder
		want  []string
	}{
		{"glob on the name, at any depth", repo(map[string]string{
			".gitignore": "*.log\n# a comment\n\n", "a.txt": "hit", "b.log": "hit", "sub/c.log": "hit", "sub/d.txt": "hit"}),
			nil, []string{"./a.txt", "./sub/d.txt"}},
		{"folder pattern with a trailing slash", repo(map[string]string{
			".gitignore": "build/\nout/\n", "build/x.txt": "hit", "src/build/y.txt": "hit", "out": "hit", "src/z.txt": "hit"}),
			nil, []string{"./out", "./src/z.txt"}},
		{"negation takes a file back in", repo(map[string]string{
			".gitignore": "*.txt\n!keep.txt\n", "drop.txt": "hit", "keep.txt": "hit", "sub/keep.txt": "hit"}),
			nil, []string{"./keep.txt", "./sub/keep.txt"}},
		{"anchored with a leading slash", repo(map[string]string{
			".gitignore": "/top.txt\n", "top.txt": "hit", "sub/top.txt": "hit"}),
			nil, []string{"./sub/top.txt"}},
		{"a slash in the middle anchors too", repo(map[string]string{
			".gitignore": "docs/*.md\n", "docs/a.md": "hit", "docs/deep/b.md": "hit", "x/docs/c.md": "hit"}),
			nil, []string{"./docs/deep/b.md", "./x/docs/c.md"}},
		{"double star", repo(map[string]string{
			".gitignore": "**/gen/**\nlogs/**/*.txt\n", "a/gen/x.go": "hit", "gen/y.go": "hit", "logs/1/2/z.txt": "hit",
			"logs/keep.md": "hit", "main.go": "hit"}),
			nil, []string{"./logs/keep.md", "./main.go"}},
		{"a nested .gitignore applies below its folder, over the root's", repo(map[string]string{
			".gitignore": "*.tmp\n", "sub/.gitignore": "local.txt\n!wanted.tmp\n", "local.txt": "hit", "sub/local.txt": "hit",
			"sub/wanted.tmp": "hit", "sub/other.tmp": "hit", "x.tmp": "hit"}),
			nil, []string{"./local.txt", "./sub/wanted.tmp"}},
		{"a nested .gitignore's anchored pattern is from its own folder", repo(map[string]string{
			"sub/.gitignore": "/a.txt\n", "a.txt": "hit", "sub/a.txt": "hit", "sub/deeper/a.txt": "hit"}),
			nil, []string{"./a.txt", "./sub/deeper/a.txt"}},
		{"an ignored folder is not entered: no rule takes its files back", repo(map[string]string{
			".gitignore": "vendor/\n!vendor/keep.go\n", "vendor/keep.go": "hit", "main.go": "hit"}),
			nil, []string{"./main.go"}},
		{"hidden entries stay out unless a rule takes them in", repo(map[string]string{
			".gitignore": "!.env\n", ".env": "hit", ".other": "hit", ".dir/x.txt": "hit", "a.txt": "hit"}),
			nil, []string{"./.env", "./a.txt"}},
		{"escaped # and ! are names", repo(map[string]string{
			".gitignore": "\\#notes\n\\!bang\n", "#notes": "hit", "!bang": "hit", "plain": "hit"}),
			nil, []string{"./plain"}},
		{".gitignore outside a git repository counts for nothing", map[string]string{
			".gitignore": "*.txt\n", "a.txt": "hit"},
			nil, []string{"./a.txt"}},
		{".ignore and .rgignore count anywhere, .rgignore over .ignore", map[string]string{
			".ignore": "*.txt\n", ".rgignore": "!b.txt\n", "a.txt": "hit", "b.txt": "hit", "c.md": "hit"},
			nil, []string{"./b.txt", "./c.md"}},
		{"a git repository below the searched folder", map[string]string{
			"proj/.git/HEAD": "x", "proj/.gitignore": "*.o\n", "proj/a.o": "hit", "proj/a.c": "hit", "b.o": "hit"},
			nil, []string{"./b.o", "./proj/a.c"}},
		{"--no-ignore reads none (the shared folder)", repo(map[string]string{
			".gitignore": "*.log\n", ".ignore": "*.txt\n", "a.log": "hit", "b.txt": "hit"}),
			[]string{"--no-ignore"}, []string{"./a.log", "./b.txt"}},
		{"a --glob overrides the ignore files", repo(map[string]string{
			".gitignore": "*.log\n", "a.log": "hit", "b.txt": "hit"}),
			[]string{"--no-ignore-parent", "--glob", "*.log"}, []string{"./a.log"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeTree(t, tt.files)
			if tt.args == nil {
				tt.args = []string{"--no-ignore-parent", "--no-ignore-global"}
			}
			out, errOut, code := runSearch(t, dir, rgArgs(append(tt.args, "-e", "hit", "--", ".")...)...)
			if got := matchedFiles(out); !slices.Equal(got, tt.want) || code != 0 {
				t.Fatalf("exit %d, stderr %q: searched %q, want %q", code, errOut, got, tt.want)
			}
		})
	}
}

// A file named directly is searched whatever the ignore files say, as
// ripgrep does.
func TestSearchNamedFileIgnoresIgnoreFiles(t *testing.T) {
	dir := writeTree(t, map[string]string{".git/HEAD": "x", ".gitignore": "*.log\n", "a.log": "hit"})
	out, _, code := runSearch(t, dir, rgArgs("-e", "hit", "--", "./a.log")...)
	if got := matchedFiles(out); code != 0 || !slices.Equal(got, []string{"./a.log"}) {
		t.Fatalf("exit %d, searched %q", code, got)
	}
}
