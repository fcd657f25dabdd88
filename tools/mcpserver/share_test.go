package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// TestShareArtifact: sandbox_share_artifact copies the agent's file to
// /output/<slug>/ with the bytes it read, answers a result matching its
// outputSchema and a resource link to the host file, replaces the agent's
// own earlier artifact of that name, and refuses a symlink, a directory, an
// oversized file and a path outside the agent's space before writing
// anything.
func TestShareArtifact(t *testing.T) {
	f := newFixture(t)
	fg := newFileGuest()
	fg.files[bobHome+"/report.txt"] = "the report\n"
	fg.links = map[string]string{bobHome + "/link.txt": "/etc/shadow"}
	fg.files[bobHome+"/huge.bin"] = "x"
	fg.sizes = map[string]int64{bobHome + "/huge.bin": tools.MaxShareBytes + 1}
	g := fg.connect(t)
	out, keep := t.TempDir(), t.TempDir()
	// What the VM's copy shows in the host's output folder (the fake guest
	// keeps its files in memory).
	onHost := func(s string) {
		os.MkdirAll(filepath.Join(out, "bob"), 0o755)
		if err := os.WriteFile(filepath.Join(out, "bob", "report.txt"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	onHost("the report\n")
	f.cfg.Env = tools.NewEnv(tools.Options{Guest: func(context.Context) (*agentproto.Client, error) { return g, nil }, OutputDir: out, KeepDir: keep})
	f.set(t, "bob", func(ae *agents.AutonomousExec) { ae.Enabled = true })
	cs := connectInMemory(t, f, "bob", nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var schema *jsonschema.Resolved
	for _, tl := range res.Tools {
		if tl.Name == "sandbox_share_artifact" {
			schema = resolveSchema(t, tl)
			if tl.Title == "" || tl.Annotations == nil || tl.Annotations.ReadOnlyHint {
				t.Errorf("sandbox_share_artifact: title %q, annotations %+v", tl.Title, tl.Annotations)
			}
		}
	}
	share := func(p string, ok bool) (*mcp.CallToolResult, map[string]any) {
		t.Helper()
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sandbox_share_artifact", Arguments: map[string]any{"path": p}})
		if err != nil {
			t.Fatal(err)
		}
		return r, checkStructured(t, schema, r, ok)
	}

	r, sc := share("report.txt", true)
	res0 := sc["result"].(map[string]any)
	sum := sha256.Sum256([]byte("the report\n"))
	host := filepath.Join(keep, "bob", "report.txt")
	if res0["path"] != "/output/bob/report.txt" || res0["host_path"] != host || res0["size"] != 11.0 ||
		res0["sha256"] != hex.EncodeToString(sum[:]) || res0["replaced"] != false || !strings.HasPrefix(res0["mime_type"].(string), "text/plain") {
		t.Fatalf("result: %v", res0)
	}
	if got := fg.files["/output/bob/report.txt"]; got != "the report\n" {
		t.Fatalf("the copy holds %q", got)
	}
	if len(r.Content) != 2 {
		t.Fatalf("%d content items, want the envelope and a resource link", len(r.Content))
	}
	link, ok := r.Content[1].(*mcp.ResourceLink)
	if !ok || link.URI != "file://"+filepath.ToSlash(host) || link.Name != "report.txt" || link.Size == nil || *link.Size != 11 ||
		!strings.HasPrefix(link.MIMEType, "text/plain") {
		t.Fatalf("resource link %#v", r.Content[1])
	}

	fg.files[bobHome+"/report.txt"] = "v2\n"
	onHost("v2\n")
	if _, sc = share("report.txt", true); sc["result"].(map[string]any)["replaced"] != true || fg.files["/output/bob/report.txt"] != "v2\n" {
		t.Fatalf("sharing again: %v, copy %q", sc, fg.files["/output/bob/report.txt"])
	}

	before := len(fg.files)
	for _, c := range []struct{ path, says string }{
		{"link.txt", "symlink"},
		{"src", "directory"},
		{"huge.bin", "limit"},
		{"/etc/passwd", ""},
		{"../alice/secret", ""},
		{"/output/alice/x", ""},
		{"~", ""},
	} {
		r, sc := share(c.path, false)
		if sc["field"] != "path" || !strings.Contains(sc["message"].(string), c.says) || len(r.Content) != 1 {
			t.Errorf("share %s: %v (%d content items)", c.path, sc, len(r.Content))
		}
	}
	if len(fg.files) != before {
		t.Errorf("a refused share wrote files: %d, want %d", len(fg.files), before)
	}
}
