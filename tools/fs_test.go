package tools

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

func TestReadFile(t *testing.T) {
	lines := ""
	for i := 1; i <= 10; i++ {
		lines += fmt.Sprintf("line %d\n", i)
	}
	long := strings.Repeat("é", 20_000) // 2 bytes each
	tests := []struct {
		name      string
		args      map[string]any
		content   string
		truncated bool
		warn      string
		req       agentproto.ReadFileRequest
	}{
		{"whole file", map[string]any{"path": "f"}, lines, false, "",
			agentproto.ReadFileRequest{MaxBytes: 4 * DefaultMaxChars}},
		{"line range", map[string]any{"path": "f", "start_line": 3, "line_count": 2}, "line 3\nline 4\n", false, "",
			agentproto.ReadFileRequest{StartLine: 3, LineCount: 2, MaxBytes: 4 * DefaultMaxChars}},
		{"tail", map[string]any{"path": "f", "tail_lines": 2}, "line 9\nline 10\n", false, "",
			agentproto.ReadFileRequest{TailLines: 2, MaxBytes: 4 * DefaultMaxChars}},
		{"past the end", map[string]any{"path": "f", "start_line": 30}, "", false, "start_line 30 is past the end: the file has 10 lines",
			agentproto.ReadFileRequest{StartLine: 30, MaxBytes: 4 * DefaultMaxChars}},
		{"char cap", map[string]any{"path": "f", "max_chars": 12}, "line 1\nline ", true, "content truncated to 12 characters (the file has 71 bytes)",
			agentproto.ReadFileRequest{MaxBytes: 48}},
		{"cap over the maximum", map[string]any{"path": "f", "max_chars": 10_000_000}, lines, false, "max_chars 10000000 is over the maximum; used 200000",
			agentproto.ReadFileRequest{MaxBytes: 4 * MaxMaxChars}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.guest.put("/workspace/agents/bob/f", lines)
			e := h.call("sandbox_read_file", tt.args)
			r := ok(t, e)
			if r["kind"] != "file" || r["path"] != "/workspace/agents/bob/f" || r["content"] != tt.content || r["size"] != jsonNum(len(lines)) {
				t.Fatalf("result %v", r)
			}
			if got := r["truncated"] == true; got != tt.truncated {
				t.Fatalf("truncated = %v, want %v", got, tt.truncated)
			}
			if tt.warn != "" && (len(e.Warnings) != 1 || !strings.HasPrefix(e.Warnings[0], tt.warn)) {
				t.Fatalf("warnings %q, want %q", e.Warnings, tt.warn)
			}
			if tt.warn == "" && len(e.Warnings) != 0 {
				t.Fatalf("unexpected warnings %q", e.Warnings)
			}
			req := h.guest.last(t, agentproto.OpReadFile).(agentproto.ReadFileRequest)
			tt.req.Identity, tt.req.Path = agentproto.Identity{User: "agent-bob", Root: "/workspace/agents/bob"}, "/workspace/agents/bob/f"
			if req.Identity != tt.req.Identity || req.Path != tt.req.Path || req.StartLine != tt.req.StartLine ||
				req.LineCount != tt.req.LineCount || req.TailLines != tt.req.TailLines || req.MaxBytes != tt.req.MaxBytes {
				t.Fatalf("request %+v\nwant    %+v", req, tt.req)
			}
		})
	}

	t.Run("characters, not bytes", func(t *testing.T) {
		h := newHarness(t)
		h.guest.put("/workspace/agents/bob/long", long)
		r := ok(t, h.call("sandbox_read_file", map[string]any{"path": "long"}))
		if c := r["content"].(string); c != strings.Repeat("é", DefaultMaxChars) || r["truncated"] != true {
			t.Fatalf("content of %d characters, truncated %v", len([]rune(c)), r["truncated"])
		}
		r = ok(t, h.call("sandbox_read_file", map[string]any{"path": "long", "tail_lines": 1, "max_chars": 5}))
		if r["content"] != "ééééé" {
			t.Fatalf("tail keeps the end: %q", r["content"])
		}
	})
	t.Run("binary", func(t *testing.T) {
		h := newHarness(t)
		h.guest.put("/workspace/agents/bob/bin", "\x7fELF\x00\xff\xfe")
		e := h.call("sandbox_read_file", map[string]any{"path": "bin"})
		if r := ok(t, e); r["content"] != "\x7fELF\x00\ufffd" || len(e.Warnings) != 1 || !strings.Contains(e.Warnings[0], "binary") {
			t.Fatalf("content %q warnings %q", r["content"], e.Warnings)
		}
	})
	t.Run("directory", func(t *testing.T) {
		h := newHarness(t)
		e := h.call("sandbox_read_file", map[string]any{"path": "~"})
		failed(t, e, envelope.InvalidArgs, "path")
		if !strings.Contains(e.Message, "sandbox_list_directory") {
			t.Fatal(e.Message)
		}
	})
	t.Run("missing", func(t *testing.T) {
		failed(t, newHarness(t).call("sandbox_read_file", map[string]any{"path": "nope"}), envelope.NotFound, "")
	})
}

