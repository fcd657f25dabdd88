// Package connect adds an agent's MCP server to the config file of a
// common MCP client (Claude Desktop, Claude Code, Cursor, VS Code), as the
// window's Connect button and `agent connect` do: the change is shown
// first, the file's other servers and settings are kept as they are, the
// old file is backed up and the new one written atomically.
package connect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver"
	"github.com/tailscale/hujson"
)

// Client is an MCP client whose config file this package can edit.
type Client struct {
	ID   string // claude-desktop, claude-code, cursor, vscode, generic
	Name string // as its maker writes it
	// key is the top-level object holding the servers: "mcpServers", or
	// "servers" for VS Code; "" for the generic snippet (no file).
	key string
	// typed: the entry names its transport ("type": "stdio").
	typed bool
	// path is the config file under home, for goos.
	path func(home, goos string) string
}

// Clients are the clients Connect knows, in the order the window shows
// them. Their config locations are the documented user-level ones.
var Clients = []Client{
	{ID: "claude-desktop", Name: "Claude Desktop", key: "mcpServers", path: func(home, goos string) string {
		if goos == "darwin" {
			return filepath.Join(home, "Library", "Application Support", "Claude", "claude_desktop_config.json")
		}
		return filepath.Join(configHome(home), "Claude", "claude_desktop_config.json")
	}},
	{ID: "claude-code", Name: "Claude Code", key: "mcpServers", typed: true, path: func(home, _ string) string {
		return filepath.Join(home, ".claude.json") // user scope
	}},
	{ID: "cursor", Name: "Cursor", key: "mcpServers", path: func(home, _ string) string {
		return filepath.Join(home, ".cursor", "mcp.json")
	}},
	{ID: "vscode", Name: "VS Code", key: "servers", typed: true, path: func(home, goos string) string {
		if goos == "darwin" {
			return filepath.Join(home, "Library", "Application Support", "Code", "User", "mcp.json")
		}
		return filepath.Join(configHome(home), "Code", "User", "mcp.json")
	}},
	{ID: "generic", Name: "Another client (stdio or HTTP)"},
}

// ErrUnknownClient: no client has that id.
var ErrUnknownClient = agentproto.Class(agentproto.ErrInvalid, "unknown MCP client")

// Lookup finds a client by id.
func Lookup(id string) (Client, error) {
	var ids []string
	for _, c := range Clients {
		if c.ID == id {
			return c, nil
		}
		ids = append(ids, c.ID)
	}
	return Client{}, fmt.Errorf("%w %q: use one of %s", ErrUnknownClient, id, strings.Join(ids, ", "))
}

// HasFile reports whether the client keeps its servers in a file (the
// generic one only shows snippets).
func (c Client) HasFile() bool { return c.key != "" }

// Path is the client's config file for the user whose home is home.
func (c Client) Path(home string) string {
	if !c.HasFile() {
		return ""
	}
	return c.path(home, runtime.GOOS)
}

func configHome(home string) string {
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return x
	}
	return filepath.Join(home, ".config")
}

// Entry is the server entry for s in this client's format: the stdio
// server, with the env block that names the data folder.
func (c Client) Entry(s mcpserver.Client) map[string]any {
	e := map[string]any{"command": s.Exe, "args": s.Args()}
	if c.typed {
		e["type"] = "stdio"
	}
	if len(s.Env) > 0 {
		e["env"] = s.Env
	}
	return e
}

// Snippets is the generic client's text: the stdio entry and the HTTP
// endpoint with its header.
func Snippets(s mcpserver.Client) string {
	stdio, _ := json.MarshalIndent(map[string]any{"mcpServers": map[string]any{s.ServerName(): Client{}.Entry(s)}}, "", "  ")
	if s.Context != "" {
		// The owner's HTTP server listens on the far side's loopback,
		// and its token is the far side's: only stdio reaches it from here.
		return "Over stdio (the client starts the server, which reaches context " + s.Context + " over ssh):\n" + string(stdio) +
			"\n\nOver HTTP: the far side's owner listens on that machine's loopback only; use stdio (or an ssh -L tunnel with the token from `ssh ... osaurus-sandbox agent show`)."
	}
	http, _ := json.MarshalIndent(map[string]any{"mcpServers": map[string]any{s.ServerName(): map[string]any{
		"type": "http", "url": s.URL(), "headers": map[string]string{"Authorization": "Bearer " + s.Token}}}}, "", "  ")
	return "Over stdio (the client starts the server):\n" + string(stdio) +
		"\n\nOver HTTP (the app or `osaurus-sandbox serve` must be running; the token is the agent's password):\n" + string(http)
}

