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
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver"
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
	e := map[string]any{"command": s.Exe, "args": []string{"mcp", "--agent", s.Agent.Slug}}
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
	// Unchanged: the file already has this very entry.
	Unchanged bool
}

// ErrNotPlainJSON: the file isn't a JSON object this package can merge
// into without losing anything (comments, a syntax error).
var ErrNotPlainJSON = agentproto.Class(agentproto.ErrUnsupported, "not a plain JSON object")

// Plan reads the client's config file under home and works out the
// change that adds (or replaces) s's entry.
func Plan(c Client, home string, s mcpserver.Client) (Change, error) {
	if !c.HasFile() {
		return Change{}, fmt.Errorf("%s has no config file of its own: copy the snippet into its settings", c.Name)
	}
	ch := Change{Client: c, Path: c.Path(home), Server: s.ServerName()}
	before, err := os.ReadFile(ch.Path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return Change{}, err
	default:
		ch.Before = before
	}
	top := []member{}
	if len(bytes.TrimSpace(ch.Before)) > 0 {
		if top, err = parseObject(ch.Before); err != nil {
			return Change{}, fmt.Errorf("%s: %w (%v); add the entry by hand:\n%s", ch.Path, ErrNotPlainJSON, err, mustJSON(map[string]any{c.key: map[string]any{ch.Server: c.Entry(s)}}))
		}
	}
	entry, err := json.Marshal(c.Entry(s))
	if err != nil {
		return Change{}, err
	}
	var servers []member
	at := find(top, c.key)
	if at >= 0 {
		if servers, err = parseObject(top[at].Value); err != nil {
			return Change{}, fmt.Errorf("%s: %q: %w (%v)", ch.Path, c.key, ErrNotPlainJSON, err)
		}
	}
	if i := find(servers, ch.Server); i >= 0 {
		ch.Replaces = servers[i].Value
		ch.Unchanged = jsonEqual(servers[i].Value, entry)
		servers[i].Value = entry
	} else {
		servers = append(servers, member{ch.Server, entry})
	}
	for _, m := range servers {
		if m.Key != ch.Server {
			ch.Kept = append(ch.Kept, m.Key)
		}
	}
	if at >= 0 {
		top[at].Value = encodeObject(servers)
	} else {
		top = append(top, member{c.key, encodeObject(servers)})
	}
	var out bytes.Buffer
	if err := json.Indent(&out, encodeObject(top), "", "  "); err != nil {
		return Change{}, err
	}
	out.WriteByte('\n')
	ch.After = out.Bytes()
	return ch, nil
}

// Describe is the change in words and the entry, for the confirmation.
func (ch Change) Describe() string {
	var b strings.Builder
	entry := map[string]json.RawMessage{ch.Server: nil}
	var after []member
	if top, err := parseObject(ch.After); err == nil {
		if i := find(top, ch.Client.key); i >= 0 {
			after, _ = parseObject(top[i].Value)
		}
	}
	if i := find(after, ch.Server); i >= 0 {
		entry[ch.Server] = after[i].Value
	}
	switch {
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
		var ind bytes.Buffer
		json.Indent(&ind, mustJSON(map[string]any{ch.Client.key: entry}), "", "  ")
		b.Write(ind.Bytes())
		b.WriteByte('\n')
	}
	if len(ch.Kept) > 0 {
		fmt.Fprintf(&b, "Kept as they are: %s.\n", strings.Join(ch.Kept, ", "))
	}
	if ch.Client.ID == "claude-desktop" || ch.Client.ID == "cursor" {
		fmt.Fprintf(&b, "Restart %s to load it.\n", ch.Client.Name)
	}
	return b.String()
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
	return backup, nil
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
	top, err := parseObject(data)
	if err != nil {
		return false
	}
	i := find(top, c.key)
	if i < 0 {
		return false
	}
	servers, err := parseObject(top[i].Value)
	return err == nil && find(servers, server) >= 0
}

// member is one key of a JSON object, its value kept verbatim so the
// file's other content and order survive a merge.
type member struct {
	Key   string
	Value json.RawMessage
}

func parseObject(data []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		if err == nil {
			err = fmt.Errorf("it starts with %v, not an object", t)
		}
		return nil, err
	}
	out := []member{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{t.(string), v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("there is more after the object")
	}
	return out, nil
}

func encodeObject(ms []member) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.Value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func find(ms []member, key string) int {
	for i, m := range ms {
		if m.Key == key {
			return i
		}
	}
	return -1
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