func jsonNum(n int) any { return json.Number(fmt.Sprint(n)) }

func TestListDirectory(t *testing.T) {
	h := newHarness(t)
	h.guest.put("/workspace/agents/bob/a.txt", "abc")
	h.guest.put("/workspace/agents/bob/src/main.go", "package main")
	h.guest.put("/workspace/agents/bob/src/x/y/z/deep.txt", "")

	e := h.call("sandbox_list_directory", nil)
	r := ok(t, e)
	want := []any{
		map[string]any{"name": "a.txt", "path": "/workspace/agents/bob/a.txt", "type": "file", "size": jsonNum(3)},
		map[string]any{"name": "src", "path": "/workspace/agents/bob/src", "type": "dir"},
	}
	if r["kind"] != "listing" || r["path"] != "/workspace/agents/bob" || fmt.Sprint(r["entries"]) != fmt.Sprint(want) ||
		r["entry_count"] != jsonNum(2) || r["truncated"] != false {
		t.Fatalf("listing %v", r)
	}
	if req := h.guest.last(t, agentproto.OpList).(agentproto.ListRequest); req.MaxDepth != 1 || req.MaxEntries != ListMaxEntries {
		t.Fatalf("request %+v", req)
	}

	r = ok(t, h.call("sandbox_list_directory", map[string]any{"path": "src", "recursive": true}))
	var paths []string
	for _, e := range r["entries"].([]any) {
		paths = append(paths, e.(map[string]any)["path"].(string))
	}
	if !slices.Equal(paths, []string{"/workspace/agents/bob/src/main.go", "/workspace/agents/bob/src/x", "/workspace/agents/bob/src/x/y", "/workspace/agents/bob/src/x/y/z"}) {
		t.Fatalf("recursive listing (depth 3): %v", paths)
	}

	for i := range 250 {
		h.guest.put(fmt.Sprintf("/workspace/shared/many/%03d", i), "")
	}
	e = h.call("sandbox_list_directory", map[string]any{"path": "/workspace/shared/many"})
	r = ok(t, e)
	if r["entry_count"] != jsonNum(ListMaxEntries) || r["truncated"] != true || len(e.Warnings) != 1 {
		t.Fatalf("capped listing: count %v truncated %v warnings %q", r["entry_count"], r["truncated"], e.Warnings)
	}

	failed(t, h.call("sandbox_list_directory", map[string]any{"path": "a.txt"}), envelope.InvalidArgs, "path")
}

func TestWriteFile(t *testing.T) {
	h := newHarness(t)
	r := ok(t, h.call("sandbox_write_file", map[string]any{"path": "new/dir/f.txt", "content": "hello"}))
	if r["path"] != "/workspace/agents/bob/new/dir/f.txt" || r["size"] != jsonNum(5) {
		t.Fatalf("result %v", r)
	}
	req := h.guest.last(t, agentproto.OpWriteFile).(agentproto.WriteFileRequest)
	if !req.MakeParents || req.Append || string(req.Data) != "hello" {
		t.Fatalf("request %+v", req)
	}
	ok(t, h.call("sandbox_write_file", map[string]any{"path": "new/dir/f.txt", "content": " world", "append": true}))
	if s, _ := h.guest.get("/workspace/agents/bob/new/dir/f.txt"); s != "hello world" {
		t.Fatalf("after append: %q", s)
	}
	failed(t, h.call("sandbox_write_file", map[string]any{"path": "~", "content": "x"}), envelope.InvalidArgs, "path")
	failed(t, h.call("sandbox_write_file", map[string]any{"path": "new", "content": "x"}), envelope.InvalidArgs, "path")
	failed(t, h.call("sandbox_write_file", map[string]any{"path": "big", "content": strings.Repeat("x", MaxWriteBytes+1)}), envelope.InvalidArgs, "content")
}

