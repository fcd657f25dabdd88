//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
)

// TestToolsetWithoutRipgrep: with ripgrep gone from the guest, a read-only
// agent's sandbox_search_files returns the same matches through the guest
// agent's own search, and the diagnostics' toolset check fails naming
// ripgrep, then passes once it is back.
func TestToolsetWithoutRipgrep(t *testing.T) {
	te := newToolsEnvCAs(t, false)
	g := te.m.Agent()
	ctx := context.Background()
	rosa := te.addAgent(t, "Rosa", nil) // read-only: the search tools only
	s := te.http(t, "rosa")

	dir := fmt.Sprintf("/workspace/shared/toolset-%d", time.Now().UnixNano())
	files := map[string]string{
		"src/main.go":      "package main\n\nfunc main() {\n\tneedle()\n}\n\nfunc needle() {}\n",
		"src/util.py":      "def Needle():\n    return 'needle'\n",
		"docs/notes.txt":   "line one\nNEEDLE in caps\nline three\n",
		".hidden/secret":   "needle hidden\n",
		"deep/a/b/c.txt":   "x\ny\nneedle deep\nz\n",
		"data/blob.bin":    "needle\x00binary\n",
		"deep/a/b/.h.txt":  "needle\n",
		"src/long_line.js": strings.Repeat("y", 700) + " needle\n",
	}
	for name, data := range files {
		if _, err := g.WriteFile(ctx, agentproto.WriteFileRequest{Path: dir + "/" + name, Data: []byte(data), MakeParents: true}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { g.Remove(context.Background(), agentproto.PathRequest{Path: dir, Recursive: true}) })
	// A git repository in the agent's home, where ignore files count
	// (the shared folder is searched with --no-ignore): ripgrep's result
	// is what the fallback must match.
	s.ok(t, "sandbox_list_directory", map[string]any{})
	ign := fmt.Sprintf("ignores-%d", time.Now().UnixNano())
	ignDir := rosa.Home() + "/" + ign
	for name, data := range map[string]string{
		".git/HEAD":  "ref: refs/heads/main\n",
		".gitignore": "*.log\nbuild/\n/top.txt\ndocs/*.md\n**/gen/**\n!keep.log\n!.env\n",
		".ignore":    "*.tmp\n", "sub/.gitignore": "local.txt\n!again.log\n",
		"a.log": "needle", "keep.log": "needle", "build/x.txt": "needle", "src/build/y.txt": "needle", "top.txt": "needle",
		"sub/top.txt": "needle", "docs/a.md": "needle", "docs/deep/b.md": "needle", "a/gen/x.go": "needle", "main.go": "needle",
		".env": "needle", ".other": "needle", "local.txt": "needle", "sub/local.txt": "needle", "sub/again.log": "needle", "x.tmp": "needle",
	} {
		if _, err := g.WriteFile(ctx, agentproto.WriteFileRequest{Path: ignDir + "/" + name, Data: []byte(data), MakeParents: true}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { g.Remove(context.Background(), agentproto.PathRequest{Path: ignDir, Recursive: true}) })

	searches := []map[string]any{
		{"pattern": "needle", "path": dir},
		{"pattern": "needle", "path": dir, "case_insensitive": true, "context_lines": 1},
		{"pattern": "^func \\w+", "path": dir, "include": "*.go"},
		{"pattern": "needle", "path": dir + "/deep/a/b/c.txt", "context_lines": 2},
		{"pattern": "line|NEEDLE", "path": dir + "/docs/notes.txt", "max_results": 2},
		{"pattern": "needle", "path": ign},
		{"pattern": "needle", "path": ign, "include": "*.log"},
	}
	type result struct {
		lines            []string
		count, truncated any
	}
	run := func() []result {
		var rs []result
		for _, args := range searches {
			r := s.ok(t, "sandbox_search_files", args)
			var lines []string
			for _, l := range r["lines"].([]any) {
				m := l.(map[string]any)
				lines = append(lines, fmt.Sprintf("%s:%v:%v:%s", m["path"], m["line"], m["match"], m["text"]))
			}
			slices.Sort(lines)
			rs = append(rs, result{lines, r["match_count"], r["truncated"]})
		}
		return rs
	}
	toolset := func() diagnostics.Result {
		for _, c := range diagnostics.Checks() {
			if c.Name == "toolset" {
				return diagnostics.Run(ctx, diagnostics.Env{Agent: g, PackageManager: g.Info.PackageMgr}, []diagnostics.Check{c}, nil)[0]
			}
		}
		t.Fatal("no toolset check")
		return diagnostics.Result{}
	}
	mv := func(from, to string) {
		t.Helper()
		if out, errOut, st := sh(t, g, "", "mv "+from+" "+to); st.Code != 0 {
			t.Fatalf("mv %s %s: %s %s", from, to, out, errOut)
		}
	}

	if r := toolset(); r.Outcome != diagnostics.Pass {
		t.Fatalf("toolset with ripgrep: %+v", r)
	}
	withRg := run()
	if len(withRg[0].lines) != 5 {
		t.Fatalf("ripgrep found %v; want the five matches in visible, non-binary files", withRg[0].lines)
	}
	// One file named as the path: ripgrep leaves the file name out unless
	// asked, which once made every such search come back empty.
	if len(withRg[3].lines) != 4 || withRg[3].count != json.Number("1") {
		t.Fatalf("ripgrep in one file: %v", withRg[3])
	}
	t.Logf("ripgrep in a repository with ignore files: %q; with include *.log: %q", withRg[5].lines, withRg[6].lines)
	if len(withRg[5].lines) < 3 {
		t.Fatalf("ripgrep found %q in the repository; want at least main.go, sub/top.txt, keep.log", withRg[5].lines)
	}

	// The shared guest's disk outlives this test: put ripgrep back.
	mv("/usr/bin/rg", "/usr/bin/rg.aside")
	restored := false
	restore := func() {
		if !restored {
			restored = true
			mv("/usr/bin/rg.aside", "/usr/bin/rg")
		}
	}
	t.Cleanup(restore)

	r := toolset()
	if r.Outcome != diagnostics.Fail || !strings.Contains(r.Detail, "ripgrep (rg)") ||
		!strings.Contains(r.Detail, `sandbox_install {"packages": ["ripgrep"]}`) || !strings.Contains(r.Hint, "packages") {
		t.Errorf("toolset without ripgrep: %+v", r)
	}
	t.Logf("toolset without ripgrep: %s", r.Detail)
	for _, args := range searches {
		e := s.call(t, "sandbox_search_files", args)
		if !strings.Contains(strings.Join(e.Warnings, " "), "ripgrep is not installed") {
			t.Errorf("search %v without ripgrep: warnings %q", args, e.Warnings)
		}
	}
	without := run()
	for i := range searches {
		if !slices.Equal(withRg[i].lines, without[i].lines) || withRg[i].count != without[i].count || withRg[i].truncated != without[i].truncated {
			t.Errorf("search %v:\nwith ripgrep    %v %v %q\nwithout ripgrep %v %v %q", searches[i],
				withRg[i].count, withRg[i].truncated, withRg[i].lines, without[i].count, without[i].truncated, without[i].lines)
		}
	}

	restore()
	if r := toolset(); r.Outcome != diagnostics.Pass {
		t.Errorf("toolset with ripgrep back: %+v", r)
	}
}
