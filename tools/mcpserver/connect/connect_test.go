package connect

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver"
	"github.com/tailscale/hujson"
)

func server() mcpserver.Client {
	return mcpserver.Client{Exe: "/opt/osaurus-sandbox", Env: map[string]string{"OSAURUS_SANDBOX_HOME": "/data/sb"},
		Agent: agents.Agent{Slug: "alice"}, Token: "tok"}
}

func lookup(t *testing.T, id string) Client {
	t.Helper()
	c, err := Lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func read(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	return v
}

// Each client's file gets the entry in its own format, with the env block
// naming the data folder, at its documented place under HOME.
func TestConnectWritesEachClientsFormat(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "")
	for _, tc := range []struct {
		id, rel, key, typ string
	}{
		{"claude-code", ".claude.json", "mcpServers", "stdio"},
		{"cursor", ".cursor/mcp.json", "mcpServers", ""},
		{"vscode", ".config/Code/User/mcp.json", "servers", "stdio"},
		{"claude-desktop", ".config/Claude/claude_desktop_config.json", "mcpServers", ""},
	} {
		t.Run(tc.id, func(t *testing.T) {
			if strings.Contains(tc.rel, ".config") && runtime.GOOS == "darwin" {
				t.Skip("the Linux location; macOS's is under Library/Application Support")
			}
			home := t.TempDir()
			c := lookup(t, tc.id)
			ch, err := Plan(c, home, server())
			if err != nil {
				t.Fatal(err)
			}
			if ch.Path != filepath.Join(home, tc.rel) || ch.Before != nil || !strings.Contains(ch.Describe(), "Creates "+ch.Path) {
				t.Fatalf("plan %s: %s", ch.Path, ch.Describe())
			}
			if _, err := Apply(ch); err != nil {
				t.Fatal(err)
			}
			e := read(t, ch.Path)[tc.key].(map[string]any)["osaurus-sandbox-alice"].(map[string]any)
			if e["command"] != "/opt/osaurus-sandbox" || e["env"].(map[string]any)["OSAURUS_SANDBOX_HOME"] != "/data/sb" ||
				jsonText(e["args"]) != `["mcp","--agent","alice"]` {
				t.Fatalf("entry %v", e)
			}
			if typ, _ := e["type"].(string); typ != tc.typ {
				t.Fatalf("type %q, want %q", typ, tc.typ)
			}
			if st, _ := os.Stat(ch.Path); st.Mode().Perm() != 0o600 {
				t.Fatalf("a new file's mode %v", st.Mode())
			}
			if !Connected(c, home, "osaurus-sandbox-alice") || Connected(c, home, "osaurus-sandbox-bob") {
				t.Fatal("Connected doesn't read the file")
			}
		})
	}
}

// An entry through a context names it before mcp; connecting the same
// agent through another context (or none) replaces the entry, and the
// generic snippets of a context offer no HTTP endpoint or token (both are
// the far side's).
func TestConnectContext(t *testing.T) {
	home := t.TempDir()
	c := lookup(t, "cursor")
	for _, tt := range []struct {
		ctx       string
		args      string
		unchanged bool
		replaces  bool
	}{
		{"", `["mcp","--agent","alice"]`, false, false},
		{"box", `["--context","box","mcp","--agent","alice"]`, false, true},
		{"box", `["--context","box","mcp","--agent","alice"]`, true, true},
		{"lab", `["--context","lab","mcp","--agent","alice"]`, false, true},
		{"", `["mcp","--agent","alice"]`, false, true},
	} {
		s := server()
		s.Context = tt.ctx
		ch, err := Plan(c, home, s)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Unchanged != tt.unchanged || (ch.Replaces != nil) != tt.replaces {
			t.Fatalf("context %q: unchanged %v replaces %s", tt.ctx, ch.Unchanged, ch.Replaces)
		}
		if _, err := Apply(ch); err != nil {
			t.Fatal(err)
		}
		e := read(t, ch.Path)["mcpServers"].(map[string]any)["osaurus-sandbox-alice"].(map[string]any)
		if jsonText(e["args"]) != tt.args || e["env"].(map[string]any)["OSAURUS_SANDBOX_HOME"] != "/data/sb" {
			t.Fatalf("context %q: entry %v", tt.ctx, e)
		}
		sn := Snippets(s)
		if tt.ctx != "" && (strings.Contains(sn, "Bearer") || strings.Contains(sn, "http://") || !strings.Contains(sn, `"--context"`)) ||
			tt.ctx == "" && (!strings.Contains(sn, "Bearer tok") || strings.Contains(sn, "--context")) {
			t.Fatalf("context %q: snippets\n%s", tt.ctx, sn)
		}
	}
}

func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }

// A file with other servers and settings keeps them, in their order; the
// old file is backed up; a second Connect changes nothing.
func TestConnectMergesAndBacksUp(t *testing.T) {
	home := t.TempDir()
	c := lookup(t, "claude-code")
	path := c.Path(home)
	orig := `{"numStartups": 12, "mcpServers": {"github": {"type": "http", "url": "https://api.example/mcp"}, "osaurus-sandbox-alice": {"command": "/old/path"}}, "projects": {"/src": {"allowedTools": []}}}`
	if err := os.WriteFile(path, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	ch, err := Plan(c, home, server())
	if err != nil {
		t.Fatal(err)
	}
	d := ch.Describe()
	if ch.Replaces == nil || !strings.Contains(d, "Replaces osaurus-sandbox-alice") || !strings.Contains(d, "Kept as they are: github") || !strings.Contains(d, "/opt/osaurus-sandbox") || !strings.Contains(d, "Start a new Claude Code session") {
		t.Fatalf("describe:\n%s", d)
	}
	backup, err := Apply(ch)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(backup); string(b) != orig {
		t.Fatalf("backup %q holds %q", backup, b)
	}
	after, _ := os.ReadFile(path)
	if i, j, k := strings.Index(string(after), "numStartups"), strings.Index(string(after), "mcpServers"), strings.Index(string(after), "projects"); !(i < j && j < k) {
		t.Fatalf("the file's order changed:\n%s", after)
	}
	v := read(t, path)
	if v["numStartups"].(float64) != 12 || v["mcpServers"].(map[string]any)["github"].(map[string]any)["url"] != "https://api.example/mcp" || v["projects"] == nil {
		t.Fatalf("other content lost: %s", after)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want the old file's 0640", st.Mode())
	}
	again, err := Plan(c, home, server())
	if err != nil || !again.Unchanged || !strings.Contains(again.Describe(), "nothing to change") {
		t.Fatalf("second plan: %v %s", err, again.Describe())
	}
	if b, err := Apply(again); err != nil || b != "" {
		t.Fatalf("an unchanged apply wrote a backup %q: %v", b, err)
	}
}

// What can't be merged safely is left alone, with the entry to add by
// hand; a file changed after the preview is not overwritten; a linked
// file is written where it lives.
func TestConnectRefusesWhatItCantMerge(t *testing.T) {
	home := t.TempDir()
	c := lookup(t, "cursor")
	path := c.Path(home)
	os.MkdirAll(filepath.Dir(path), 0o700)
	broken := "{\n  \"mcpServers\": {\n"
	os.WriteFile(path, []byte(broken), 0o600)
	if _, err := Plan(c, home, server()); !errors.Is(err, ErrNotPlainJSON) || !strings.Contains(err.Error(), "osaurus-sandbox-alice") || !strings.Contains(err.Error(), path) {
		t.Fatalf("a file with a syntax error: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != broken {
		t.Fatal("the file was touched")
	}

	os.WriteFile(path, []byte(`{"mcpServers": {}}`), 0o600)
	ch, err := Plan(c, home, server())
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, []byte(`{"mcpServers": {"new": {"command": "x"}}}`), 0o600)
	if _, err := Apply(ch); !errors.Is(err, ErrChanged) {
		t.Fatalf("apply over a changed file: %v", err)
	}
	if v := read(t, path); v["mcpServers"].(map[string]any)["new"] == nil {
		t.Fatal("the newer file was overwritten")
	}

	real := filepath.Join(home, "dotfiles", "mcp.json")
	os.MkdirAll(filepath.Dir(real), 0o700)
	os.WriteFile(real, []byte(`{}`), 0o600)
	os.Remove(path)
	if err := os.Symlink(real, path); err != nil {
		t.Fatal(err)
	}
	ch, err = Plan(c, home, server())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ch); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(path); fi.Mode()&os.ModeSymlink == 0 || !Connected(c, home, "osaurus-sandbox-alice") {
		t.Fatal("the link was replaced or the target not written")
	}
	if _, err := Lookup("zed"); !errors.Is(err, ErrUnknownClient) || !strings.Contains(err.Error(), "claude-desktop") {
		t.Fatalf("unknown client: %v", err)
	}
	if s := Snippets(server()); !strings.Contains(s, `"OSAURUS_SANDBOX_HOME": "/data/sb"`) || !strings.Contains(s, "Bearer tok") {
		t.Fatalf("snippets:\n%s", s)
	}
}