func TestEditFile(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		field    string
		msg      string
	}{
		{"exactly once", "b := 2", "b := 3", "", ""},
		{"no match", "c := 3", "x", "old_string", "old_string matched 0 times in /workspace/agents/bob/m.go; it must match exactly once"},
		{"three matches", "a", "x", "old_string", "old_string matched 3 times in /workspace/agents/bob/m.go; it must match exactly once"},
		{"no change", "b := 2", "b := 2", "new_string", "new_string is the same as old_string"},
	}
	const src = "a := 1\nb := 2\nfmt.Println(a, a)\n"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.guest.put("/workspace/agents/bob/m.go", src)
			e := h.call("sandbox_edit_file", map[string]any{"path": "m.go", "old_string": tt.old, "new_string": tt.new})
			got, _ := h.guest.get("/workspace/agents/bob/m.go")
			if tt.field == "" {
				r := ok(t, e)
				if got != "a := 1\nb := 3\nfmt.Println(a, a)\n" || r["replacements"] != jsonNum(1) || r["line"] != jsonNum(2) {
					t.Fatalf("file %q result %v", got, r)
				}
				return
			}
			failed(t, e, envelope.InvalidArgs, tt.field)
			if !strings.HasPrefix(e.Message, tt.msg) {
				t.Fatalf("message %q, want %q", e.Message, tt.msg)
			}
			if got != src {
				t.Fatalf("a failed edit changed the file: %q", got)
			}
		})
	}
}

func TestMoveAndDelete(t *testing.T) {
	h := newHarness(t)
	h.guest.put("/workspace/agents/bob/a", "A")
	h.guest.put("/workspace/agents/bob/b", "B")

	e := h.call("sandbox_move", map[string]any{"source": "a", "destination": "b"})
	failed(t, e, envelope.InvalidArgs, "destination")
	if !strings.Contains(e.Message, "overwrite: true") {
		t.Fatal(e.Message)
	}
	r := ok(t, h.call("sandbox_move", map[string]any{"source": "a", "destination": "b", "overwrite": true}))
	if r["source"] != "/workspace/agents/bob/a" || r["destination"] != "/workspace/agents/bob/b" {
		t.Fatalf("result %v", r)
	}
	ok(t, h.call("sandbox_move", map[string]any{"source": "b", "destination": "/workspace/shared/b"}))
	if req := h.guest.last(t, agentproto.OpMove).(agentproto.MoveRequest); req.Root != "/workspace" {
		t.Fatalf("a move between home and shared runs beneath %q, want /workspace", req.Root)
	}
	e = h.call("sandbox_move", map[string]any{"source": "/workspace/shared/b", "destination": "nodir/b"})
	failed(t, e, envelope.NotFound, "")
	if !strings.Contains(e.Message, "the directory /workspace/agents/bob/nodir does not exist") {
		t.Fatal(e.Message)
	}
	failed(t, h.call("sandbox_move", map[string]any{"source": "gone", "destination": "x"}), envelope.NotFound, "")
	failed(t, h.call("sandbox_move", map[string]any{"source": "~", "destination": "x"}), envelope.InvalidArgs, "source")

	h.guest.put("/workspace/agents/bob/d/one", "1")
	e = h.call("sandbox_delete", map[string]any{"path": "d"})
	failed(t, e, envelope.InvalidArgs, "recursive")
	r = ok(t, h.call("sandbox_delete", map[string]any{"path": "d", "recursive": true}))
	if r["deleted"] != "/workspace/agents/bob/d" || r["recursive"] != true {
		t.Fatalf("result %v", r)
	}
	failed(t, h.call("sandbox_delete", map[string]any{"path": "d"}), envelope.NotFound, "")
	for _, p := range []string{"~", "/workspace/shared", "."} {
		failed(t, h.call("sandbox_delete", map[string]any{"path": p, "recursive": true}), envelope.InvalidArgs, "path")
	}
}

