package hostcli

import (
	"os"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/plugins"
)

func TestNetworkLogCommandLine(t *testing.T) {
	t.Setenv(config.HomeEnv, t.TempDir())
	for _, args := range [][]string{{"network"}, {"network", "show"}, {"network", "log", "extra"}, {"network", "log", "--nope"}} {
		if _, errOut, code := run(t, args...); code != ExitUsage || !strings.Contains(errOut, "network log [--follow] [--json]") {
			t.Errorf("%v: exit %d %q, want usage", args, code, errOut)
		}
	}
	if _, errOut, code := run(t, "network", "log", "--agent", "nobody"); code != ExitError || !strings.Contains(errOut, "--agent") {
		t.Errorf("unknown agent: exit %d %q", code, errOut)
	}
	// The log lives in the VM: without one running, say how to start it.
	if _, errOut, code := run(t, "network", "log"); code != ExitNotRunning || !strings.Contains(errOut, "osaurus-sandbox start") {
		t.Errorf("no VM: exit %d %q", code, errOut)
	}
}

// agent show prints the policy in force, and what each installed plugin
// narrows it to.
func TestAgentShowNetworkInForce(t *testing.T) {
	home := t.TempDir()
	t.Setenv(config.HomeEnv, home)
	if _, errOut, code := run(t, "agent", "add", "Ana"); code != ExitOK {
		t.Fatal(errOut)
	}
	if _, errOut, code := run(t, "agent", "set", "Ana", "network", "*.example.com"); code != ExitOK {
		t.Fatal(errOut)
	}
	c := &cli{paths: config.Paths{Root: home}}
	reg, err := c.openAgents()
	if err != nil {
		t.Fatal(err)
	}
	a, err := reg.Get("Ana")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plugins.DecodeBytes([]byte(`{"name": "Fetcher", "description": "d", "permissions": {"network": "api.example.com,other.org"},
 "tools": [{"id": "get", "description": "d", "run": "true"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.installed().Record(t.Context(), a.ID, p, 1); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "agent", "show", "Ana")
	if code != ExitOK {
		t.Fatal(errOut)
	}
	for _, want := range []string{
		"network in force:     only *.example.com over HTTP and HTTPS",
		"plugin fetcher runs with: only api.example.com over HTTP and HTTPS",
		"network log --agent ana",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("agent show lacks %q:\n%s", want, out)
		}
	}
}

// Through a remote context the refusal log is the far VM's, and --agent
// names a far agent: this machine has no alice, and its stopped VM
// isn't the one asked.
func TestNetworkLogThroughContext(t *testing.T) {
	local, far, _ := farAndLocal(t, []string{"agent", "add", "alice"})
	farSide(t, "box", far)
	_, errOut, code := run(t, "--context", "box", "network", "log", "--agent", "alice")
	if code != ExitNotRunning || !strings.Contains(errOut, "run `osaurus-sandbox --context box start` first") {
		t.Fatalf("network log through the context: exit %d, %s", code, errOut)
	}
	if _, errOut, code := run(t, "--context", "box", "network", "log", "--agent", "nobody"); code != ExitError || !strings.Contains(errOut, "--agent") {
		t.Fatalf("an agent the far side doesn't have: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(config.Paths{Root: local}.AgentsJSON()); err == nil {
		t.Error("this machine's agents.json was created")
	}
}
