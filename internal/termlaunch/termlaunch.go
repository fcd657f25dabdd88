// Package termlaunch opens the user's own terminal application running a
// command: the window's "Open Terminal" buttons run `osaurus-sandbox
// shell …` in it, as OrbStack and Docker Desktop do.
package termlaunch

import (
	"errors"
	"os"
	"os/exec"
	"strings"

	"github.com/osaurus/osaurus-sandbox/errdefs"
)

// Env is what Argv looks at: the OS, which programs are installed and the
// environment. Tests fill it in; Launch uses the real ones.
type Env struct {
	GOOS     string
	LookPath func(string) (string, error)
	Getenv   func(string) string
}

// linuxTerminals are tried in order after $TERMINAL, each with the flag
// that makes it run a command (the words after it).
var linuxTerminals = []struct{ prog, flag string }{
	{"x-terminal-emulator", "-e"}, // Debian's alternatives: the desktop's default
	{"gnome-terminal", "--"},
	{"konsole", "-e"},
	{"xfce4-terminal", "-x"},
	{"kitty", ""},
	{"alacritty", "-e"},
	{"foot", ""},
	{"xterm", "-e"},
}

// ErrNoTerminal: no terminal application was found.
var ErrNoTerminal = errdefs.Class(errdefs.ErrUnsupported, "no terminal application found: set $TERMINAL to one (e.g. gnome-terminal), or install x-terminal-emulator, gnome-terminal, konsole, xfce4-terminal, kitty, alacritty, foot or xterm")

// Argv is the command that opens a terminal window running cmd (a
// program and its arguments).
func (e Env) Argv(cmd []string) ([]string, error) {
	if len(cmd) == 0 {
		return nil, errors.New("termlaunch: empty command")
	}
	if e.GOOS == "darwin" {
		// Terminal.app runs a line of shell in a new window; the line is
		// quoted for sh, then for AppleScript's string.
		line := ShellLine(cmd)
		as := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(line)
		return []string{"osascript",
			"-e", `tell application "Terminal" to do script "` + as + `"`,
			"-e", `tell application "Terminal" to activate`}, nil
	}
	if t := strings.TrimSpace(e.Getenv("TERMINAL")); t != "" {
		if p, err := e.LookPath(t); err == nil {
			return append([]string{p, "-e"}, cmd...), nil
		}
	}
	for _, t := range linuxTerminals {
		p, err := e.LookPath(t.prog)
		if err != nil {
			continue
		}
		argv := []string{p}
		if t.flag != "" {
			argv = append(argv, t.flag)
		}
		return append(argv, cmd...), nil
	}
	return nil, ErrNoTerminal
}

// ShellLine quotes words for sh.
func ShellLine(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@+,") == "" {
			q[i] = w
			continue
		}
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// Launch opens a terminal window running cmd and returns once it started.
func Launch(goos string, cmd []string) error {
	argv, err := Env{GOOS: goos, LookPath: exec.LookPath, Getenv: os.Getenv}.Argv(cmd)
	if err != nil {
		return err
	}
	c := exec.Command(argv[0], argv[1:]...)
	if err := c.Start(); err != nil {
		return err
	}
	go c.Wait() // reap it; the terminal lives on its own
	return nil
}
