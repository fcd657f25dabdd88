// Package remotes holds the named contexts of the command line: which
// sandbox a command drives, the local machine's (the default) or one on
// another machine reached with the user's own ssh, Docker-context style.
// A remote context runs `osaurus-sandbox dial-stdio` on the far side and
// speaks the control protocol over ssh's stdin and stdout; nothing but
// ssh is opened. The contexts live in the config folder (contexts.json),
// written atomically.
package remotes

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// Local is the name of the default context: this machine's sandbox.
const Local = "local"

// Env names the context every command uses unless --context is given.
const Env = "OSAURUS_SANDBOX_CONTEXT"

var (
	// ErrNotFound: no context has that name.
	ErrNotFound = errdefs.Class(errdefs.ErrNotFound, "no such context")
	// ErrExists: a context has that name already.
	ErrExists = errdefs.Class(errdefs.ErrExists, "a context with that name exists")
	// ErrInvalid: a context's name, address or data folder is not usable.
	ErrInvalid = errdefs.Class(errdefs.ErrInvalid, "invalid context")
)

// Context is one named sandbox on another machine.
type Context struct {
	Name string `json:"name"`
	// URL is ssh://[user@]host[:port].
	URL string `json:"url"`
	// DataDir is the far side's data folder ("": its default).
	DataDir string `json:"dataDir,omitempty"`
	// Command is the far side's osaurus-sandbox, as its shell reads it
	// ("": osaurus-sandbox on its PATH).
	Command string `json:"command,omitempty"`
	// SSHArgs go to ssh before the destination (e.g. -F FILE); the
	// user's ssh config applies anyway.
	SSHArgs []string `json:"sshArgs,omitempty"`
}

// File is contexts.json.
type File struct {
	// Current is the context `context use` chose ("" or Local: this
	// machine).
	Current  string    `json:"current,omitempty"`
	Contexts []Context `json:"contexts"`
}

var (
	nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	// Host names, IPv4 and bracket-less IPv6 (url.Hostname strips the
	// brackets); never a leading '-', which ssh would read as an option.
	hostRe = regexp.MustCompile(`^[A-Za-z0-9_:][A-Za-z0-9._:%-]*$`)
	userRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)
)

// Target is a parsed ssh:// address.
type Target struct {
	User, Host string
	Port       int // 0: ssh's default (or the user's ssh config)
}

// ParseURL reads ssh://[user@]host[:port].
func ParseURL(raw string) (Target, error) {
	bad := func(why string) (Target, error) {
		return Target{}, fmt.Errorf("%w: address %q: %s; write it as ssh://[user@]host[:port]", ErrInvalid, raw, why)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad(err.Error())
	}
	if u.Scheme != "ssh" {
		return bad("only ssh:// is supported")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return bad("no path, query or fragment")
	}
	var t Target
	if u.User != nil {
		if _, has := u.User.Password(); has {
			return bad("no password: ssh's own keys, agent and config authenticate")
		}
		t.User = u.User.Username()
		if !userRe.MatchString(t.User) {
			return bad("the user name may have letters, digits, '.', '_' and '-', not first")
		}
	}
	t.Host = u.Hostname()
	if !hostRe.MatchString(t.Host) {
		return bad("the host is missing or has characters a host name can't")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad("the port is 1 to 65535")
		}
		t.Port = n
	}
	return t, nil
}

// Validate checks a context before it is stored.
func (c Context) Validate() error {
	if !nameRe.MatchString(c.Name) || c.Name == Local {
		return fmt.Errorf("%w: name %q: letters, digits, '.', '_' and '-' (up to 63, not first), and not %q", ErrInvalid, c.Name, Local)
	}
	if _, err := ParseURL(c.URL); err != nil {
		return err
	}
	if c.DataDir != "" && (!filepath.IsAbs(c.DataDir) || strings.ContainsAny(c.DataDir, "\x00\n")) {
		return fmt.Errorf("%w: --data-dir %q: give the far side's folder as an absolute path", ErrInvalid, c.DataDir)
	}
	if strings.ContainsAny(c.Command, "\x00\n") {
		return fmt.Errorf("%w: --remote-command: one line", ErrInvalid)
	}
	return nil
}

// SSHArgv is the ssh command line that runs the far side's
// osaurus-sandbox with args (shell-quoted: ssh hands the far side one
// command line).
func (c Context) SSHArgv(args ...string) []string {
	return c.ShellArgv(c.RemoteCommand(args...))
}

// ShellArgv is the ssh command line that has the far side's shell run
// cmdline as it is (the caller quotes).
func (c Context) ShellArgv(cmdline string) []string {
	return append(c.sshArgv(), cmdline)
}

// ForwardArgv is the ssh command line whose stdin and stdout are one TCP
// connection to port on the far side's 127.0.0.1 (ssh -W), how a preview
// there is reached from this machine. The address is always the far
// side's loopback; port must be 1–65535 (the caller checks).
func (c Context) ForwardArgv(port int) []string {
	return c.sshArgv("-W", "127.0.0.1:"+strconv.Itoa(port))
}

// sshArgv is ssh with the context's arguments, opts and the destination.
func (c Context) sshArgv(opts ...string) []string {
	t, _ := ParseURL(c.URL) // validated when stored
	argv := append([]string{"ssh"}, c.SSHArgs...)
	// No tty, no forwarding of the agent's X or ports; batch mode is not
	// forced, so a passphrase prompt still reaches the user's terminal.
	argv = append(argv, "-T", "-x", "-a")
	if t.Port != 0 {
		argv = append(argv, "-p", strconv.Itoa(t.Port))
	}
	argv = append(argv, opts...)
	dest := t.Host
	if t.User != "" {
		dest = t.User + "@" + t.Host
	}
	// After --, the destination can't be read as an option.
	return append(argv, "--", dest)
}