// Change is an edit of one client's config file, to show before it is
// applied.
type Change struct {
	Client Client
	Path   string
	Server string // the entry's name
	// Before is the file as read (nil when it doesn't exist); After is
	// what Apply writes.
	Before, After []byte
	// Replaces is the entry of the same name the file had, or nil.
	Replaces json.RawMessage
	// Kept names the file's other servers, which stay as they are.
	Kept []string
	// Unchanged: the file already has this very entry (or, for a
	// removal, has none).
	Unchanged bool
	// Remove: the change takes the entry out (PlanRemove).
	Remove bool
	// entry is the new entry, as standard JSON.
	entry json.RawMessage
}

// ErrNotPlainJSON: the file isn't a JSON object (with or without
// comments) this package can edit without losing anything: a syntax
// error, or a top level that isn't an object.
var ErrNotPlainJSON = agentproto.Class(agentproto.ErrUnsupported, "not a JSON object")

// bom is the UTF-8 byte order mark some editors write first; it is kept.
var bom = []byte("\xef\xbb\xbf")

// config is a client's config file parsed as HuJSON (JSON with comments
// and trailing commas, VS Code's JSONC), so an edit keeps its comments.
type config struct {
	root hujson.Value
	bom  bool
	// standard: the file was plain JSON; it stays plain JSON, indented as
	// the clients write it.
	standard bool
}

func parseConfig(path string, data []byte) (*config, error) {
	cf := &config{}
	data, cf.bom = bytes.CutPrefix(data, bom)
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	v, err := hujson.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrNotPlainJSON, err)
	}
	if _, ok := v.Value.(*hujson.Object); !ok {
		return nil, fmt.Errorf("%s: %w: the file holds %s", path, ErrNotPlainJSON, kindName(v.Value))
	}
	cf.root, cf.standard = v, v.IsStandard()
	return cf, nil
}

// servers is the object holding the servers under key, nil when the file
// has none (or has null there).
func (cf *config) servers(path, key string) (*hujson.Object, error) {
	m := member(cf.root.Value.(*hujson.Object), key)
	if m == nil {
		return nil, nil
	}
	switch v := m.Value.(type) {
	case *hujson.Object:
		return v, nil
	case hujson.Literal:
		if v.Kind() == 'n' {
			return nil, nil
		}
	}
	return nil, fmt.Errorf("%s: %w: %q holds %s, not an object of servers; fix it by hand (an empty object {} will do)", path, ErrNotPlainJSON, key, kindName(m.Value))
}

// patch applies JSON Patch operations and returns the file's new bytes:
// plain JSON indented by two spaces when it was plain JSON, else the
// HuJSON formatted with its comments.
func (cf *config) patch(ops ...map[string]any) ([]byte, error) {
	p, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	if err := cf.root.Patch(p); err != nil {
		return nil, err
	}
	var out []byte
	if cf.standard {
		var b bytes.Buffer
		if err := json.Indent(&b, cf.root.Pack(), "", "  "); err != nil {
			return nil, err
		}
		b.WriteByte('\n')
		out = b.Bytes()
	} else {
		cf.root.Format()
		out = cf.root.Pack()
	}
	if cf.bom {
		out = append(append([]byte{}, bom...), out...)
	}
	return out, nil
}

func member(obj *hujson.Object, name string) *hujson.Value {
	for i := range obj.Members {
		if n, ok := obj.Members[i].Name.Value.(hujson.Literal); ok && n.String() == name {
			return &obj.Members[i].Value
		}
	}
	return nil
}

func names(obj *hujson.Object) []string {
	var out []string
	if obj != nil {
		for _, m := range obj.Members {
			if n, ok := m.Name.Value.(hujson.Literal); ok {
				out = append(out, n.String())
			}
		}
	}
	return out
}

// standardJSON is v without comments or trailing commas.
func standardJSON(v hujson.Value) json.RawMessage {
	c := v.Clone()
	c.Minimize()
	return c.Pack()
}

func kindName(v hujson.ValueTrimmed) string {
	switch v.Kind() {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 'n':
		return "null"
	case '"':
		return "a string"
	case 't', 'f':
		return "true or false"
	}
	return "a number"
}

// pointer is the JSON Pointer of keys.
func pointer(keys ...string) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(k))
	}
	return b.String()
}

