package mcpserver

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// fileGuest is a guest with a few files in bob's home: enough for the
// file tools to answer real results. Ops it doesn't serve panic (the
// embedded nil Service), so a test notices a tool reaching for them.
type fileGuest struct {
	agentproto.Service
	files map[string]string // path → content
	dirs  map[string]bool
	links map[string]string // path → target
	sizes map[string]int64  // a size Stat reports instead of the content's
}

const bobHome = "/workspace/agents/bob"

// pngBytes starts like a PNG file, which is what the tool sniffs.
const pngBytes = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"

func newFileGuest() *fileGuest {
	return &fileGuest{
		files: map[string]string{bobHome + "/a.txt": "hello\n", bobHome + "/src/main.go": "package main\n", bobHome + "/big.txt": strings.Repeat("x", 5000)},
		dirs:  map[string]bool{bobHome: true, bobHome + "/src": true},
	}
}

func (f *fileGuest) Hello(context.Context, *agentproto.HelloRequest) (*agentproto.HelloResponse, error) {
	return &agentproto.HelloResponse{Major: agentproto.VersionMajor}, nil
}

func (f *fileGuest) UserAdd(_ context.Context, r *agentproto.UserAddRequest) (*agentproto.UserAddResponse, error) {
	return &agentproto.UserAddResponse{Home: r.Home}, nil
}

func (f *fileGuest) Mkdir(_ context.Context, r *agentproto.PathRequest) (*agentproto.Empty, error) {
	f.dirs[r.Path] = true
	return &agentproto.Empty{}, nil
}

func (f *fileGuest) Exec(_ context.Context, _ *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
	return agentproto.ExitStatus{Exited: true}, eio.Started(1)
}

var mtime = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func (f *fileGuest) info(p string) (agentproto.FileInfo, bool) {
	fi := agentproto.FileInfo{Path: p, Name: filepath.Base(p), ModTime: mtime, Mode: 0o644}
	if s, ok := f.files[p]; ok {
		fi.Type, fi.Size = "file", int64(len(s))
		if n, ok := f.sizes[p]; ok {
			fi.Size = n
		}
		return fi, true
	}
	if t, ok := f.links[p]; ok {
		fi.Type, fi.SymlinkTarget = "symlink", t
		return fi, true
	}
	if f.dirs[p] {
		fi.Type, fi.Mode = "dir", 0o755
		return fi, true
	}
	return fi, false
}

func (f *fileGuest) Stat(_ context.Context, r *agentproto.PathRequest) (*agentproto.FileInfo, error) {
	fi, ok := f.info(r.Path)
	if !ok {
		return nil, agentproto.ErrNotFound
	}
	return &fi, nil
}

func (f *fileGuest) ReadFile(_ context.Context, r *agentproto.ReadFileRequest) (*agentproto.ReadFileResponse, error) {
	if f.dirs[r.Path] {
		return nil, agentproto.ErrIsDir
	}
	s, ok := f.files[r.Path]
	if !ok {
		return nil, agentproto.ErrNotFound
	}
	resp := &agentproto.ReadFileResponse{Size: int64(len(s)), Data: []byte(s)}
	if r.MaxBytes > 0 && int64(len(s)) > r.MaxBytes {
		resp.Data, resp.Truncated = resp.Data[:r.MaxBytes], true
	}
	return resp, nil
}

func (f *fileGuest) WriteFile(_ context.Context, r *agentproto.WriteFileRequest) (*agentproto.WriteFileResponse, error) {
	if r.Append {
		f.files[r.Path] += string(r.Data)
	} else {
		f.files[r.Path] = string(r.Data)
	}
	return &agentproto.WriteFileResponse{Size: int64(len(f.files[r.Path]))}, nil
}

func (f *fileGuest) Remove(_ context.Context, r *agentproto.PathRequest) (*agentproto.Empty, error) {
	delete(f.files, r.Path)
	return &agentproto.Empty{}, nil
}

func (f *fileGuest) Move(_ context.Context, r *agentproto.MoveRequest) (*agentproto.Empty, error) {
	s, ok := f.files[r.Src]
	if !ok {
		return nil, agentproto.ErrNotFound
	}
	delete(f.files, r.Src)
	f.files[r.Dst] = s
	return &agentproto.Empty{}, nil
}

func (f *fileGuest) List(_ context.Context, r *agentproto.ListRequest) (*agentproto.ListResponse, error) {
	if !f.dirs[r.Path] {
		return nil, agentproto.ErrNotDir
	}
	depth := max(r.MaxDepth, 1)
	var all []string
	for p := range f.files {
		all = append(all, p)
	}
	for p := range f.dirs {
		all = append(all, p)
	}
	resp := &agentproto.ListResponse{Entries: []agentproto.FileInfo{}}
	slices.Sort(all)
	for _, p := range all {
		rel, ok := strings.CutPrefix(p, r.Path+"/")
		if !ok || strings.Count(rel, "/") >= depth {
			continue
		}
		if r.MaxEntries > 0 && len(resp.Entries) == r.MaxEntries {
			resp.Truncated = true
			break
		}
		fi, _ := f.info(p)
		fi.Path = rel
		resp.Entries = append(resp.Entries, fi)
	}
	return resp, nil
}