func TestSearchFiles(t *testing.T) {
	rgOut := "./src/a.go\x0011:func main() {\n./src/a.go\x0012-\tfmt.Println()\n--\n./b.go\x003:func main2() {\n"
	t.Run("command line and parsing", func(t *testing.T) {
		h := newHarness(t)
		h.guest.exec = printer(rgOut, "", agentproto.ExitStatus{})
		e := h.call("sandbox_search_files", map[string]any{
			"pattern": "-func", "include": "*.go", "context_lines": 50, "case_insensitive": true,
		})
		r := ok(t, e)
		req := h.guest.last(t, agentproto.OpExec).(agentproto.ExecRequest)
		want := []string{"rg", "-n", "--no-heading", "--with-filename", "--null", "--color", "never", "--max-columns", "500", "--max-columns-preview",
			"-i", "-C", "10", "--glob", "*.go", "--no-ignore-parent", "--no-ignore-global", "-e", "-func", "--", "."}
		if !slices.Equal(req.Argv, want) || req.Cwd != "/workspace/agents/bob" || req.User != "agent-bob" {
			t.Fatalf("rg request %+v", req)
		}
		if len(e.Warnings) != 1 || !strings.HasPrefix(e.Warnings[0], "context_lines 50 is over the maximum; used 10") {
			t.Fatalf("warnings %q", e.Warnings)
		}
		wantLines := []any{
			map[string]any{"path": "/workspace/agents/bob/src/a.go", "line": jsonNum(11), "text": "func main() {", "match": true},
			map[string]any{"path": "/workspace/agents/bob/src/a.go", "line": jsonNum(12), "text": "\tfmt.Println()", "match": false},
			map[string]any{"path": "/workspace/agents/bob/b.go", "line": jsonNum(3), "text": "func main2() {", "match": true},
		}
		if fmt.Sprint(r["lines"]) != fmt.Sprint(wantLines) || r["match_count"] != jsonNum(2) || r["truncated"] != false {
			t.Fatalf("result %v", r)
		}
	})
	t.Run("max_results", func(t *testing.T) {
		h := newHarness(t)
		h.guest.exec = printer(rgOut, "", agentproto.ExitStatus{})
		e := h.call("sandbox_search_files", map[string]any{"pattern": "func", "max_results": 1})
		r := ok(t, e)
		if r["match_count"] != jsonNum(1) || r["truncated"] != true || len(r["lines"].([]any)) != 2 {
			t.Fatalf("result %v", r)
		}
	})
	t.Run("a file", func(t *testing.T) {
		h := newHarness(t)
		h.guest.put("/workspace/shared/notes.md", "x")
		ok(t, h.call("sandbox_search_files", map[string]any{"pattern": "x", "path": "/workspace/shared/notes.md"}))
		req := h.guest.last(t, agentproto.OpExec).(agentproto.ExecRequest)
		if req.Cwd != "/workspace/shared" || req.Argv[len(req.Argv)-1] != "./notes.md" || req.Root != "/workspace/shared" {
			t.Fatalf("request %+v", req)
		}
		// Ignore files in the shared area are anyone's: none is obeyed.
		if !slices.Contains(req.Argv, "--no-ignore") {
			t.Fatalf("a shared-area search obeys ignore files: %q", req.Argv)
		}
	})
	t.Run("no matches", func(t *testing.T) {
		h := newHarness(t)
		h.guest.exec = printer("", "", agentproto.ExitStatus{Code: 1})
		e := h.call("sandbox_search_files", map[string]any{"pattern": "zzz"})
		if r := ok(t, e); r["match_count"] != jsonNum(0) || len(e.Warnings) != 1 || !strings.HasPrefix(e.Warnings[0], "no matches") {
			t.Fatalf("result %v warnings %q", r, e.Warnings)
		}
	})
	t.Run("bad regex", func(t *testing.T) {
		h := newHarness(t)
		h.guest.exec = printer("", "regex parse error:\n    (\n    ^\nerror: unclosed group\n", agentproto.ExitStatus{Code: 2})
		e := h.call("sandbox_search_files", map[string]any{"pattern": "("})
		failed(t, e, envelope.InvalidArgs, "pattern")
		if !strings.Contains(e.Message, "unclosed group") {
			t.Fatal(e.Message)
		}
	})
	t.Run("partial errors", func(t *testing.T) {
		h := newHarness(t)
		h.guest.exec = printer(rgOut, "./private: Permission denied (os error 13)\n", agentproto.ExitStatus{Code: 2})
		e := h.call("sandbox_search_files", map[string]any{"pattern": "func"})
		if r := ok(t, e); r["match_count"] != jsonNum(2) || len(e.Warnings) != 1 || !strings.Contains(e.Warnings[0], "Permission denied") {
			t.Fatalf("result %v warnings %q", r, e.Warnings)
		}
	})
	t.Run("ripgrep missing", func(t *testing.T) {
		h := newHarness(t)
		h.call("sandbox_list_directory", nil)
		h.guest.fail[agentproto.OpExec] = fmt.Errorf("%w: exec rg: executable file not found in $PATH", agentproto.ErrNotFound)
		e := h.call("sandbox_search_files", map[string]any{"pattern": "x"})
		failed(t, e, envelope.ExecutionError, "")
		if !strings.Contains(e.Message, `sandbox_install {"packages": ["ripgrep"]}`) {
			t.Fatal(e.Message)
		}
	})
	t.Run("ripgrep missing: the guest agent's search runs instead", func(t *testing.T) {
		h := newHarness(t)
		var argvs [][]string
		h.guest.exec = func(req *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
			argvs = append(argvs, req.Argv)
			if req.Argv[0] == "rg" {
				return agentproto.ExitStatus{}, fmt.Errorf("%w: exec rg: executable file not found in $PATH", agentproto.ErrNotFound)
			}
			eio.Stdout.Write([]byte(rgOut))
			return agentproto.ExitStatus{Exited: true}, nil
		}
		e := h.call("sandbox_search_files", map[string]any{"pattern": "func", "include": "*.go", "context_lines": 1})
		r := ok(t, e)
		if r["match_count"] != jsonNum(2) || len(e.Warnings) != 1 || !strings.Contains(e.Warnings[0], "ripgrep is not installed") {
			t.Fatalf("result %v warnings %q", r, e.Warnings)
		}
		if len(argvs) != 2 || argvs[1][0] != GuestSearch || argvs[1][1] != "search" || !slices.Equal(argvs[1][2:], argvs[0][1:]) {
			t.Fatalf("ran %q, want rg then the guest agent's search with the same arguments", argvs)
		}
	})
	t.Run("symlink to a file", func(t *testing.T) {
		h := newHarness(t)
		h.guest.links["/workspace/agents/bob/pw"] = "/etc/passwd"
		h.call("sandbox_list_directory", nil)
		h.guest.fail[agentproto.OpExec] = fmt.Errorf("%w: working directory /workspace/agents/bob/pw", agentproto.ErrNotDir)
		failed(t, h.call("sandbox_search_files", map[string]any{"pattern": "root", "path": "pw"}), envelope.InvalidArgs, "path")
	})
}