func readConfig(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// Plan reads the client's config file under home and works out the
// change that adds (or replaces) s's entry. A file with comments and
// trailing commas (VS Code's mcp.json is JSONC) keeps them.
func Plan(c Client, home string, s mcpserver.Client) (Change, error) {
	if !c.HasFile() {
		return Change{}, fmt.Errorf("%s has no config file of its own: copy the snippet into its settings", c.Name)
	}
	ch := Change{Client: c, Path: c.Path(home), Server: s.ServerName()}
	var err error
	if ch.Before, err = readConfig(ch.Path); err != nil {
		return Change{}, err
	}
	if ch.entry, err = json.Marshal(c.Entry(s)); err != nil {
		return Change{}, err
	}
	byHand := func(err error) error {
		return fmt.Errorf("%w; fix the file, or add the entry by hand:\n%s", err, mustJSON(map[string]any{c.key: map[string]json.RawMessage{ch.Server: ch.entry}}))
	}
	cf, err := parseConfig(ch.Path, ch.Before)
	if err != nil {
		return Change{}, byHand(err)
	}
	servers, err := cf.servers(ch.Path, c.key)
	if err != nil {
		return Change{}, byHand(err)
	}
	// No servers yet (or null): the object with the one entry.
	op := map[string]any{"op": "add", "path": pointer(c.key), "value": map[string]json.RawMessage{ch.Server: ch.entry}}
	if servers != nil {
		if old := member(servers, ch.Server); old != nil {
			ch.Replaces = standardJSON(*old)
			ch.Unchanged = jsonEqual(ch.Replaces, ch.entry)
		}
		op = map[string]any{"op": "add", "path": pointer(c.key, ch.Server), "value": ch.entry}
	}
	for _, n := range names(servers) {
		if n != ch.Server {
			ch.Kept = append(ch.Kept, n)
		}
	}
	if ch.Unchanged {
		ch.After = ch.Before
		return ch, nil
	}
	if ch.After, err = cf.patch(op); err != nil {
		return Change{}, byHand(fmt.Errorf("%s: %w", ch.Path, err))
	}
	return ch, nil
}

// PlanRemove works out the change that takes the entry named server out
// of the client's config file; Unchanged when the file has none.
func PlanRemove(c Client, home, server string) (Change, error) {
	if !c.HasFile() {
		return Change{}, fmt.Errorf("%s has no config file of its own: remove %s from its settings by hand", c.Name, server)
	}
	ch := Change{Client: c, Path: c.Path(home), Server: server, Remove: true, Unchanged: true}
	var err error
	if ch.Before, err = readConfig(ch.Path); err != nil || ch.Before == nil {
		return ch, err
	}
	cf, err := parseConfig(ch.Path, ch.Before)
	if err != nil {
		return Change{}, fmt.Errorf("%w; fix the file, or remove %s from it by hand", err, server)
	}
	servers, err := cf.servers(ch.Path, c.key)
	if err != nil || servers == nil {
		return ch, err
	}
	old := member(servers, server)
	if old == nil {
		return ch, nil
	}
	ch.Replaces, ch.Unchanged = standardJSON(*old), false
	for _, n := range names(servers) {
		if n != server {
			ch.Kept = append(ch.Kept, n)
		}
	}
	if ch.After, err = cf.patch(map[string]any{"op": "remove", "path": pointer(c.key, server)}); err != nil {
		return Change{}, fmt.Errorf("%s: %w", ch.Path, err)
	}
	return ch, nil
}

// Describe is the change in words and the entry, for the confirmation.
func (ch Change) Describe() string {
	var b strings.Builder
	switch {
	case ch.Remove && ch.Unchanged:
		fmt.Fprintf(&b, "%s has no %s; nothing to change.\n", ch.Path, ch.Server)
	case ch.Remove:
		fmt.Fprintf(&b, "Removes %s from %s (a backup of the file is kept):\n", ch.Server, ch.Path)
	case ch.Unchanged:
		fmt.Fprintf(&b, "%s already has %s; nothing to change.\n", ch.Path, ch.Server)
	case ch.Before == nil:
		fmt.Fprintf(&b, "Creates %s with %s:\n", ch.Path, ch.Server)
	case ch.Replaces != nil:
		fmt.Fprintf(&b, "Replaces %s in %s (a backup of the file is kept) with:\n", ch.Server, ch.Path)
	default:
		fmt.Fprintf(&b, "Adds %s to %s (a backup of the file is kept):\n", ch.Server, ch.Path)
	}
	if !ch.Unchanged {
		entry := ch.entry
		if ch.Remove {
			entry = ch.Replaces
		}
		var ind bytes.Buffer
		json.Indent(&ind, mustJSON(map[string]any{ch.Client.key: map[string]json.RawMessage{ch.Server: entry}}), "", "  ")
		b.Write(ind.Bytes())
		b.WriteByte('\n')
	}
	if len(ch.Kept) > 0 {
		fmt.Fprintf(&b, "Kept as they are: %s.\n", strings.Join(ch.Kept, ", "))
	}
	if !ch.Unchanged {
		b.WriteString(ch.Client.Reload() + "\n")
	}
	return b.String()
}

// Reload says what makes the client load a changed config file.
func (c Client) Reload() string {
	switch c.ID {
	case "claude-code":
		return "Start a new Claude Code session (claude) to load it."
	case "vscode":
		return "VS Code loads it by itself; if it doesn't, run \"MCP: List Servers\" from its command palette."
	case "":
		return ""
	}
	return fmt.Sprintf("Restart %s to load it.", c.Name)
}

// ErrChanged: the file changed between Plan and Apply.
var ErrChanged = agentproto.Class(agentproto.ErrBusy, "the file changed since the change was shown")

// Apply writes the change: the old file is copied beside it first
// (NAME.bak-TIME, returned), then the new one replaces it atomically with
// the old one's permissions. A file that changed since Plan is left alone.
func Apply(ch Change) (backup string, err error) {
	if ch.Unchanged {
		return "", nil
	}
	path := ch.Path
	// A config file linked from elsewhere (a dotfiles folder) is written
	// where it lives; the link stays.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	now, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if !bytes.Equal(now, ch.Before) || (err == nil) != (ch.Before != nil) {
		return "", fmt.Errorf("%s: %w; review it again", ch.Path, ErrChanged)
	}
	perm := os.FileMode(0o600)
	if ch.Before != nil {
		if st, err := os.Stat(path); err == nil {
			perm = st.Mode().Perm()
		}
		backup = path + ".bak-" + time.Now().UTC().Format("20060102T150405Z")
		if err := atomicfile.WriteFile(backup, ch.Before, perm); err != nil {
			return "", fmt.Errorf("backing up %s: %w", ch.Path, err)
		}
	} else if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	if err := atomicfile.WriteFile(path, ch.After, perm); err != nil {
		return backup, err
	}
	pruneBackups(path)
	return backup, nil
}

