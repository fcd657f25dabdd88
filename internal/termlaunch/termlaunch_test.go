package termlaunch

import (
	"errors"
	"os/exec"
	"slices"
	"testing"
)

func TestArgv(t *testing.T) {
	shell := []string{"/Applications/Osaurus Sandbox.app/Contents/MacOS/osaurus-sandbox", "shell", "alice"}
	linux := []string{"env", "OSAURUS_SANDBOX_HOME=/home/u/data", "/usr/bin/osaurus-sandbox", "shell", "bob"}
	tests := []struct {
		name      string
		goos      string
		installed []string
		terminal  string
		cmd       []string
		want      []string
		err       error
	}{
		{name: "macOS Terminal, quoted for sh and AppleScript", goos: "darwin", cmd: shell, want: []string{"osascript",
			"-e", `tell application "Terminal" to do script "'/Applications/Osaurus Sandbox.app/Contents/MacOS/osaurus-sandbox' shell alice"`,
			"-e", `tell application "Terminal" to activate`}},
		{name: "macOS: a quote in a word", goos: "darwin", cmd: []string{"x", `a"b'c`}, want: []string{"osascript",
			"-e", `tell application "Terminal" to do script "x 'a\"b'\\''c'"`,
			"-e", `tell application "Terminal" to activate`}},
		{name: "the desktop's default", goos: "linux", installed: []string{"x-terminal-emulator", "xterm"}, cmd: linux,
			want: append([]string{"/usr/bin/x-terminal-emulator", "-e"}, linux...)},
		{name: "$TERMINAL first", goos: "linux", installed: []string{"x-terminal-emulator", "kitty"}, terminal: "kitty", cmd: linux,
			want: append([]string{"/usr/bin/kitty", "-e"}, linux...)},
		{name: "$TERMINAL not installed", goos: "linux", installed: []string{"gnome-terminal"}, terminal: "nope", cmd: linux,
			want: append([]string{"/usr/bin/gnome-terminal", "--"}, linux...)},
		{name: "gnome-terminal takes --", goos: "linux", installed: []string{"gnome-terminal", "xterm"}, cmd: linux,
			want: append([]string{"/usr/bin/gnome-terminal", "--"}, linux...)},
		{name: "kitty takes the command as is", goos: "linux", installed: []string{"kitty"}, cmd: linux,
			want: append([]string{"/usr/bin/kitty"}, linux...)},
		{name: "none", goos: "linux", cmd: linux, err: ErrNoTerminal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := Env{GOOS: tc.goos,
				LookPath: func(p string) (string, error) {
					if slices.Contains(tc.installed, p) {
						return "/usr/bin/" + p, nil
					}
					return "", exec.ErrNotFound
				},
				Getenv: func(k string) string {
					if k == "TERMINAL" {
						return tc.terminal
					}
					return ""
				}}
			got, err := e.Argv(tc.cmd)
			if !errors.Is(err, tc.err) || !slices.Equal(got, tc.want) {
				t.Fatalf("Argv = %q, %v\nwant %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}
