package hostcli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/projects"
)

// With an owner running, every command that changes the agents or the
// projects goes through the control socket: agents.json, projects.json,
// the agents' project views and their reviews have one writer. The owner here is this test process (host.OpenData, the
// real Host), serving data folder A; the real binary runs on data folder
// B, whose control socket is A's (a symbolic link) and whose agents.json
// and projects.json are copies of A's, for the commands' reads. A command
// that wrote a file itself would change B's copy; one that went through
// the owner changes A's, which the CLI does not know. And the owner's
// registry reflects each change at once: it re-reads nothing (no watch,
// no reload), so only a change made through it shows there. (Checked
// against the old code: a `project remove` writing projects.json itself
// fails here.)
func TestOneWriterWithAnOwnerRunning(t *testing.T) {
	bin := realBinary(t)
	short := func() string { // unix socket paths are short
		d, err := os.MkdirTemp("", "ow")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	pa, pb := config.Paths{Root: short()}, config.Paths{Root: short()}
	ctx := context.Background()
	ctl, err := host.OpenData(ctx, pa, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	reg := ctl.(interface{ Registry() *agents.Registry }).Registry()
	for _, d := range []string{pb.Run(), pb.ConfigDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(pa.ControlSocket(), pb.ControlSocket()); err != nil {
		t.Fatal(err)
	}
	folder := t.TempDir()
	home := t.TempDir() // no MCP client configuration of the user's

	files := []string{filepath.Base(pa.AgentsJSON()), filepath.Base(pa.ProjectsJSON())}
	// mirror copies A's files into B, returning what B's config folder
	// holds afterwards.
	mirror := func() map[string]string {
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(pa.ConfigDir(), f))
			if errors.Is(err, os.ErrNotExist) {
				os.Remove(filepath.Join(pb.ConfigDir(), f))
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(pb.ConfigDir(), f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return snapshot(t, pb.Root)
	}
	agent := func(ref string) agents.Agent {
		a, err := reg.Get(ref)
		if err != nil {
			t.Fatalf("the owner's registry: %v", err)
		}
		return a
	}
	project := func(name string) bool {
		_, err := projects.Get(pa.ProjectsJSON(), name)
		return err == nil
	}
	// What the agent writes in its view once it is granted the project.
	write := func(args []string) {
		if strings.Join(args, " ") != "changes alicia web" {
			return
		}
		view := (projects.Views{Paths: pa}).Dir(agent("alice"), "web")
		for name, s := range map[string]string{"hello.txt": "hello from alice\n", "scratch.txt": "x\n"} {
			if err := os.WriteFile(filepath.Join(view, name), []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tt := range []struct {
		args []string
		// done checks the change in the owner's memory or folder.
		done func() bool
	}{
		{[]string{"agent", "add", "alice"}, func() bool { return agent("alice").Slug == "alice" }},
		{[]string{"agent", "add", "bob"}, func() bool { return len(reg.List()) == 2 }},
		{[]string{"agent", "set", "alice", "enabled", "true"}, func() bool { return agent("alice").AutonomousExec.Enabled }},
		{[]string{"agent", "set", "alice", "memoryMB", "512"}, func() bool { return agent("alice").Resources.MemoryMB == 512 }},
		{[]string{"agent", "set", "alice", "name", "Alicia"}, func() bool { return agent("alice").Name == "Alicia" }},
		{[]string{"agent", "set", "alicia", "dispatchTo", "bob"}, func() bool {
			return slices.Equal(agent("alice").DispatchTo, []string{agent("bob").ID})
		}},
		{[]string{"project", "add", folder, "--name", "web"}, func() bool { return project("web") }},
		{[]string{"agent", "set", "alicia", "projects", "web"}, func() bool {
			return slices.Equal(agent("alice").Projects, []string{"web"}) && (projects.Views{Paths: pa}).Has(agent("alice"), "web")
		}},
		{[]string{"changes", "alicia", "web"}, func() bool {
			return true // the review is recorded in A (B is checked below)
		}},
		{[]string{"discard", "alicia", "web", "--yes", "scratch.txt"}, func() bool {
			_, err := os.Stat(filepath.Join((projects.Views{Paths: pa}).Dir(agent("alice"), "web"), "scratch.txt"))
			return errors.Is(err, os.ErrNotExist)
		}},
		{[]string{"apply", "alicia", "web", "--yes"}, func() bool {
			b, err := os.ReadFile(filepath.Join(folder, "hello.txt"))
			return err == nil && string(b) == "hello from alice\n"
		}},
		{[]string{"agent", "set", "alicia", "projects", "none"}, func() bool {
			return len(agent("alice").Projects) == 0 && !(projects.Views{Paths: pa}).Has(agent("alice"), "web")
		}},
		{[]string{"project", "remove", "web"}, func() bool { return !project("web") }},
		{[]string{"project", "repair"}, func() bool { return true }},
		{[]string{"agent", "repair"}, func() bool { return true }},
		{[]string{"agent", "remove", "bob"}, func() bool { _, err := reg.Get("bob"); return errors.Is(err, agents.ErrNotFound) }},
	} {
		write(tt.args)
		before := mirror()
		cmd := exec.Command(bin, tt.args...)
		cmd.Env = append(os.Environ(), config.HomeEnv+"="+pb.Root, "HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, ".cache"), "DISPLAY=", "WAYLAND_DISPLAY=")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s%s", strings.Join(tt.args, " "), err, out.String(), errOut.String())
		}
		if !tt.done() {
			t.Errorf("%s: the owner did not make the change (%q)", strings.Join(tt.args, " "), out.String())
		}
		if after := snapshot(t, pb.Root); !mapsEqual(before, after) {
			t.Errorf("%s wrote the data files itself: %v, then %v", strings.Join(tt.args, " "), keys(before), keys(after))
		}
	}
}

// snapshot is every file of the data folder dir with its contents, but
// the control socket's link and the keychain's
// list of pending removals: the keychain is the user's session's, which
// the command reaches itself (`agent remove` deletes the agent's secrets).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == (config.Paths{Root: dir}).SecretRemovals() || d.Type()&os.ModeSocket != 0 || d.Type()&os.ModeSymlink != 0 {
			return err
		}
		b, err := os.ReadFile(p)
		m[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, filepath.Base(k))
	}
	slices.Sort(ks)
	return ks
}