// keepBackups is how many of its backups Apply keeps beside a file: each
// connect makes one, and a config file edited often (Claude Code's)
// would gather them without end.
const keepBackups = 3

// pruneBackups deletes all but the newest keepBackups of the backups
// Apply made of path (their names sort by time).
func pruneBackups(path string) {
	olds, _ := filepath.Glob(globEscape(path) + ".bak-????????T??????Z")
	sort.Strings(olds)
	for len(olds) > keepBackups {
		os.Remove(olds[0])
		olds = olds[1:]
	}
}

// globEscape quotes the glob metacharacters of a literal path.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`).Replace(s)
}

// Connected reports whether the client's config file has an entry named
// server.
func Connected(c Client, home, server string) bool {
	if !c.HasFile() {
		return false
	}
	data, err := os.ReadFile(c.Path(home))
	if err != nil {
		return false
	}
	cf, err := parseConfig("", data)
	if err != nil {
		return false
	}
	servers, err := cf.servers("", c.key)
	return err == nil && servers != nil && member(servers, server) != nil
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Executable is the osaurus-sandbox binary a client config should name,
// and a warning when that is a poor choice. A config names a path, so a
// binary in a temporary folder (`go run`, a test) or in a clone's build
// folder (bin/ beside go.mod) breaks the client when the folder is
// cleaned or moved: the installed one on PATH is named instead, and
// without one the user is told to install.
func Executable() (exe, warning string) {
	self, err := os.Executable()
	if err != nil {
		return "osaurus-sandbox", ""
	}
	if r, err := filepath.EvalSymlinks(self); err == nil {
		self = r
	}
	where := transient(self)
	if where == "" {
		return self, ""
	}
	if p, err := exec.LookPath("osaurus-sandbox"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if a, err := os.Stat(p); err == nil {
			if b, err := os.Stat(self); err != nil || !os.SameFile(a, b) {
				return p, fmt.Sprintf("this osaurus-sandbox runs from %s (%s); the config names the installed %s instead", self, where, p)
			}
		}
	}
	return self, fmt.Sprintf("this osaurus-sandbox runs from %s (%s): the client stops working when that folder is cleaned or moved; run `make install` (it puts osaurus-sandbox in ~/.local/bin) and connect again from there", self, where)
}

// transient says why exe's folder is not a place to name in a config
// ("a temporary folder", "a build folder of a clone"), or "".
func transient(exe string) string {
	dir := filepath.Dir(exe)
	if filepath.Base(dir) == "bin" {
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "go.mod")); err == nil {
			return "the build folder of a clone"
		}
	}
	for _, tmp := range []string{os.TempDir(), "/tmp", "/var/tmp"} {
		if r, err := filepath.EvalSymlinks(tmp); err == nil {
			tmp = r
		}
		if rel, err := filepath.Rel(tmp, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "a temporary folder"
		}
	}
	if strings.Contains(dir, string(filepath.Separator)+"go-build") {
		return "a temporary folder of `go run`"
	}
	return ""
}
