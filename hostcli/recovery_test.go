package hostcli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/plugins"
)

// TestPluginRecovery: no mistake with the plugin library loses work or
// locks the user out.
func TestPluginRecovery(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hello := write("hello.json", helloPlugin)
	other := write("other.json", strings.Replace(helloPlugin, "Says hello", "Someone else's plugin", 1))
	second := write("second.json", strings.Replace(helloPlugin, "Hello Tools", "Second", 1))

	// A file import records the absolute path, whatever the working
	// folder was: `plugin update` runs from anywhere.
	t.Chdir(dir)
	if out, errOut, code := run(t, "plugin", "import", "hello.json"); code != ExitOK || !strings.Contains(out, "from "+hello) {
		t.Fatalf("import of a relative path: %d %q %q, want the absolute path %s recorded", code, out, errOut, hello)
	}
	run(t, "plugin", "import", second)

	t.Run("same id from elsewhere asks", func(t *testing.T) {
		out, errOut, code := runStdin(t, "", "plugin", "import", other)
		if code != ExitDeclined || !strings.Contains(errOut, `already has a plugin "hello-tools", from `+hello) || !strings.Contains(errOut, "version 2 of that plugin") {
			t.Fatalf("import over an unrelated plugin without an answer: %d %q %q", code, out, errOut)
		}
		if out, _, _ := run(t, "plugin", "show", "hello-tools"); strings.Contains(out, "Someone else's") {
			t.Fatal("the declined import changed the plugin")
		}
		if out, errOut, code := runStdin(t, "yes\n", "plugin", "import", other); code != ExitOK || !strings.Contains(out, "library version 2") {
			t.Fatalf("import confirmed: %d %q %q", code, out, errOut)
		}
	})

	t.Run("uninstall of a plugin not installed", func(t *testing.T) {
		run(t, "agent", "add", "alice")
		out, errOut, code := run(t, "plugin", "uninstall", "second", "--agent", "alice")
		if code != ExitError || !strings.Contains(errOut, "plugin second is not installed for alice") {
			t.Fatalf("uninstall: %d %q %q", code, out, errOut)
		}
	})

	t.Run("damaged library file", func(t *testing.T) {
		lib := filepath.Join(home, "plugins", "hello-tools.json")
		if _, err := os.Stat(lib); err != nil {
			// Find it wherever the library lives.
			m, _ := filepath.Glob(filepath.Join(home, "*", "hello-tools.json"))
			if len(m) != 1 {
				t.Fatalf("library file of hello-tools not found: %v", err)
			}
			lib = m[0]
		}
		if err := os.WriteFile(lib, []byte(`{"id": "hello-tools", "vers`), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := run(t, "plugin", "list")
		if code != ExitError || !strings.Contains(out, "second") || !strings.Contains(out, "hello-tools  (DAMAGED: `plugin remove hello-tools` removes it") || !strings.Contains(errOut, "damaged library file") {
			t.Fatalf("list with a damaged file: %d\nstdout: %s\nstderr: %s", code, out, errOut)
		}
		// Importing it again replaces it, keeping the damaged file aside.
		if out, errOut, code := run(t, "plugin", "import", hello); code != ExitOK || !strings.Contains(out, "library version 1") {
			t.Fatalf("re-import over the damaged file: %d %q %q", code, out, errOut)
		}
		if m, _ := filepath.Glob(lib + ".damaged-*"); len(m) != 1 {
			t.Errorf("the damaged file was not kept aside as %s.damaged-TIME: %v", lib, m)
		} else {
			os.Remove(m[0])
		}
		if _, _, code := run(t, "plugin", "list"); code != ExitOK {
			t.Fatalf("list after the re-import: %d", code)
		}
		// Or remove it.
		os.WriteFile(lib, []byte("{"), 0o600)
		if out, errOut, code := run(t, "plugin", "remove", "hello-tools"); code != ExitOK || !strings.Contains(out, "kept aside as "+lib+".damaged-TIME") {
			t.Fatalf("remove of the damaged file: %d %q %q", code, out, errOut)
		}
		// Removing keeps the damaged file aside too: it may be the only
		// copy of a recipe the user wrote.
		if m, _ := filepath.Glob(lib + ".damaged-*"); len(m) != 1 {
			t.Errorf("remove deleted the damaged file instead of keeping it aside: %v", m)
		} else if b, _ := os.ReadFile(m[0]); string(b) != "{" {
			t.Errorf("the file kept aside is not the damaged one: %q", b)
		}
		if out, _, code := run(t, "plugin", "list"); code != ExitOK || strings.Contains(out, "hello-tools") || !strings.Contains(out, "second") {
			t.Fatalf("list after removing the damaged file: %d %q", code, out)
		}
	})
}

// TestDamagedAgentsFile: a damaged agents.json is named with the fix in
// every agent command and in the MCP server a client starts; `agent
// repair` keeps what it can read and the damaged file aside.
func TestDamagedAgentsFile(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	for _, n := range []string{"alice", "bob"} {
		if _, errOut, code := run(t, "agent", "add", n); code != ExitOK {
			t.Fatal(errOut)
		}
	}
	path := config.Paths{Root: home}.AgentsJSON()
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:strings.Index(string(b), `"bob"`)], 0o600)
	for _, args := range [][]string{{"agent", "list"}, {"agent", "show", "alice"}, {"mcp", "--agent", "alice"}} {
		_, errOut, code := run(t, args...)
		if code != ExitError || !containsAll(errOut, path+" is damaged", "it ends in the middle", "`osaurus-sandbox agent repair`") {
			t.Errorf("%v: %d %q", args, code, errOut)
		}
	}
	out, errOut, code := run(t, "agent", "repair")
	if code != ExitOK || !containsAll(out, "moved the damaged file to "+path+".damaged-", "kept 1 agents: alice", "could not read: ") {
		t.Fatalf("repair: %d %q %q", code, out, errOut)
	}
	if out, _, code := run(t, "agent", "list"); code != ExitOK || !strings.Contains(out, "alice") {
		t.Fatalf("list after the repair: %d %q", code, out)
	}
	if out, _, code := run(t, "agent", "repair"); code != ExitOK || !strings.Contains(out, "nothing to repair") {
		t.Fatalf("repair of a good file: %d %q", code, out)
	}
}