// Platform reads `uname -sm` (e.g. "Linux x86_64") as Go names its
// GOOS and GOARCH; ok is false for a system or machine Go builds of
// osaurus-sandbox don't exist for.
func Platform(uname string) (goos, goarch string, ok bool) {
	f := strings.Fields(uname)
	if len(f) != 2 {
		return "", "", false
	}
	goos = map[string]string{"Linux": "linux", "Darwin": "darwin"}[f[0]]
	goarch = map[string]string{"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}[f[1]]
	return goos, goarch, goos != "" && goarch != ""
}

// RemoteCommand is the far side's command line for args.
func (c Context) RemoteCommand(args ...string) string {
	cmd := c.Command
	if cmd == "" {
		cmd = "osaurus-sandbox"
	}
	parts := []string{cmd}
	if c.DataDir != "" {
		parts = append(parts, "--data-dir", ShellQuote(c.DataDir))
	}
	for _, a := range args {
		parts = append(parts, ShellQuote(a))
	}
	return strings.Join(parts, " ")
}

// FarCommand is the line a user types here to run args on the far
// machine themselves ("ssh -p 2222 me@box osaurus-sandbox agent
// repair"): for what can't go through the context's owner.
func (c Context) FarCommand(args ...string) string {
	t, _ := ParseURL(c.URL)
	dest := t.Host
	if t.User != "" {
		dest = t.User + "@" + dest
	}
	if t.Port != 0 {
		dest = "-p " + strconv.Itoa(t.Port) + " " + dest
	}
	return "ssh " + dest + " " + c.RemoteCommand(args...)
}

// DialArgv is the command line of the stream to the far side's owner
// (client.CommandDialer's Argv).
func (c Context) DialArgv(spawn bool) []string {
	if spawn {
		return c.SSHArgv("dial-stdio")
	}
	return c.SSHArgv("dial-stdio", "--no-start")
}

// Dialer reaches the far side's owner through the user's ssh.
func (c Context) Dialer() client.Dialer {
	return client.CommandDialer{Argv: c.DialArgv, Name: c.URL}
}

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Store is contexts.json in the config folder.
type Store struct{ Path string }

// Load reads the file; a missing file is no contexts.
func (s Store) Load() (File, error) {
	var f File
	b, err := os.ReadFile(s.Path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%s is damaged (%v): fix it, or delete it to start over with only the local context", s.Path, err)
	}
	return f, nil
}

func (s Store) save(f File) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(s.Path, append(b, '\n'), 0o600)
}

// Get returns the named context.
func (s Store) Get(name string) (Context, error) {
	f, err := s.Load()
	if err != nil {
		return Context{}, err
	}
	i, err := f.index(name)
	if err != nil {
		return Context{}, err
	}
	return f.Contexts[i], nil
}

// index is where the named context is in f.
func (f File) index(name string) (int, error) {
	i := slices.IndexFunc(f.Contexts, func(c Context) bool { return c.Name == name })
	if i < 0 {
		return -1, fmt.Errorf("%w: %q; `osaurus-sandbox context list` shows them", ErrNotFound, name)
	}
	return i, nil
}

// Add stores a new context.
func (s Store) Add(c Context) error {
	if err := c.Validate(); err != nil {
		return err
	}
	f, err := s.Load()
	if err != nil {
		return err
	}
	if slices.ContainsFunc(f.Contexts, func(o Context) bool { return o.Name == c.Name }) {
		return fmt.Errorf("%w: %q; remove it first", ErrExists, c.Name)
	}
	f.Contexts = append(f.Contexts, c)
	return s.save(f)
}

// Update changes the named context with fn and stores it, validated as
// Add validates a new one.
func (s Store) Update(name string, fn func(*Context)) (Context, error) {
	f, err := s.Load()
	if err != nil {
		return Context{}, err
	}
	i, err := f.index(name)
	if err != nil {
		return Context{}, err
	}
	c := f.Contexts[i]
	fn(&c)
	if c.Name != name {
		return Context{}, fmt.Errorf("%w: a context's name can't change (%q to %q)", ErrInvalid, name, c.Name)
	}
	if err := c.Validate(); err != nil {
		return Context{}, err
	}
	f.Contexts[i] = c
	return c, s.save(f)
}

// Remove deletes a context; when it was the current one, the local
// machine becomes current.
func (s Store) Remove(name string) error {
	f, err := s.Load()
	if err != nil {
		return err
	}
	i, err := f.index(name)
	if err != nil {
		return err
	}
	f.Contexts = slices.Delete(f.Contexts, i, i+1)
	if f.Current == name {
		f.Current = ""
	}
	return s.save(f)
}

// Use makes name the current context (Local: this machine).
func (s Store) Use(name string) error {
	f, err := s.Load()
	if err != nil {
		return err
	}
	if name != Local {
		if _, err := f.index(name); err != nil {
			return err
		}
	}
	if name == Local {
		name = ""
	}
	f.Current = name
	return s.save(f)
}

// Select is the context a command uses: --context, else
// OSAURUS_SANDBOX_CONTEXT, else the current one. Local is the zero
// Context with ok false.
func (s Store) Select(flag, env string) (c Context, ok bool, err error) {
	name := flag
	if name == "" {
		name = env
	}
	if name == "" {
		f, err := s.Load()
		if err != nil {
			return Context{}, false, err
		}
		name = f.Current
	}
	if name == "" || name == Local {
		return Context{}, false, nil
	}
	c, err = s.Get(name)
	return c, err == nil, err
}