func (f *fileGuest) connect(t *testing.T) *agentproto.Client {
	t.Helper()
	host, guest := net.Pipe()
	sp, err := agentproto.NewServerPeer(guest)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go sp.Serve(ctx, agentproto.ServiceMux(f))
	cp, err := agentproto.NewClientPeer(host)
	if err != nil {
		t.Fatal(err)
	}
	c, err := agentproto.Handshake(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cp.Close(nil); sp.Close(nil) })
	return c
}

// TestStructuredOutputMatchesSchemas: every tool has a title and an
// object outputSchema, and the structuredContent of calls, successes and
// failures alike, validates against the tool's outputSchema and equals
// the text envelope.
func TestStructuredOutputMatchesSchemas(t *testing.T) {
	f := newFixture(t)
	g := newFileGuest().connect(t)
	f.cfg.Env = tools.NewEnv(tools.Options{Guest: func(context.Context) (*agentproto.Client, error) { return g, nil }})
	f.set(t, "bob", func(ae *agents.AutonomousExec) { ae.Enabled, ae.BackgroundProcesses = true, true })
	cs := connectInMemory(t, f, "bob", nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*jsonschema.Resolved{}
	for _, tl := range res.Tools {
		if tl.Title == "" {
			t.Errorf("%s has no title", tl.Name)
		}
		b, err := json.Marshal(tl.OutputSchema)
		if err != nil || tl.OutputSchema == nil {
			t.Fatalf("%s: outputSchema %v (%v)", tl.Name, tl.OutputSchema, err)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: outputSchema is not a JSON schema: %v", tl.Name, err)
		}
		if s.Type != "object" {
			t.Errorf("%s: outputSchema type %q, want object", tl.Name, s.Type)
		}
		if schemas[tl.Name], err = s.Resolve(nil); err != nil {
			t.Fatalf("%s: outputSchema: %v", tl.Name, err)
		}
	}
	for _, c := range []struct {
		name string
		args map[string]any
		ok   bool
	}{
		{"sandbox_list_directory", map[string]any{"recursive": true}, true},
		{"sandbox_read_file", map[string]any{"path": "a.txt"}, true},
		{"sandbox_read_file", map[string]any{"path": "big.txt", "max_chars": 10}, true},
		{"sandbox_read_file", map[string]any{"path": "../alice/x"}, false},
		{"sandbox_read_file", map[string]any{"path": "missing"}, false},
		{"sandbox_exec", map[string]any{"command": "true"}, true},
		{"sandbox_file_info", map[string]any{"path": "a.txt"}, true},
		{"sandbox_file_info", map[string]any{"path": "src"}, true},
		{"sandbox_file_info", map[string]any{"path": "/etc/passwd"}, false},
		{"sandbox_read_multiple_files", map[string]any{"paths": []string{"a.txt", "missing", "src", "big.txt"}, "max_chars": 100}, true},
		{"sandbox_read_multiple_files", map[string]any{"paths": []string{"a.txt", "/etc/shadow"}}, false},
		{"sandbox_directory_tree", map[string]any{}, true},
		{"sandbox_directory_tree", map[string]any{"max_depth": 1, "max_entries": 2}, true},
		{"sandbox_directory_tree", map[string]any{"path": "a.txt"}, false},
		{"sandbox_exec", map[string]any{"command": "true", "timeout": "soon"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.name, Arguments: c.args})
			if err != nil {
				t.Fatal(err)
			}
			checkStructured(t, schemas[c.name], r, c.ok)
		})
	}
}

// checkStructured validates r's structuredContent against schema and
// compares it with the text envelope.
func checkStructured(t *testing.T, schema *jsonschema.Resolved, r *mcp.CallToolResult, wantOK bool) map[string]any {
	t.Helper()
	if schema == nil {
		t.Fatal("the tool is not listed")
	}
	b, err := json.Marshal(r.StructuredContent)
	if err != nil || r.StructuredContent == nil {
		t.Fatalf("structuredContent %v (%v)", r.StructuredContent, err)
	}
	var sc map[string]any
	if err := json.Unmarshal(b, &sc); err != nil {
		t.Fatalf("structuredContent is not an object: %s", b)
	}
	if err := schema.Validate(sc); err != nil {
		t.Fatalf("structuredContent %s does not match the outputSchema: %v", b, err)
	}
	var text map[string]any
	if err := json.Unmarshal([]byte(r.Content[0].(*mcp.TextContent).Text), &text); err != nil {
		t.Fatal(err)
	}
	tb, _ := json.Marshal(text)
	sb, _ := json.Marshal(sc)
	if string(tb) != string(sb) {
		t.Errorf("structuredContent %s differs from the text envelope %s", sb, tb)
	}
	if sc["ok"] != wantOK || r.IsError == wantOK {
		t.Fatalf("ok %v (IsError %v), want %v: %s", sc["ok"], r.IsError, wantOK, b)
	}
	return sc
}

