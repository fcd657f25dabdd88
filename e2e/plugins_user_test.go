//go:build linux

package e2e

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// jqPlugin needs a package the test guest's image lacks, so its tool
// works only while the VM's root disk has what the install put there.
const jqPlugin = `{
  "name": "Word Stats", "description": "Counts words with jq", "version": "2.0.0",
  "dependencies": ["jq"],
  "files": {"count-words": "printf '%s' \"$PARAM_TEXT\" | jq -R -s -c '{words: (split(\" \") | map(select(length > 0)) | length), by: env.USER}'\n"},
  "tools": [{"id": "count", "description": "Counts the words of a text", "run": "sh count-words",
    "parameters": {"text": {"type": "string"}}}]
}`

// TestPluginsAsNewUser is the "done" flow through the real binary
// and its background owner: import a plugin from an https URL and another
// from a GitHub-shaped server, install both for alice, call their tools
// from alice's MCP client; then restart the app and reset the VM, and the
// tools still work (the second's package installed again by itself).
func TestPluginsAsNewUser(t *testing.T) {
	e := startIsoEnv(t)
	const sha = "5f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6"
	mux := http.NewServeMux()
	serve := func(pattern, ctype, body string) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			w.Write([]byte(body))
		})
	}
	serve("GET /files/greeter.json", "application/json", greeterPlugin)
	serve("GET /api/repos/alice/tools", "application/json", `{"default_branch": "main"}`)
	serve("GET /api/repos/alice/tools/commits/main", "application/json", `{"sha": "`+sha+`"}`)
	serve("GET /raw/alice/tools/"+sha+"/plugin.json", "text/plain; charset=utf-8", jqPlugin)
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	pem := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(pem, encodePEM(srv.Certificate().Raw), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", pem) // the binary trusts only the test server
	e.ok("config", "set", "githubApiUrl", srv.URL+"/api")
	e.ok("config", "set", "githubRawUrl", srv.URL+"/raw")

	if out := e.ok("plugin", "import", srv.URL+"/files/greeter.json", "--yes"); !strings.Contains(out, "greeter") {
		t.Fatalf("URL import: %s", out)
	}
	if out := e.ok("plugin", "import", "github.com/alice/tools", "--yes"); !strings.Contains(out, "word-stats") || !strings.Contains(out, sha[:12]) {
		t.Fatalf("GitHub import does not name the plugin and the commit: %s", out)
	}
	if out := e.ok("plugin", "show", "word-stats"); !strings.Contains(out, "github.com/alice/tools") || !strings.Contains(out, sha) {
		t.Fatalf("show does not record the source and commit: %s", out)
	}
	e.ok("agent", "add", "alice")
	for _, id := range []string{"greeter", "word-stats"} {
		if out := e.ok("plugin", "install", id, "--agent", "alice", "--yes"); !strings.Contains(out, "tool "+id+"_") {
			t.Fatalf("install %s: %s", id, out)
		}
	}

	works := func(when string) {
		t.Helper()
		alice := e.session(t, "alice")
		defer alice.cs.Close()
		if got := alice.tools(t); !slices.Contains(got, "greeter_greet") || !slices.Contains(got, "word-stats_count") {
			t.Fatalf("%s: alice's tools %v", when, got)
		}
		if r := alice.ok(t, "greeter_greet", map[string]any{"who": "alice"}); !strings.HasPrefix(str(r["stdout"]), "hello alice from greeter as agent-alice") {
			t.Fatalf("%s: greeter_greet: %v", when, r)
		}
		if r := alice.ok(t, "word-stats_count", map[string]any{"text": "one two  three"}); str(r["stdout"]) != `{"words":3,"by":"agent-alice"}`+"\n" {
			t.Fatalf("%s: word-stats_count: %v", when, r)
		}
	}
	works("after the install")

	// The app restarts, then the VM is reset: a new root disk without jq.
	e.ok("stop")
	e.ok("start")
	works("after the app restarted")
	e.ok("reset", "--yes")
	e.ok("start")
	works("after the VM was reset")
}
