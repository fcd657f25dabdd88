package hostcli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGlobalFlags: --context and --data-dir are taken only before the
// command, so a command's own arguments (exec's) are never read as them.
func TestGlobalFlags(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		ctx, dir string
		rest     []string
		err      bool
	}{
		{[]string{"status"}, "", "", []string{"status"}, false},
		{[]string{"--context", "box", "status", "--json"}, "box", "", []string{"status", "--json"}, false},
		{[]string{"--context=box", "--data-dir=/d", "mcp"}, "box", "/d", []string{"mcp"}, false},
		{[]string{"--data-dir", "/d", "--context", "b", "exec", "--", "x", "--context", "c"}, "b", "/d", []string{"exec", "--", "x", "--context", "c"}, false},
		{[]string{"exec", "--context", "box"}, "", "", []string{"exec", "--context", "box"}, false},
		{[]string{"--context"}, "", "", nil, true},
		{[]string{"--context="}, "", "", nil, true},
	} {
		ctx, dir, rest, err := globalFlags(tt.args)
		if (err != nil) != tt.err || ctx != tt.ctx || dir != tt.dir || !slices.Equal(rest, tt.rest) {
			t.Errorf("%q: %q %q %q %v", tt.args, ctx, dir, rest, err)
		}
	}
}

// installScript, run by a real sh as the far side's shell would: the full
// binary is installed executable in place of the old one (a new file:
// a running copy keeps its own); a short stream installs nothing and
// leaves no temporary file; the default folder is ~/.local/bin of the
// far side's HOME; a folder with shell syntax in its name is only a name.
func TestInstallScript(t *testing.T) {
	bin := bytes.Repeat([]byte("osaurus\x00"), 4096)
	home := t.TempDir()
	odd := filepath.Join(t.TempDir(), "my bin $(touch pwned)'")
	for _, tt := range []struct {
		name string
		dir  string // "" the default
		in   []byte
		ok   bool
		path string // the installed file
	}{
		{"default folder", "", bin, true, filepath.Join(home, ".local", "bin", "osaurus-sandbox")},
		{"again, over the first", "", bin, true, filepath.Join(home, ".local", "bin", "osaurus-sandbox")},
		{"cut short", "", bin[:len(bin)-1], false, filepath.Join(home, ".local", "bin", "osaurus-sandbox")},
		{"nothing arrived", odd, nil, false, filepath.Join(odd, "osaurus-sandbox")},
		{"a folder named with shell syntax", odd, bin, true, filepath.Join(odd, "osaurus-sandbox")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old, _ := os.Open(tt.path) // the running copy, when there is one
			if old != nil {
				defer old.Close()
			}
			before, _ := os.ReadFile(tt.path)
			cmd := exec.Command("sh", "-c", installScript(tt.dir, int64(len(bin))))
			cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
			cmd.Dir = t.TempDir()
			cmd.Stdin = bytes.NewReader(tt.in)
			var errb bytes.Buffer
			cmd.Stderr = &errb
			out, err := cmd.Output()
			got, _ := os.ReadFile(tt.path)
			tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(tt.path), ".osaurus-sandbox.*"))
			if (err == nil) != tt.ok || len(tmps) != 0 {
				t.Fatalf("exit %v, temporaries %q, stderr %s", err, tmps, errb.String())
			}
			if _, err := os.Stat(filepath.Join(cmd.Dir, "pwned")); err == nil {
				t.Fatal("the folder's name ran as a command")
			}
			if !tt.ok {
				if !bytes.Equal(got, before) || !strings.Contains(errb.String(), fmt.Sprintf("of %d bytes", len(bin))) {
					t.Fatalf("a failed copy changed the file (%d bytes, was %d) or didn't say why: %s", len(got), len(before), errb.String())
				}
				return
			}
			st, _ := os.Stat(tt.path)
			if strings.TrimSpace(string(out)) != tt.path || !bytes.Equal(got, bin) || st.Mode().Perm() != 0o755 {
				t.Fatalf("printed %q, %d bytes, mode %v", out, len(got), st.Mode())
			}
			if old != nil {
				if ost, _ := old.Stat(); os.SameFile(ost, st) {
					t.Fatal("the old file was written over, not replaced")
				}
			}
		})
	}
}

// context check says what to do for each way the far side's binary can
// be missing; ssh is a stand-in answering as ssh and the far side would.
func TestContextCheckFailures(t *testing.T) {
	t.Setenv("OSAURUS_SANDBOX_HOME", t.TempDir())
	bin := t.TempDir()
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	os.WriteFile(filepath.Join(bin, "ssh"), []byte("#!/bin/sh\nexit 255\n"), 0o755)
	if _, errOut, code := run(t, "context", "add", "box", "ssh://me@box"); code != 3 {
		t.Fatalf("context add with no ssh answering: %s", errOut)
	}
	for _, tt := range []struct {
		name, stderr string
		exit         int
		want         string
	}{
		{"not installed", "sh: 1: osaurus-sandbox: not found", 127, "copy this one there with `osaurus-sandbox context install box`"},
		{"libraries missing", "osaurus-sandbox: error while loading shared libraries: libGL.so.1: cannot open shared object file", 127, "install the libraries it links there"},
		{"unreachable", "ssh: connect to host box port 22: Connection refused", 255, "Connection refused"},
	} {
		os.WriteFile(filepath.Join(bin, "ssh"), []byte(fmt.Sprintf("#!/bin/sh\necho '%s' >&2\nexit %d\n", tt.stderr, tt.exit)), 0o755)
		_, errOut, code := run(t, "context", "check", "box")
		if code != 3 || !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, tt.stderr) {
			t.Errorf("%s: exit %d: %s", tt.name, code, errOut)
		}
	}
}