// TestOutputSchemaRejectsWrongResults: the schemas are not vacuous: a
// result missing a key or of the wrong type fails validation, also deep
// in directory_tree's recursive nodes.
func TestOutputSchemaRejectsWrongResults(t *testing.T) {
	f := newFixture(t)
	cs := connectInMemory(t, f, "bob", nil)
	schemas := outputSchemas(t, cs)
	tree := func(child string) string {
		return `{"ok": true, "result": {"kind": "tree", "path": "/x", "node_count": 1, "max_depth": 3, "truncated": false, ` +
			`"tree": {"name": "x", "type": "dir", "children": [{"name": "s", "type": "dir", "children": [` + child + `]}]}}}`
	}
	for _, c := range []struct {
		tool, doc string
		valid     bool
	}{
		{"sandbox_read_file", `{"ok": true, "result": {"kind": "file", "path": "/x", "content": 3, "size": 1, "max_chars": 1}}`, false},
		{"sandbox_read_file", `{"ok": true, "result": {"kind": "file", "content": "", "size": 1, "max_chars": 1}}`, false},
		{"sandbox_read_file", `{"ok": true, "result": {"kind": "video", "path": "/x", "size": 1}}`, false},
		{"sandbox_read_file", `{"ok": false, "kind": "oops", "message": "m", "retryable": false}`, false},
		{"sandbox_read_file", `{"ok": true, "extra": 1}`, false},
		{"sandbox_directory_tree", tree(`{"name": "f", "type": "file", "size": 1}`), true},
		{"sandbox_directory_tree", tree(`{"name": "f", "size": 1}`), false},
		{"sandbox_directory_tree", tree(`{"name": "f", "type": "file", "size": "big"}`), false},
		{"sandbox_file_info", `{"ok": true, "result": {"kind": "info", "path": "/x", "name": "x", "type": "pipe", "size": 1, "mode": "0644", "modified": "t", "uid": 1, "gid": 1}}`, false},
	} {
		var v map[string]any
		if err := json.Unmarshal([]byte(c.doc), &v); err != nil {
			t.Fatal(err)
		}
		if err := schemas[c.tool].Validate(v); (err == nil) != c.valid {
			t.Errorf("%s: %s: validation error %v, want valid %v", c.tool, c.doc, err, c.valid)
		}
	}
}

// TestNewFileTools: sandbox_file_info, sandbox_read_multiple_files and
// sandbox_directory_tree answer what the files are, bound what they
// return, and refuse paths outside the agent's directories.
func TestNewFileTools(t *testing.T) {
	f := newFixture(t)
	g := newFileGuest().connect(t)
	f.cfg.Env = tools.NewEnv(tools.Options{Guest: func(context.Context) (*agentproto.Client, error) { return g, nil }})
	cs := connectInMemory(t, f, "bob", nil)
	schemas := outputSchemas(t, cs)
	call := func(name string, args map[string]any, ok bool) map[string]any {
		t.Helper()
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return checkStructured(t, schemas[name], r, ok)
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }

	r := call("sandbox_file_info", map[string]any{"path": "a.txt"}, true)["result"].(map[string]any)
	if r["type"] != "file" || r["size"] != 6.0 || r["mode"] != "0644" || r["path"] != bobHome+"/a.txt" || r["modified"] != "2026-11-25T12:00:00Z" {
		t.Errorf("file_info a.txt: %s", js(r))
	}
	if r := call("sandbox_file_info", map[string]any{"path": "/etc/passwd"}, false); r["field"] != "path" || r["kind"] != "invalid_args" {
		t.Errorf("file_info outside: %s", js(r))
	}

	r = call("sandbox_read_multiple_files", map[string]any{"paths": []string{"a.txt", "missing", "src", "big.txt"}, "max_chars": 100}, true)["result"].(map[string]any)
	files := r["files"].([]any)
	want := []string{
		`{"content":"hello\n","ok":true,"path":"` + bobHome + `/a.txt","size":6}`,
		`{"error_kind":"not_found","ok":false,"path":"missing"}`,
		`{"error_kind":"invalid_args","ok":false,"path":"src"}`,
		`{"content":"` + strings.Repeat("x", 100) + `","ok":true,"path":"` + bobHome + `/big.txt","size":5000,"truncated":true}`,
	}
	if len(files) != len(want) {
		t.Fatalf("read_multiple_files: %s", js(r))
	}
	for i, w := range want {
		fm := files[i].(map[string]any)
		delete(fm, "error") // the message is for the model; the kind is the contract
		if js(fm) != w {
			t.Errorf("file %d: %s, want %s", i, js(fm), w)
		}
	}
	for _, args := range []map[string]any{
		{"paths": []string{"a.txt", "/etc/shadow"}},
		{"paths": []string{}},
		{"paths": slices.Repeat([]string{"a.txt"}, tools.MaxReadFiles+1)},
	} {
		if r := call("sandbox_read_multiple_files", args, false); r["field"] != "paths" {
			t.Errorf("read_multiple_files %v: %s", args, js(r))
		}
	}

	r = call("sandbox_directory_tree", map[string]any{}, true)["result"].(map[string]any)
	if got := js(r["tree"]); got != `{"children":[{"name":"a.txt","size":6,"type":"file"},{"name":"big.txt","size":5000,"type":"file"},`+
		`{"children":[{"name":"main.go","size":13,"type":"file"}],"name":"src","type":"dir"}],"name":"bob","type":"dir"}` || r["node_count"] != 4.0 || r["truncated"] != false {
		t.Errorf("tree: %s", js(r))
	}
	r = call("sandbox_directory_tree", map[string]any{"max_depth": 1, "max_entries": 2}, true)["result"].(map[string]any)
	if r["node_count"] != 2.0 || r["truncated"] != true {
		t.Errorf("bounded tree: %s", js(r))
	}
	if r := call("sandbox_directory_tree", map[string]any{"path": "../alice"}, false); r["field"] != "path" {
		t.Errorf("tree outside: %s", js(r))
	}
}

