package hostcli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/plugins"
)

// libraryIDs is the ids in the library of data folder dir.
func libraryIDs(t *testing.T, dir string) []string {
	t.Helper()
	lib, err := plugins.OpenLibrary(config.Paths{Root: dir}.PluginsDir())
	if err != nil {
		t.Fatal(err)
	}
	list, err := lib.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range list {
		ids = append(ids, e.ID)
	}
	return ids
}

// Through a remote context the plugin commands read the far side's
// library and installs through its owner, never this machine's: a plugin
// of the same id here is not what is listed, shown or reviewed for an
// install, and this machine's library is left as it was.
func TestPluginCommandsThroughContext(t *testing.T) {
	recipes := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(recipes, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The far side's hello-tools is another version, and needs a secret.
	farHello := write("far-hello.json", strings.Replace(strings.Replace(helloPlugin, "1.0.0", "9.9.9", 1), `"setup"`, `"secrets": ["FAR_TOKEN"], "setup"`, 1))
	localHello := write("hello.json", helloPlugin)
	localOnly := write("local-only.json", strings.Replace(helloPlugin, "Hello Tools", "Local Only", 1))
	fromHere := write("from-here.json", strings.Replace(helloPlugin, "Hello Tools", "From Here", 1))

	local, far, _ := farAndLocal(t, []string{"agent", "add", "alice"}, []string{"plugin", "import", farHello, "--yes"})
	for _, args := range [][]string{{"agent", "add", "carol"}, {"plugin", "import", localHello}, {"plugin", "import", localOnly}} {
		if _, errOut, code := run(t, args...); code != ExitOK {
			t.Fatal(args, errOut)
		}
	}
	farSide(t, "box", far)
	notHere := Owner{OpenData: func(context.Context, config.Paths, func(string, ...any)) (api.Controller, error) {
		t.Error("a command through the context opened this machine's data files")
		return nil, errors.New("not through a context")
	}}
	fp := config.Paths{Root: far}
	reg, err := agents.OpenReadOnly(fp.AgentsJSON())
	if err != nil {
		t.Fatal(err)
	}
	alice, err := reg.Get("alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args    []string
		code    int
		out     string // in stdout, or stderr when code != 0
		stderr  string // also in stderr
		library []string
	}{
		{[]string{"plugin", "list"}, ExitOK, "hello-tools  Hello Tools  9.9.9", "", nil},
		{[]string{"plugin", "show", "hello-tools"}, ExitOK, "secrets: FAR_TOKEN", "", nil},
		{[]string{"plugin", "show", "local-only"}, ExitError, "no such plugin", "", nil},
		{[]string{"plugin", "export", "hello-tools"}, ExitOK, `"9.9.9"`, "", nil},
		// The review is of the far recipe: its secret needs --yes.
		{[]string{"plugin", "install", "hello-tools", "--agent", "alice"}, ExitDeclined, "Nothing was installed", "FAR_TOKEN", nil},
		// Accepted; the far VM is not running, so the install stops there.
		{[]string{"plugin", "install", "hello-tools", "--agent", "alice", "--yes"}, ExitNotRunning, "osaurus-sandbox start", "Accepted (--yes)", nil},
		{[]string{"plugin", "install", "hello-tools", "--agent", "carol", "--yes"}, ExitError, "carol", "", nil},
		{[]string{"plugin", "uninstall", "hello-tools", "--agent", "alice"}, ExitError, "not installed for alice", "", nil},
		{[]string{"plugin", "duplicate", "hello-tools"}, ExitOK, "as hello-tools-copy", "", []string{"hello-tools-copy", "hello-tools"}},
		{[]string{"plugin", "remove", "hello-tools-copy"}, ExitOK, "removed hello-tools-copy", "", []string{"hello-tools"}},
		// A recipe file of this machine goes to the far side's library.
		{[]string{"plugin", "import", fromHere}, ExitOK, "imported from-here as library version 1", "", []string{"from-here", "hello-tools"}},
		// Its origin is a file of the far machine.
		{[]string{"plugin", "update", "hello-tools"}, ExitError, "imported from the file " + farHello + " of context box's machine, which this one can't read: run `ssh me@box ", "", nil},
		{[]string{"plugin", "repair"}, ExitOK, "every agent's install record is fine", "", nil},
	} {
		out, errOut, code := runWith(t, notHere, append([]string{"--context", "box"}, tt.args...)...)
		text := out
		if code != ExitOK {
			text = errOut
		}
		if code != tt.code || !strings.Contains(text, tt.out) || !strings.Contains(errOut, tt.stderr) {
			t.Errorf("%v: exit %d (want %d), want %q and %q in stderr\nstdout: %s\nstderr: %s", tt.args, code, tt.code, tt.out, tt.stderr, out, errOut)
			continue
		}
		if got := libraryIDs(t, far); tt.library != nil && !slices.Equal(got, tt.library) {
			t.Errorf("%v: the far library has %v, want %v", tt.args, got, tt.library)
		}
	}
	out, errOut, code := runWith(t, notHere, "--context", "box", "plugin", "list", "--json")
	var rows []pluginSummary
	if err := json.Unmarshal([]byte(out), &rows); code != ExitOK || err != nil || len(rows) != 2 || rows[0].ID != "from-here" || rows[1].ID != "hello-tools" || rows[1].Version != "9.9.9" {
		t.Errorf("plugin list --json: %d %v %q %q", code, err, out, errOut)
	}

	// An install of the far side's (the VM isn't there to make one): the
	// uninstall through the context drops the far side's record.
	installs := plugins.NewInstalled(fp.AgentStateDir())
	p, err := plugins.DecodeBytes([]byte(helloPlugin))
	if err != nil {
		t.Fatal(err)
	}
	if err := installs.Record(t.Context(), alice.ID, p, 1); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runWith(t, notHere, "--context", "box", "plugin", "uninstall", "hello-tools", "--agent", "alice"); code != ExitOK || !strings.Contains(out, "uninstalled hello-tools from alice") {
		t.Errorf("uninstall: %d %q %q", code, out, errOut)
	}
	if have, err := installs.List(alice.ID); err != nil || len(have) != 0 {
		t.Errorf("the far side's installs of alice after uninstall: %v %v", have, err)
	}
	if got := libraryIDs(t, local); !slices.Equal(got, []string{"hello-tools", "local-only"}) {
		t.Errorf("this machine's library changed: %v", got)
	}
}