// TestDamagedProjectsFile: a damaged projects.json is named with the fix
// in every project command; `project repair` keeps the projects it can
// read and the damaged file aside, touching no folder.
func TestDamagedProjectsFile(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	src := t.TempDir()
	for _, n := range []string{"site", "blog"} {
		os.Mkdir(filepath.Join(src, n), 0o755)
		if _, errOut, code := run(t, "project", "add", filepath.Join(src, n)); code != ExitOK {
			t.Fatal(errOut)
		}
	}
	path := config.Paths{Root: home}.ProjectsJSON()
	b, _ := os.ReadFile(path)
	cut := b[:strings.Index(string(b), `"blog"`)]
	for _, tc := range []struct{ name, body, kept, why string }{
		{"cut short", string(cut), "kept 1 projects: site", "it ends in the middle"},
		{"wrong type", strings.Replace(string(b), `"name": "blog"`, `"name": 7`, 1), "kept 1 projects: site", `"name" holds a number`},
		{"not JSON", "garbage", "no project could be read", "invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.WriteFile(path, []byte(tc.body), 0o644)
			for _, args := range [][]string{{"project", "list"}, {"project", "add", src}, {"project", "remove", "site"}} {
				_, errOut, code := run(t, args...)
				if code != ExitError || !containsAll(errOut, path+" is damaged", tc.why, "`osaurus-sandbox project repair`") {
					t.Errorf("%v: %d %q", args, code, errOut)
				}
			}
			out, errOut, code := run(t, "project", "repair")
			if code != ExitOK || !containsAll(out, "moved the damaged file to "+path+".damaged-", tc.kept) {
				t.Fatalf("repair: %d %q %q", code, out, errOut)
			}
			m, _ := filepath.Glob(path + ".damaged-*")
			if len(m) == 0 {
				t.Fatal("the damaged file was not kept aside")
			}
			if aside, _ := os.ReadFile(m[len(m)-1]); string(aside) != tc.body {
				t.Errorf("the file kept aside is not the damaged one: %q", aside)
			}
			os.Remove(m[len(m)-1])
			out, _, code = run(t, "project", "list")
			if code != ExitOK || strings.Contains(tc.kept, "site") != strings.Contains(out, "site") || strings.Contains(out, "blog") {
				t.Fatalf("list after the repair: %d %q", code, out)
			}
			if out, _, code := run(t, "project", "repair"); code != ExitOK || !strings.Contains(out, "nothing to repair") {
				t.Fatalf("repair of a good file: %d %q", code, out)
			}
			if _, err := os.Stat(filepath.Join(src, "blog")); err != nil {
				t.Fatal("repair touched a folder")
			}
			os.WriteFile(path, b, 0o644)
		})
	}
}