// TestReadFileImage: sandbox_read_file returns a PNG as image content with
// its exact bytes (the text and structuredContent carry no base64), reads
// a .png that isn't one as text, and refuses an image over MaxImageBytes.
func TestReadFileImage(t *testing.T) {
	f := newFixture(t)
	fg := newFileGuest()
	fg.files[bobHome+"/pic.png"] = pngBytes
	fg.files[bobHome+"/fake.png"] = "not a picture\n"
	fg.files[bobHome+"/huge.png"] = pngBytes + strings.Repeat("\x00", tools.MaxImageBytes)
	g := fg.connect(t)
	f.cfg.Env = tools.NewEnv(tools.Options{Guest: func(context.Context) (*agentproto.Client, error) { return g, nil }})
	cs := connectInMemory(t, f, "bob", nil)
	schema := outputSchemas(t, cs)["sandbox_read_file"]
	read := func(p string, ok bool) (*mcp.CallToolResult, map[string]any) {
		t.Helper()
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sandbox_read_file", Arguments: map[string]any{"path": p}})
		if err != nil {
			t.Fatal(err)
		}
		return r, checkStructured(t, schema, r, ok)
	}
	r, sc := read("pic.png", true)
	if len(r.Content) != 2 {
		t.Fatalf("pic.png: %d content items", len(r.Content))
	}
	img, ok := r.Content[1].(*mcp.ImageContent)
	if !ok || string(img.Data) != pngBytes || img.MIMEType != "image/png" {
		t.Fatalf("pic.png: content %#v", r.Content[1])
	}
	if res := sc["result"].(map[string]any); res["kind"] != "image" || res["data"] != nil || res["size"] != float64(len(pngBytes)) {
		t.Fatalf("pic.png result: %v", res)
	}
	if r, sc = read("fake.png", true); len(r.Content) != 1 || sc["result"].(map[string]any)["content"] != "not a picture\n" {
		t.Fatalf("fake.png: %v", sc)
	}
	r2, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sandbox_read_multiple_files", Arguments: map[string]any{"paths": []string{"pic.png"}}})
	if err != nil || r2.IsError || len(r2.Content) != 1 {
		t.Fatalf("read_multiple_files of an image: %v %v", r2, err)
	}
	if r, sc = read("huge.png", false); len(r.Content) != 1 || sc["field"] != "path" || !strings.Contains(sc["message"].(string), "limit") {
		t.Fatalf("huge.png: %v", sc)
	}
}

// resolveSchema parses and resolves tl's outputSchema.
func resolveSchema(t *testing.T, tl *mcp.Tool) *jsonschema.Resolved {
	t.Helper()
	b, _ := json.Marshal(tl.OutputSchema)
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// outputSchemas lists the session's tools with each one's resolved
// outputSchema.
func outputSchemas(t *testing.T, cs *mcp.ClientSession) map[string]*jsonschema.Resolved {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*jsonschema.Resolved{}
	for _, tl := range res.Tools {
		schemas[tl.Name] = resolveSchema(t, tl)
	}
	return schemas
}
