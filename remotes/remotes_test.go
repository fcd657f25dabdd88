package remotes

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseURL: only ssh://[user@]host[:port]; nothing ssh would read as
// an option, no password.
func TestParseURL(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Target
		err  string
	}{
		{"ssh://box", Target{Host: "box"}, ""},
		{"ssh://me@box.lan:2222", Target{User: "me", Host: "box.lan", Port: 2222}, ""},
		{"ssh://me@[::1]:22", Target{User: "me", Host: "::1", Port: 22}, ""},
		{"ssh://-oProxyCommand=touch", Target{}, "the host is missing"},
		{"ssh://-oProxyCommand=sh@box", Target{}, "the user name"},
		{"ssh://me:pw@box", Target{}, "no password"},
		{"ssh://box:0", Target{}, "the port"},
		{"ssh://box:99999", Target{}, "the port"},
		{"ssh://box/path", Target{}, "no path"},
		{"tcp://box", Target{}, "only ssh://"},
		{"box", Target{}, "only ssh://"},
		{"ssh://", Target{}, "the host is missing"},
	} {
		got, err := ParseURL(tt.in)
		if tt.err == "" && (err != nil || got != tt.want) || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrInvalid)) {
			t.Errorf("%q: %+v, %v; want %+v, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// TestSSHArgv: the destination comes after --, and every argument the
// far side's shell reads is quoted.
func TestSSHArgv(t *testing.T) {
	c := Context{Name: "box", URL: "ssh://me@box:2222", DataDir: "/srv/o s/$(reboot)'x", SSHArgs: []string{"-F", "/tmp/cfg"}}
	got := c.DialArgv(false)
	want := []string{"ssh", "-F", "/tmp/cfg", "-T", "-x", "-a", "-p", "2222", "--", "me@box",
		`osaurus-sandbox --data-dir '/srv/o s/$(reboot)'\''x' dial-stdio --no-start`}
	if !slices.Equal(got, want) {
		t.Errorf("DialArgv:\n got %q\nwant %q", got, want)
	}
	if got := (Context{URL: "ssh://box"}).SSHArgv("mcp", "--agent", "a b"); got[len(got)-1] != "osaurus-sandbox mcp --agent 'a b'" {
		t.Errorf("SSHArgv: %q", got)
	}
	if got := (Context{URL: "ssh://box", Command: "/opt/o"}).ShellArgv("uname -sm"); !slices.Equal(got, []string{"ssh", "-T", "-x", "-a", "--", "box", "uname -sm"}) {
		t.Errorf("ShellArgv runs the far side's command: %q", got)
	}
	// -W names the far side's loopback, before -- and the destination,
	// and runs no command there.
	if got, want := c.ForwardArgv(41234), []string{"ssh", "-F", "/tmp/cfg", "-T", "-x", "-a", "-p", "2222", "-W", "127.0.0.1:41234", "--", "me@box"}; !slices.Equal(got, want) {
		t.Errorf("ForwardArgv:\n got %q\nwant %q", got, want)
	}
}

// TestStore: add, use, select (flag over environment over current),
// remove; the current context removed is the local one again.
func TestStore(t *testing.T) {
	s := Store{Path: filepath.Join(t.TempDir(), "config", "contexts.json")}
	sel := func(flag, env string) string {
		c, ok, err := s.Select(flag, env)
		if err != nil {
			return "error: " + err.Error()
		}
		if !ok {
			return Local
		}
		return c.Name
	}
	if got := sel("", ""); got != Local {
		t.Fatalf("no file: %s", got)
	}
	for _, c := range []Context{{Name: "a", URL: "ssh://a"}, {Name: "b", URL: "ssh://b", DataDir: "/srv/b"}} {
		if err := s.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		c   Context
		err error
	}{
		{Context{Name: "a", URL: "ssh://x"}, ErrExists},
		{Context{Name: "local", URL: "ssh://x"}, ErrInvalid},
		{Context{Name: "-x", URL: "ssh://x"}, ErrInvalid},
		{Context{Name: "c", URL: "ssh://x", DataDir: "rel"}, ErrInvalid},
	} {
		if err := s.Add(tt.c); !errors.Is(err, tt.err) {
			t.Errorf("Add %+v: %v, want %v", tt.c, err, tt.err)
		}
	}
	if err := s.Use("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Use nope: %v", err)
	}
	if err := s.Use("a"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ flag, env, want string }{
		{"", "", "a"},
		{"", "b", "b"},
		{"b", "local", "b"},
		{"local", "b", Local},
		{"", "nope", `error: no such context: "nope"; ` + "`osaurus-sandbox context list` shows them"},
	} {
		if got := sel(tt.flag, tt.env); got != tt.want {
			t.Errorf("--context %q, env %q: %s, want %s", tt.flag, tt.env, got, tt.want)
		}
	}
	if err := s.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if got := sel("", ""); got != Local {
		t.Errorf("after removing the current context: %s", got)
	}
}

// TestPlatform: uname -sm of the systems osaurus-sandbox is built for,
// in Go's names; anything else is not a match for any build.
func TestPlatform(t *testing.T) {
	for _, tt := range []struct {
		in, goos, goarch string
		ok               bool
	}{
		{"Linux x86_64", "linux", "amd64", true},
		{"Linux aarch64\n", "linux", "arm64", true},
		{"Darwin arm64", "darwin", "arm64", true},
		{"Darwin x86_64", "darwin", "amd64", true},
		{"FreeBSD amd64", "", "amd64", false},
		{"Linux armv7l", "linux", "", false},
		{"Linux", "", "", false},
		{"", "", "", false},
		{"Linux x86_64 extra", "", "", false},
	} {
		goos, goarch, ok := Platform(tt.in)
		if goos != tt.goos || goarch != tt.goarch || ok != tt.ok {
			t.Errorf("%q: %q %q %v, want %q %q %v", tt.in, goos, goarch, ok, tt.goos, tt.goarch, tt.ok)
		}
	}
}

// TestUpdate: a change is stored validated; an unknown context, a
// rename or an invalid value changes nothing.
func TestUpdate(t *testing.T) {
	s := Store{Path: filepath.Join(t.TempDir(), "contexts.json")}
	if err := s.Add(Context{Name: "box", URL: "ssh://box"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, ctx string
		fn        func(*Context)
		err       error
		command   string // box's command afterwards
	}{
		{"set the command", "box", func(c *Context) { c.Command = "/home/me/.local/bin/osaurus-sandbox" }, nil, "/home/me/.local/bin/osaurus-sandbox"},
		{"unknown context", "nope", func(c *Context) { c.Command = "x" }, ErrNotFound, "/home/me/.local/bin/osaurus-sandbox"},
		{"two lines", "box", func(c *Context) { c.Command = "a\nb" }, ErrInvalid, "/home/me/.local/bin/osaurus-sandbox"},
		{"a rename", "box", func(c *Context) { c.Name, c.Command = "other", "y" }, ErrInvalid, "/home/me/.local/bin/osaurus-sandbox"},
	} {
		_, err := s.Update(tt.ctx, tt.fn)
		got, gerr := s.Get("box")
		if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) || gerr != nil || got.Command != tt.command {
			t.Errorf("%s: %v; stored %+v %v", tt.name, err, got, gerr)
		}
	}
}