// TestDamagedInstallRecord: a damaged installed.json (an agent's
// installed plugins) is named with the fix; `plugin repair` keeps the
// installations it can read and the damaged file aside.
func TestDamagedInstallRecord(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	dir := t.TempDir()
	hello := filepath.Join(dir, "hello.json")
	second := strings.Replace(helloPlugin, "Hello Tools", "Second", 1)
	os.WriteFile(hello, []byte(helloPlugin), 0o644)
	os.WriteFile(filepath.Join(dir, "second.json"), []byte(second), 0o644)
	for _, args := range [][]string{{"agent", "add", "alice"}, {"plugin", "import", hello}, {"plugin", "import", filepath.Join(dir, "second.json")}} {
		if _, errOut, code := run(t, args...); code != ExitOK {
			t.Fatalf("%v: %s", args, errOut)
		}
	}
	reg, err := agents.Open(config.Paths{Root: home}.AgentsJSON())
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := reg.Get("alice")
	store := plugins.NewInstalled(config.Paths{Root: home}.AgentStateDir())
	for _, body := range []string{helloPlugin, second} {
		p, err := plugins.DecodeBytes([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Record(t.Context(), alice.ID, p, 1); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(config.Paths{Root: home}.AgentStateDir(), alice.ID, "sandbox-plugins", "installed.json")
	b, _ := os.ReadFile(path)
	// Cut inside the second installation ("second" sorts after "hello-tools").
	damaged := b[:strings.Index(string(b), `"second"`)+20]
	os.WriteFile(path, damaged, 0o600)
	// Removing a plugin from the library reads every agent's record.
	if _, errOut, code := run(t, "plugin", "remove", "second"); code == ExitOK || !containsAll(errOut, path+" is damaged", "`osaurus-sandbox plugin repair`") {
		t.Fatalf("remove with a damaged install record: %d %q", code, errOut)
	}
	if out, _, _ := run(t, "agent", "show", "alice"); !containsAll(out, path+" is damaged", "`osaurus-sandbox plugin repair`") {
		t.Errorf("agent show with a damaged install record:\n%s", out)
	}
	out, errOut, code := run(t, "plugin", "repair")
	if code != ExitOK || !containsAll(out, "alice: moved the damaged file to "+path+".damaged-", "alice: kept 1 plugins: hello-tools", "alice: could not read: ", "plugin install ID --agent alice") {
		t.Fatalf("repair: %d %q %q", code, out, errOut)
	}
	if m, _ := filepath.Glob(path + ".damaged-*"); len(m) != 1 {
		t.Fatalf("the damaged file was not kept aside: %v", m)
	} else if aside, _ := os.ReadFile(m[0]); string(aside) != string(damaged) {
		t.Fatalf("the file kept aside is not the damaged one")
	}
	if ids, err := store.Agents("hello-tools"); err != nil || len(ids) != 1 {
		t.Fatalf("hello-tools after the repair: %v %v", ids, err)
	}
	if out, errOut, code := run(t, "plugin", "list"); code != ExitOK {
		t.Fatalf("list after the repair: %d %q %q", code, out, errOut)
	}
	if out, _, code := run(t, "plugin", "repair"); code != ExitOK || !strings.Contains(out, "nothing to repair") {
		t.Fatalf("repair of good files: %d %q", code, out)
	}
}