// VS Code's mcp.json is JSONC: its comments and trailing commas stay
// through connect and disconnect; a BOM and "servers": null are fine; a
// servers value of the wrong kind is named.
func TestConnectEditsJSONC(t *testing.T) {
	c := lookup(t, "vscode")
	for _, tt := range []struct {
		name, file string
		keep       []string // in the file after connect
	}{
		{"comments and trailing commas", "{\n\t// my servers\n\t\"servers\": {\n\t\t\"github\": {\"type\": \"http\", \"url\": \"https://api.example/mcp\",}, // work\n\t},\n\t/* inputs */ \"inputs\": [],\n}\n",
			[]string{"// my servers", "// work", "/* inputs */", "github"}},
		{"BOM", "\xef\xbb\xbf{\"servers\": {}}", []string{"\xef\xbb\xbf{"}},
		{"null servers", `{"servers": null, "inputs": []}`, []string{"inputs"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
			path := c.Path(home)
			os.MkdirAll(filepath.Dir(path), 0o700)
			os.WriteFile(path, []byte(tt.file), 0o600)
			ch, err := Plan(c, home, server())
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(ch.Describe(), "<nil>") {
				t.Errorf("describe shows Go's nil:\n%s", ch.Describe())
			}
			if _, err := Apply(ch); err != nil {
				t.Fatal(err)
			}
			after, _ := os.ReadFile(path)
			for _, k := range tt.keep {
				if !strings.Contains(string(after), k) {
					t.Errorf("lost %q:\n%s", k, after)
				}
			}
			std, err := hujson.Standardize(bytes.TrimPrefix(after, []byte("\xef\xbb\xbf")))
			if err != nil {
				t.Fatalf("not JSONC any more: %v\n%s", err, after)
			}
			var v struct {
				Servers map[string]struct{ Command, Type string }
			}
			if err := json.Unmarshal(std, &v); err != nil || v.Servers["osaurus-sandbox-alice"].Command != "/opt/osaurus-sandbox" || v.Servers["osaurus-sandbox-alice"].Type != "stdio" {
				t.Fatalf("entry not added: %v\n%s", err, after)
			}
			if !Connected(c, home, "osaurus-sandbox-alice") {
				t.Error("Connected doesn't see the entry")
			}
			// Disconnect takes it out again, comments still kept.
			rm, err := PlanRemove(c, home, "osaurus-sandbox-alice")
			if err != nil || rm.Unchanged || !strings.Contains(rm.Describe(), "Removes osaurus-sandbox-alice from "+path) {
				t.Fatalf("plan remove: %v %s", err, rm.Describe())
			}
			if _, err := Apply(rm); err != nil {
				t.Fatal(err)
			}
			after, _ = os.ReadFile(path)
			for _, k := range tt.keep {
				if !strings.Contains(string(after), k) {
					t.Errorf("disconnect lost %q:\n%s", k, after)
				}
			}
			if Connected(c, home, "osaurus-sandbox-alice") || strings.Contains(string(after), "osaurus-sandbox-alice") {
				t.Errorf("the entry is still there:\n%s", after)
			}
			if again, err := PlanRemove(c, home, "osaurus-sandbox-alice"); err != nil || !again.Unchanged {
				t.Errorf("second remove: %v %+v", err, again)
			}
		})
	}
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	os.MkdirAll(filepath.Dir(c.Path(home)), 0o700)
	os.WriteFile(c.Path(home), []byte(`{"servers": "none"}`), 0o600)
	if _, err := Plan(c, home, server()); !errors.Is(err, ErrNotPlainJSON) || !strings.Contains(err.Error(), `"servers" holds a string, not an object of servers`) {
		t.Errorf("servers a string: %v", err)
	}
}

// Each connect keeps a backup, but no more than keepBackups of them.
func TestConnectPrunesBackups(t *testing.T) {
	home := t.TempDir()
	c := lookup(t, "claude-code")
	path := c.Path(home)
	for i := range 5 {
		os.WriteFile(path+".bak-2020010"+string(rune('1'+i))+"T000000Z", []byte("{}"), 0o600)
	}
	os.WriteFile(path, []byte(`{}`), 0o600)
	ch, err := Plan(c, home, server())
	if err != nil {
		t.Fatal(err)
	}
	backup, err := Apply(ch)
	if err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(path + ".bak-*")
	if len(left) != keepBackups || !slices.Contains(left, backup) {
		t.Fatalf("backups left: %v (the newest, %s, must stay)", left, backup)
	}
}

// A binary in a temporary or a clone's build folder is not one to name
// in a client config; an installed one is.
func TestTransientExecutable(t *testing.T) {
	clone := t.TempDir()
	os.WriteFile(filepath.Join(clone, "go.mod"), []byte("module x\n"), 0o600)
	for _, tt := range []struct{ exe, want string }{
		{filepath.Join(clone, "bin", "osaurus-sandbox"), "the build folder of a clone"},
		{filepath.Join(t.TempDir(), "osaurus-sandbox"), "a temporary folder"},
		{filepath.Join(os.TempDir(), "go-build123", "b001", "exe", "osaurus-sandbox"), "a temporary folder"},
		{"/home/u/.local/bin/osaurus-sandbox", ""},
		{"/usr/local/bin/osaurus-sandbox", ""},
	} {
		if got := transient(tt.exe); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.exe, got, tt.want)
		}
	}
}