func TestFindFiles(t *testing.T) {
	h := newHarness(t)
	h.guest.exec = printer("./config.yaml\n./src/app_config.py\n./x/config\n", "find: './secret': Permission denied\n", agentproto.ExitStatus{Code: 1})
	e := h.call("sandbox_find_files", map[string]any{"pattern": "config", "path": "~", "max_results": 2})
	r := ok(t, e)
	req := h.guest.last(t, agentproto.OpExec).(agentproto.ExecRequest)
	if !slices.Equal(req.Argv, []string{"find", ".", "-name", "*config*"}) || req.Cwd != "/workspace/agents/bob" {
		t.Fatalf("request %+v", req)
	}
	if fmt.Sprint(r["files"]) != "[/workspace/agents/bob/config.yaml /workspace/agents/bob/src/app_config.py]" ||
		r["truncated"] != true || r["pattern"] != "*config*" {
		t.Fatalf("result %v", r)
	}
	if len(e.Warnings) != 2 {
		t.Fatalf("warnings %q, want permission and truncation", e.Warnings)
	}

	h.guest.exec = nil
	ok(t, h.call("sandbox_find_files", map[string]any{"pattern": "*.py"}))
	if req := h.guest.last(t, agentproto.OpExec).(agentproto.ExecRequest); req.Argv[3] != "*.py" {
		t.Fatalf("a glob is used as is: %v", req.Argv)
	}
}
