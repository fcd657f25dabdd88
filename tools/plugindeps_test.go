package tools

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/plugins"
)

// A plugin's packages live on the VM's root disk, which a Reset replaces;
// its record lives on the host. The first command after a Reset installs
// them again, and only then.
func TestPluginPackagesComeBackAfterReset(t *testing.T) {
	const withDeps = `{"name": "Jqer", "description": "Uses jq", "dependencies": ["jq"],
 "tools": [{"id": "q", "description": "Runs jq", "run": "jq -n 1"}]}`
	p, err := plugins.DecodeBytes([]byte(withDeps))
	if err != nil {
		t.Fatal(err)
	}
	store := plugins.NewInstalled(t.TempDir())
	installs := func(ran []string) int {
		n := 0
		for _, c := range ran {
			if strings.HasPrefix(c, "apt-get install") && strings.HasSuffix(c, " jq") {
				n++
			}
		}
		return n
	}
	tests := []struct {
		name     string
		listed   string // the root disk's list, "" for a fresh disk
		installs int
	}{
		{"fresh root disk", "", 1},
		{"listed by an earlier install", "curl\njq\n", 0},
		{"other plugins' packages only", "curl\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeGuest()
			f.put("/var/lib/apt/lists/deb_dists_bookworm_main_binary-amd64_Packages", "")
			if tt.listed != "" {
				f.put(PluginPackagesFile, tt.listed)
			}
			h := newHarnessOn(t, f, func(o *Options) { o.Plugins = store })
			if err := store.Record(context.Background(), h.ts.Agent().ID, p, 1); err != nil {
				t.Fatal(err)
			}
			ran := script(h, nil, nil)
			for range 2 {
				ok(t, h.call("jqer_q", map[string]any{}))
			}
			if got := installs(*ran); got != tt.installs {
				t.Fatalf("jq installed %d times over two calls, want %d (ran %q)", got, tt.installs, *ran)
			}
			listed, _ := f.get(PluginPackagesFile)
			if pk := strings.Fields(listed); !slices.Contains(pk, "jq") || (tt.listed != "" && !slices.Contains(pk, strings.Fields(tt.listed)[0])) {
				t.Fatalf("the root disk's list after the calls: %q", listed)
			}
		})
	}
}
