//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/sandbox"
)

// extraPackage is in the test guest's Debian mirror but not in the test
// guest (its build installs curl, ripgrep, python3, node and a few more),
// and it pulls dependencies (libjq1, libonig5), so the cache holds several.
const extraPackage = "jq"

// packagesManifest serves the test guest's manifest with a packages list
// that the test changes between steps.
type packagesManifest struct {
	*httptest.Server
	mu       sync.Mutex
	packages []string
}

func newPackagesManifest(t *testing.T, srv *switchableServer) *packagesManifest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(os.Getenv("OSAURUS_TEST_GUEST"), "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Artifact URLs resolved against the test guest's server, so this
	// manifest can be served from anywhere.
	base, err := provision.ParseManifest(raw, srv.URL+"/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	pm := &packagesManifest{}
	pm.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := *base
		pm.mu.Lock()
		m.Packages = slices.Clone(pm.packages)
		pm.mu.Unlock()
		json.NewEncoder(w).Encode(&m)
	}))
	t.Cleanup(pm.Close)
	return pm
}

func (pm *packagesManifest) set(pkgs ...string) {
	pm.mu.Lock()
	pm.packages = pkgs
	pm.mu.Unlock()
}

func setSandboxConfig(t *testing.T, p config.Paths, change func(*config.Sandbox)) {
	t.Helper()
	cfg, err := config.LoadSandbox(p.SandboxJSON())
	if err != nil {
		t.Fatal(err)
	}
	change(&cfg)
	if err := config.SaveSandbox(p.SandboxJSON(), cfg); err != nil {
		t.Fatal(err)
	}
}

func guestHas(ctx context.Context, t *testing.T, a *agentproto.Client, pkg string) bool {
	t.Helper()
	out, _, st, err := a.Output(ctx, agentproto.ExecRequest{Argv: []string{"dpkg-query", "-W", "-f", "${Status}", pkg}})
	if err != nil {
		t.Fatal(err)
	}
	return st.Code == 0 && string(out) == "install ok installed"
}

// TestImagePackages: an image manifest's packages are installed by
// provisioning at the first boot, before the VM is reported running, and
// recorded; a Reset installs them again from the data folder's package
// cache with the VM's network off; a package that doesn't exist fails the
// provision with the package manager's words and leaves no VM and no
// "provisioned" marker.
func TestImagePackages(t *testing.T) {
	requireGuest(t)
	srv := newSwitchableServer(t)
	p := copyContainer(t)
	layout := provision.Layout{Dir: p.ContainerDir()}
	// The copy is provisioned without packages: start from "not
	// provisioned", with the pristine disk in the copied cache.
	if err := os.Remove(layout.StateFile()); err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, p, srv, sandbox.Options{Logf: log.Printf})
	man := newPackagesManifest(t, srv)
	man.set(extraPackage)
	setSandboxConfig(t, p, func(c *config.Sandbox) { c.ImageManifest = man.URL + "/manifest.json" })
	ctx := context.Background()

	t.Run("the first boot installs them before the VM is running", func(t *testing.T) {
		var mu sync.Mutex
		var seen []string // phases and states, in order
		stop := m.Subscribe(func(st control.Status) {
			mu.Lock()
			defer mu.Unlock()
			e := string(st.State)
			if st.Progress != nil {
				e += ":" + st.Progress.Phase
			}
			if len(seen) == 0 || seen[len(seen)-1] != e {
				seen = append(seen, e)
			}
		})
		err := m.Start(ctx)
		stop()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("states: %v", seen)
		installed, running := slices.Index(seen, "provisioning:packages"), slices.Index(seen, "running")
		if installed < 0 || running < installed {
			t.Errorf("states %v: want provisioning:packages before running", seen)
		}
		a := runningAgent(t, m)
		if !guestHas(ctx, t, a, extraPackage) {
			t.Fatalf("%s is not installed after the first boot", extraPackage)
		}
		st, err := (&provision.Provisioner{Layout: layout}).Load()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(st.Packages, []string{extraPackage}) {
			t.Errorf("provisioned.json packages %v, want [%s]", st.Packages, extraPackage)
		}
		debs, _ := filepath.Glob(filepath.Join(p.PackageCache(), "apt-archives", extraPackage+"_*.deb"))
		if len(debs) != 1 {
			t.Errorf("package cache holds %v, want one %s .deb", debs, extraPackage)
		}
		// Marks the disk: a Reset must rebuild it.
		if _, err := a.WriteFile(ctx, agentproto.WriteFileRequest{Path: "/root/before-reset", Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a reset installs them again from the cache, offline", func(t *testing.T) {
		// No network card at all: the package manager can only use what
		// the cache gave back.
		setSandboxConfig(t, p, func(c *config.Sandbox) { c.Network = "none" })
		defer setSandboxConfig(t, p, func(c *config.Sandbox) { c.Network = "outbound" })
		if err := m.Reset(ctx); err != nil {
			t.Fatalf("reset with the network off: %v", err)
		}
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		a := runningAgent(t, m)
		if _, err := a.Stat(ctx, agentproto.PathRequest{Path: "/root/before-reset"}); !errors.Is(err, agentproto.ErrNotFound) {
			t.Fatalf("the root disk was not rebuilt: %v", err)
		}
		if !guestHas(ctx, t, a, extraPackage) {
			t.Fatalf("%s is not installed after the reset", extraPackage)
		}
	})

	t.Run("a package that does not exist fails the provision", func(t *testing.T) {
		man.set(extraPackage, "no-such-package-osaurus")
		err := m.Reset(ctx)
		if err == nil {
			t.Fatal("reset succeeded with a package that does not exist")
		}
		msg := err.Error()
		for _, want := range []string{"no-such-package-osaurus", "Unable to locate package"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not name %q", msg, want)
			}
		}
		if st := m.Status(); st.State != control.NotProvisioned || !strings.Contains(st.Reason, "no-such-package-osaurus") {
			t.Errorf("status after the failure: %+v", st)
		}
		if _, err := os.Stat(layout.StateFile()); !os.IsNotExist(err) {
			t.Errorf("a failed provision left %s: %v", layout.StateFile(), err)
		}
		if _, err := m.Agent(); err == nil {
			t.Error("a VM is reachable after the failed provision")
		}
		if n := countQEMU(p); n != 0 {
			t.Errorf("%d QEMU processes left after the failed provision", n)
		}
	})
}
