package tools

import (
	"strings"

	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// What each tool answers: its title for people and the schema of its
// result, from which the MCP outputSchema (the whole envelope) is built.

var (
	tStr  = map[string]any{"type": "string"}
	tInt  = map[string]any{"type": "integer"}
	tBool = map[string]any{"type": "boolean"}
)

func tArr(items map[string]any) map[string]any {
	return map[string]any{"type": "array", "items": items}
}

// out is an object schema; required is a space-separated list of the
// keys every result has. Other keys may appear (optional ones).
func out(required string, props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": strings.Fields(required)}
}

var execOut = map[string]any{"stdout": tStr, "stderr": tStr, "exit_code": tInt, "cwd": tStr}

func with(m map[string]any, kv ...any) map[string]any {
	c := map[string]any{}
	for k, v := range m {
		c[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

var installOut = map[string]any{"installed": tArr(tStr), "exit_code": tInt, "output": tStr}

// outputs maps every tool of the catalog to its title and result schema.
var outputs = map[string]struct {
	title  string
	result map[string]any
}{
	"sandbox_read_file": {"Read file", out("kind path size", map[string]any{
		"kind": map[string]any{"enum": []string{"file", "image"}}, "mime_type": tStr, "data": tStr, "path": tStr, "content": tStr, "size": tInt, "start_line": tInt, "line_count": tInt,
		"tail_lines": tInt, "total_lines": tInt, "max_chars": tInt, "truncated": tBool,
	})},
	"sandbox_list_directory": {"List directory", out("kind path entries entry_count truncated", map[string]any{
		"kind": tStr, "path": tStr, "entry_count": tInt, "truncated": tBool,
		"entries": tArr(out("name path type", map[string]any{"name": tStr, "path": tStr, "type": tStr, "size": tInt, "target": tStr})),
	})},
	"sandbox_search_files": {"Search file contents", out("kind pattern path lines match_count truncated", map[string]any{
		"kind": tStr, "pattern": tStr, "path": tStr, "match_count": tInt, "truncated": tBool,
		"lines": tArr(out("path line text match", map[string]any{"path": tStr, "line": tInt, "text": tStr, "match": tBool})),
	})},
	"sandbox_find_files": {"Find files by name", out("kind pattern path files count truncated", map[string]any{
		"kind": tStr, "pattern": tStr, "path": tStr, "files": tArr(tStr), "count": tInt, "truncated": tBool,
	})},
	"sandbox_write_file": {"Write file", out("path size appended", map[string]any{"path": tStr, "size": tInt, "appended": tBool})},
	"sandbox_edit_file": {"Edit file", out("path replacements line size", map[string]any{
		"path": tStr, "replacements": tInt, "line": tInt, "size": tInt,
	})},
	"sandbox_move":   {"Move or rename", out("source destination", map[string]any{"source": tStr, "destination": tStr})},
	"sandbox_delete": {"Delete", out("deleted recursive", map[string]any{"deleted": tStr, "recursive": tBool})},
	"sandbox_exec":   {"Run command", out("stdout stderr exit_code cwd", execOut)},
	"sandbox_plugin_register": {"Register plugin", out("status plugin_id plugin_name tools network", map[string]any{
		"status": tStr, "plugin_id": tStr, "plugin_name": tStr, "network": tStr,
		"tools": tArr(out("name description", map[string]any{"name": tStr, "description": tStr})),
	})},
	"sandbox_secret_check": {"Check secret", out("exists", map[string]any{"exists": tBool})},
	"sandbox_secret_set":   {"Store secret", out("stored key", map[string]any{"stored": tBool, "key": tStr})},
	"sandbox_exec_background": {"Start background command", out("pid log_file cwd background", map[string]any{
		"pid": tInt, "log_file": tStr, "cwd": tStr, "background": tBool,
	})},
	"sandbox_process": {"Manage background process", out("pid action running log_file log_tail", map[string]any{
		"pid": tInt, "action": tStr, "running": tBool, "exit_code": tInt, "signal": tInt, "log_file": tStr, "log_tail": tStr,
	})},
	"sandbox_install":     {"Install system packages", out("installed exit_code output", installOut)},
	"sandbox_pip_install": {"Install Python packages", out("installed exit_code output venv", with(installOut, "venv", tStr))},
	"sandbox_npm_install": {"Install Node.js packages", out("installed exit_code output prefix", with(installOut, "prefix", tStr))},
	"sandbox_run_script": {"Run script", out("stdout stderr exit_code cwd combined language",
		with(execOut, "combined", tStr, "language", tStr))},
	"sandbox_request_review": {"Request review", out("project changes review_command", map[string]any{
		"project": tStr, "changes": tInt, "review_command": tStr,
	})},
	"sandbox_file_info": {"File info", out("kind path name type size mode modified uid gid", map[string]any{
		"kind": tStr, "path": tStr, "name": tStr, "type": map[string]any{"enum": []string{"file", "dir", "symlink", "other"}},
		"size": tInt, "mode": tStr, "modified": tStr, "uid": tInt, "gid": tInt, "target": tStr,
	})},
	"sandbox_read_multiple_files": {"Read multiple files", out("kind files count", map[string]any{
		"kind": tStr, "count": tInt,
		"files": tArr(out("path ok", map[string]any{
			"path": tStr, "ok": tBool, "content": tStr, "size": tInt, "truncated": tBool, "error_kind": tStr, "error": tStr,
		})),
	})},
	"sandbox_directory_tree": {"Directory tree", with(out("kind path tree node_count max_depth truncated", map[string]any{
		"kind": tStr, "path": tStr, "node_count": tInt, "max_depth": tInt, "truncated": tBool,
		"tree": map[string]any{"$ref": "#/properties/result/$defs/node"},
	}), "$defs", map[string]any{"node": out("name type", map[string]any{
		"name": tStr, "type": tStr, "size": tInt, "target": tStr,
		"children": tArr(map[string]any{"$ref": "#/properties/result/$defs/node"}),
	})})},
	"sandbox_share_artifact": {"Share artifact", out("kind path name size sha256 replaced", map[string]any{
		"kind": tStr, "path": tStr, "name": tStr, "host_path": tStr, "mime_type": tStr, "size": tInt, "sha256": tStr, "replaced": tBool,
	})},
	"sandbox_expose_port": {"Expose port", out("url port", map[string]any{"url": tStr, "port": tInt})},
	"sandbox_checkpoint":  {"Checkpoint", out("label bytes disk_bytes seconds", map[string]any{"label": tStr, "bytes": tInt, "disk_bytes": tInt, "seconds": map[string]any{"type": "number"}})},
}

// spec is d's Spec with its title and output schema from outputs (the
// catalog is appended to by several files' init, so this is done when
// listing; TestEveryToolHasTitleAndOutput keeps outputs complete).
func (d *tool) spec() Spec {
	sp := d.Spec
	if o, ok := outputs[d.Name]; ok {
		sp.Title, sp.OutputSchema = o.title, envelope.Schema(o.result)
	}
	return sp
}

// pluginOutput is the output schema of plugins' tools: an envelope of
// whatever the plugin's command printed.
var pluginOutput = envelope.Schema(nil)
