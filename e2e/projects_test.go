//go:build linux

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diskquota"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/projects"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// gitRepo makes a host git repository with a few committed files.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "webapp")
	for name, content := range files {
		write(t, filepath.Join(dir, name), content)
	}
	for _, args := range [][]string{
		{"init", "-q"}, {"add", "-A"},
		{"-c", "user.name=e2e", "-c", "user.email=e2e@localhost", "commit", "-q", "-m", "start"},
	} {
		gitIn(t, dir, args...)
	}
	return dir
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s (install git)", args, err, out)
	}
	return string(out)
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestProjects is the project workflow on the real guest: a host git
// repository added as a project and granted to two agents; A edits, adds
// and deletes files through its tools; the user's folder is unchanged;
// `changes` shows exactly those changes; B sees the original and can't
// reach A's view; `apply` of a subset writes only those, refusing a file
// the user changed meanwhile and a link A planted.
func TestProjects(t *testing.T) {
	// The owner's data folder is the VM's: the projects' views are in its
	// workspace, as the app's are.
	te := toolsEnvOf(t, sharedHost(t, func(c *config.Sandbox) { c.SafetyCheckpoints = config.DefaultSafetyCheckpoints }))
	paths := config.Paths{Root: te.home}
	cli := cliRun{t: t, bin: te.bin, home: te.home}

	readme := "# Web app\n\nServe it with python3 -m http.server.\n"
	app := "print('hello')\n"
	repo := gitRepo(t, map[string]string{"README.md": readme, "src/app.py": app, "docs/old.txt": "old\n"})

	cli.ok("project", "add", repo, "--name", "web")
	if out := cli.ok("project", "list", "--json"); !strings.Contains(out, `"name":"web"`) || !strings.Contains(out, repo) {
		t.Fatalf("project list: %s", out)
	}
	alice := te.addAgent(t, "alice", autonomous(50, false))
	bob := te.addAgent(t, "bob", autonomous(50, false))
	if _, errOut, code := cli.run("agent", "set", alice.Slug, "projects", "web,nope"); code == 0 || !strings.Contains(errOut, `"nope"`) {
		t.Fatalf("granting an unknown project: exit %d, %s", code, errOut)
	}
	cli.ok("agent", "set", alice.Slug, "projects", "web")
	cli.ok("agent", "set", bob.Slug, "projects", "web")
	a, b := te.http(t, alice.Slug), te.http(t, bob.Slug)

	// A works on its view through its tools.
	view := projects.GuestDir("web")
	newReadme := "# Web app\n\nServe it with python3 -m http.server 8000.\n"
	a.ok(t, "sandbox_write_file", map[string]any{"path": view + "/README.md", "content": newReadme})
	a.ok(t, "sandbox_write_file", map[string]any{"path": view + "/src/util.py", "content": "X = 1\n"})
	a.ok(t, "sandbox_edit_file", map[string]any{"path": view + "/src/app.py", "old_string": "hello", "new_string": "hi"})
	a.ok(t, "sandbox_delete", map[string]any{"path": view + "/docs/old.txt"})
	r := a.ok(t, "sandbox_exec", map[string]any{"command": "cd " + view + " && ln -s /etc/passwd evil && head -c 1000000 /dev/zero > big.bin && git status --porcelain | sort"})
	if num(r["exit_code"]) != 0 {
		t.Fatalf("exec in the view: %v", r)
	}

	// The user's folder is untouched.
	if st := gitIn(t, repo, "status", "--porcelain"); st != "" {
		t.Fatalf("the user's folder changed: %s", st)
	}

	// changes shows exactly what A did.
	var cs projects.ChangeSet
	if err := json.Unmarshal([]byte(cli.ok("changes", alice.Slug, "web", "--json")), &cs); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range cs.Changes {
		k := c.Kind
		if c.Refused != "" {
			k += ",refused"
		}
		if c.Binary {
			k += ",binary"
		}
		got[c.Path] = k
		if c.Path == "README.md" && c.Diff != "--- a/README.md\n+++ b/README.md\n@@ -1,3 +1,3 @@\n # Web app\n \n-Serve it with python3 -m http.server.\n+Serve it with python3 -m http.server 8000.\n" {
			t.Errorf("README diff:\n%s", c.Diff)
		}
	}
	want := map[string]string{"README.md": "modified", "src/util.py": "added", "src/app.py": "modified",
		"docs/old.txt": "deleted", "evil": "added,refused", "big.bin": "added,binary"}
	if !mapsEq(got, want) {
		t.Fatalf("changes: %v\nwant %v", got, want)
	}

	// A asks for review: the user is told through the event log (the
	// owner's reviewer).
	ar := a
	ar.fails(t, "sandbox_request_review", map[string]any{"project": "other", "summary": "done"}, envelope.InvalidArgs)
	ar.fails(t, "sandbox_request_review", map[string]any{"project": "web", "summary": "done\x1b[2J"}, envelope.InvalidArgs)
	if r := ar.ok(t, "sandbox_request_review", map[string]any{"project": "web", "summary": "Port 8000 in the README; util.py added."}); num(r["changes"]) != len(want) {
		t.Fatalf("request review: %v", r)
	}
	if out := cli.ok("events", "--agent", alice.Slug, "--json"); !strings.Contains(out, host.ReviewEvent) || !strings.Contains(out, "util.py added") {
		t.Fatalf("the review request is not in the event log: %s", out)
	}

	// B sees the original and can't reach A's view.
	if r := b.ok(t, "sandbox_read_file", map[string]any{"path": view + "/README.md"}); r["content"] != readme {
		t.Fatalf("B's README: %v", r["content"])
	}
	b.ok(t, "sandbox_read_file", map[string]any{"path": view + "/docs/old.txt"})
	r = b.ok(t, "sandbox_exec", map[string]any{"command": "ls /workspace/projects; cat /workspace/.projects/" + alice.Slug + "/web/README.md; ls /workspace/.projects/" + alice.Slug + "/web"})
	if num(r["exit_code"]) == 0 || strings.Contains(r["stdout"].(string), "8000") || r["stdout"] != "web\n" {
		t.Fatalf("B reached A's view: %v", r)
	}

	// A's view counts against its disk quota.
	list := te.reg.List()
	if used := diskquota.Measure(paths.Workspace(), paths.Output(), list)[alice.Slug]; used < 1000000 {
		t.Fatalf("A's disk use %d does not count its view's 1 MB file", used)
	}

	// The user changes src/app.py meanwhile.
	write(t, filepath.Join(repo, "src/app.py"), "print('user')\n")
	out, errOut, code := cli.run("apply", alice.Slug, "web", "--yes", "README.md", "src/util.py", "src/app.py", "evil")
	if code != ExitErrorCode {
		t.Fatalf("apply with a conflict and a link: exit %d\n%s%s", code, out, errOut)
	}
	// The owner saved the sandbox first, and says why.
	var cps []checkpoint.Meta
	if err := json.Unmarshal([]byte(cli.ok("checkpoint", "list", "--json")), &cps); err != nil {
		t.Fatal(err)
	}
	if len(cps) != 1 || cps[0].Reason != "before apply of "+alice.Slug+"'s changes to web" || !strings.Contains(errOut, "saved the sandbox first as checkpoint "+cps[0].Name) {
		t.Fatalf("the checkpoint before the apply: %+v; apply said %q", cps, errOut)
	}
	cli.ok("checkpoint", "remove", cps[0].Name)
	for _, line := range []string{"applied README.md", "applied src/util.py", "conflict src/app.py", "refused evil"} {
		if !strings.Contains(out, line+"\n") && !strings.Contains(out, line+":") {
			t.Errorf("apply output lacks %q:\n%s", line, out)
		}
	}
	st := strings.Split(strings.TrimRight(gitIn(t, repo, "status", "--porcelain"), "\n"), "\n")
	slices.Sort(st)
	if strings.Join(st, "|") != " M README.md| M src/app.py|?? src/util.py" {
		t.Fatalf("after apply, git status: %q", st)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "README.md")); string(b) != newReadme {
		t.Fatalf("README.md: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "src/app.py")); string(b) != "print('user')\n" {
		t.Fatalf("the user's src/app.py was overwritten: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(repo, "evil")); !os.IsNotExist(err) {
		t.Fatal("the planted link reached the user's folder")
	}
	// What was applied is no longer a change; the rest still is.
	if err := json.Unmarshal([]byte(cli.ok("changes", alice.Slug, "web", "--json")), &cs); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, c := range cs.Changes {
		left = append(left, c.Path)
	}
	if strings.Join(left, ",") != "big.bin,docs/old.txt,evil,src/app.py" {
		t.Fatalf("changes left: %v", left)
	}
	// Discard drops them from A's view: A sees the user's file again.
	cli.ok("discard", alice.Slug, "web", "--yes", "src/app.py", "docs/old.txt", "big.bin")
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := a.ok(t, "sandbox_exec", map[string]any{"command": "cat " + view + "/src/app.py " + view + "/docs/old.txt"})
		if r["stdout"] == "print('user')\nold\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's view after discard: %v", r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Revoking a project with changes left is refused; after discarding
	// them it goes, and the view with it.
	if _, errOut, code := cli.run("agent", "set", alice.Slug, "projects", "none"); code == 0 || !strings.Contains(errOut, "apply or discard") {
		t.Fatalf("revoking with changes: exit %d %s", code, errOut)
	}
	cli.ok("discard", alice.Slug, "web", "--yes")
	cli.ok("agent", "set", alice.Slug, "projects", "none")
	if _, err := os.Stat(filepath.Join(paths.ProjectViews(), alice.Slug, "web")); !os.IsNotExist(err) {
		t.Fatalf("the view outlived the grant: %v", err)
	}

	previewsOf(t, te, cli, ar, b, alice.Slug)
}

// previewsOf: A's `python3 -m http.server`, exposed with
// sandbox_expose_port, is fetched from the host at the returned URL and
// listed by `ports`; B can neither expose A's port nor reach the server,
// in the VM or through the host; closing the preview closes the URL.
func previewsOf(t *testing.T, te *toolsEnv, cli cliRun, a, b *session, aliceSlug string) {
	if _, err := te.reg.Update(aliceSlug, func(ag *agents.Agent) error { ag.AutonomousExec.BackgroundProcesses = true; return nil }); err != nil {
		t.Fatal(err)
	}
	a.ok(t, "sandbox_write_file", map[string]any{"path": "site/index.html", "content": "<h1>preview of alice</h1>\n"})
	a.ok(t, "sandbox_exec_background", map[string]any{"command": "cd ~/site && exec python3 -m http.server 8000 --bind 127.0.0.1"})
	var url string
	deadline := time.Now().Add(time.Minute)
	for {
		e := a.call(t, "sandbox_expose_port", map[string]any{"port": 8000})
		if e.OK {
			url = e.Result.(map[string]any)["url"].(string)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("expose: %+v", e)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("preview URL %q is not on the host's loopback", url)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "<h1>preview of alice</h1>\n" {
		t.Fatalf("GET %s: %s %q", url, resp.Status, body)
	}
	if out := cli.ok("ports", "--json"); !strings.Contains(out, url) || !strings.Contains(out, `"agent":"`+aliceSlug+`"`) {
		t.Fatalf("ports: %s", out)
	}
	// B exposing port 8000 reaches only its own namespace, where nothing listens.
	if e := b.call(t, "sandbox_expose_port", map[string]any{"port": 8000}); e.OK {
		t.Fatalf("B exposed A's port: %+v", e)
	}
	hostPort := strings.TrimSuffix(strings.TrimPrefix(url, "http://127.0.0.1:"), "/")
	probe := "import urllib.request,sys\nfor u in sys.argv[1:]:\n  try:\n    urllib.request.urlopen(u, timeout=5); print('reached', u)\n  except Exception as e: print('refused', u)\n"
	b.ok(t, "sandbox_write_file", map[string]any{"path": "probe.py", "content": probe})
	r := b.ok(t, "sandbox_exec", map[string]any{"command": "python3 probe.py http://127.0.0.1:8000/ http://10.0.2.2:" + hostPort + "/"})
	if r["stdout"] != "refused http://127.0.0.1:8000/\nrefused http://10.0.2.2:"+hostPort+"/\n" {
		t.Fatalf("B reached A's server: %v", r)
	}
	// The same probe from A reaches its own server: B's refusal is B's.
	a.ok(t, "sandbox_write_file", map[string]any{"path": "probe.py", "content": probe})
	if r := a.ok(t, "sandbox_exec", map[string]any{"command": "python3 probe.py http://127.0.0.1:8000/"}); r["stdout"] != "reached http://127.0.0.1:8000/\n" {
		t.Fatalf("A's probe of its own server: %v", r)
	}
	if out := cli.ok("ports", "close", aliceSlug, "8000"); out != "closed 1 previews\n" {
		t.Fatalf("ports close: %q", out)
	}
	if out := cli.ok("ports", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("ports after close: %s", out)
	}
	if _, err := http.Get(url); err == nil {
		t.Fatal("the preview URL still answers after close")
	}
}

// ExitErrorCode is hostcli.ExitError: apply exits with it when it refused
// or skipped a change.
const ExitErrorCode = 1

func mapsEq(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
