//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	if out := js(r); strings.Contains(out, "root:") || strings.Contains(out, "4711") {
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
}
