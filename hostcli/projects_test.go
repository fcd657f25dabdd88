package hostcli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/config"
)

// TestChangesAndApplyByReview: `changes` prints a review id and escaped
// names; `apply --review` writes exactly it (a file changed since is
// listed and not written); host-executable paths need --allow-exec-paths;
// `apply` without --review shows the review and asks.
func TestChangesAndApplyByReview(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	dir := filepath.Join(t.TempDir(), "web")
	for n, c := range map[string]string{"README.md": "# web\n", "a.txt": "a\n"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"agent", "add", "alice"}, {"project", "add", dir, "--name", "web"}, {"agent", "set", "alice", "projects", "web"}} {
		if _, errOut, code := run(t, args...); code != ExitOK {
			t.Fatalf("%v: %s", args, errOut)
		}
	}
	view := filepath.Join(config.Paths{Root: home}.ProjectViews(), "alice", "web")
	put := func(n, c string) {
		os.MkdirAll(filepath.Dir(filepath.Join(view, n)), 0o755)
		if err := os.WriteFile(filepath.Join(view, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("README.md", "# web\nreviewed\n")
	put("a.txt", "reviewed a\n")
	put(".vscode/tasks.json", "{}\n")
	put("x\x1b[2Ky.txt", "x\n")
	out, _, code := run(t, "changes", "alice", "web")
	id := regexp.MustCompile(`(?m)^review ([0-9a-f]{32})$`).FindStringSubmatch(out)
	if code != ExitOK || id == nil {
		t.Fatalf("changes: %d\n%s", code, out)
	}
	if strings.Contains(out, "\x1b") || !strings.Contains(out, `x\x1b[2Ky.txt  (refused: the name holds control`) ||
		!strings.Contains(out, ".vscode/tasks.json  (runs on your computer") {
		t.Fatalf("changes output:\n%q", out)
	}
	put("a.txt", "EVIL a!!!!\n")
	out, _, code = run(t, "apply", "alice", "web", "--review", id[1], "--yes")
	if code != ExitError || !strings.Contains(out, "applied README.md\n") || !strings.Contains(out, "changed a.txt: changed since you reviewed it") ||
		!strings.Contains(out, "refused .vscode/tasks.json") || !strings.Contains(out, `refused x\x1b[2Ky.txt`) {
		t.Fatalf("apply --review: %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "a\n" {
		t.Fatalf("a.txt written from a stale review: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, ".vscode")); !os.IsNotExist(err) {
		t.Fatal(".vscode written without --allow-exec-paths")
	}
	if _, _, code := run(t, "apply", "alice", "web", "--review", id[1], "--yes", "--allow-exec-paths", ".vscode/tasks.json"); code != ExitOK {
		t.Fatal("apply --allow-exec-paths")
	}
	if _, err := os.Stat(filepath.Join(dir, ".vscode/tasks.json")); err != nil {
		t.Fatal(err)
	}
	// No --review: the review it would write is shown, and asked about.
	out, errOut, code := run(t, "apply", "alice", "web")
	if code != ExitDeclined || !strings.Contains(out, "modified") || !strings.Contains(out, "a.txt") || !strings.Contains(errOut, "of review ") {
		t.Fatalf("apply without --review: %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := run(t, "apply", "alice", "web", "--review", "nope", "--yes"); code == ExitOK || !strings.Contains(errOut, "review") {
		t.Fatalf("apply --review nope: %d %s", code, errOut)
	}
}

// TestProjectWording: `project add` of a missing folder names it and the
// fix, not Go's stat error; `apply` and `discard` with nothing changed
// say so and ask nothing; the discard question reads as a sentence.
func TestProjectWording(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	missing := filepath.Join(t.TempDir(), "nope")
	_, errOut, code := run(t, "project", "add", missing)
	if code == ExitOK || !containsAll(errOut, "there is no folder "+missing, "mkdir -p "+missing) || strings.Contains(errOut, "stat ") || strings.Contains(errOut, "no such file") {
		t.Fatalf("add of a missing folder: %d %q", code, errOut)
	}
	dir := filepath.Join(t.TempDir(), "web")
	os.Mkdir(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	for _, args := range [][]string{{"agent", "add", "alice"}, {"project", "add", dir, "--name", "web"}, {"agent", "set", "alice", "projects", "web"}} {
		if _, errOut, code := run(t, args...); code != ExitOK {
			t.Fatalf("%v: %s", args, errOut)
		}
	}
	for _, verb := range []string{"apply", "discard"} {
		// No answer on stdin: a question would decline (exit 5).
		out, errOut, code := runStdin(t, "", verb, "alice", "web")
		if code != ExitOK || !strings.Contains(out, "nothing to "+verb+": alice has not changed web") || strings.Contains(errOut, "?") {
			t.Errorf("%s with no changes: %d %q %q", verb, code, out, errOut)
		}
	}
	view := filepath.Join(config.Paths{Root: home}.ProjectViews(), "alice", "web")
	os.WriteFile(filepath.Join(view, "a.txt"), []byte("b\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"discard", "alice", "web"}, "This throws away all of alice's changes to web."},
		{[]string{"discard", "alice", "web", "a.txt"}, "This throws away alice's changes to a.txt in web."},
		{[]string{"apply", "alice", "web"}, "This writes every change of review "},
	} {
		_, errOut, code := runStdin(t, "", tc.args...)
		if code != ExitDeclined || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "change of alice's changes") {
			t.Errorf("%v: %d %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
}
