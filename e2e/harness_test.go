//go:build linux

// Package e2e boots the real test guest under QEMU and drives it the way
// the app does. Nothing here is faked: provisioning downloads from a
// loopback HTTP server, the VM is a real QEMU process, files cross real
// VirtioFS shares.
package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/provision/download"
	"github.com/osaurus/osaurus-sandbox/vm"
	"github.com/osaurus/osaurus-sandbox/vm/qemu"
)

// env is the provisioned test guest shared by every test in the package.
var env struct {
	dataDir string
	layout  provision.Layout
	state   *provision.State
	err     error
}

const guestHint = "run `make test-guest` (builds the Debian test guest) and set OSAURUS_TEST_GUEST to its folder; `make test` does both"

func TestMain(m *testing.M) {
	// No owner or CLI child reaches the developer's keychain: those that
	// need one get a private keyring (testkeyring.Start).
	testkeyring.Isolate()
	code := func() int {
		dir, err := os.MkdirTemp("", "osaurus-e2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		env.dataDir = dir
		// Caches (the QEMU driver's KVM verdict, anything a child keeps in
		// the user's cache folder) go under this run's folder; go build
		// keeps the developer's build cache, which `go test` uses anyway.
		if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
			os.Setenv("GOCACHE", strings.TrimSpace(string(out)))
		}
		os.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
		env.layout = provision.Layout{Dir: filepath.Join(dir, "container")}
		env.state, env.err = provisionTestGuest(env.layout)
		code := m.Run()
		if err := stopSharedGuest(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the shared test guest:", err)
			if code == 0 {
				code = 1
			}
		}
		return code
	}()
	os.Exit(code)
}

// testGuestServer serves the test guest folder on loopback, as a real image
// host would serve a manifest and its artifacts.
func testGuestServer() (*httptest.Server, error) {
	dir := os.Getenv("OSAURUS_TEST_GUEST")
	if dir == "" {
		return nil, fmt.Errorf("OSAURUS_TEST_GUEST is not set: %s", guestHint)
	}
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		return nil, fmt.Errorf("no test guest in %s (%v): %s", dir, err, guestHint)
	}
	return httptest.NewServer(http.FileServer(http.Dir(dir))), nil
}

func loadManifest(srv *httptest.Server) (*provision.Manifest, error) {
	resp, err := http.Get(srv.URL + "/manifest.json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := readAll(resp)
	if err != nil {
		return nil, err
	}
	return provision.ParseManifest(b, srv.URL+"/manifest.json")
}

func provisionTestGuest(l provision.Layout) (*provision.State, error) {
	srv, err := testGuestServer()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	m, err := loadManifest(srv)
	if err != nil {
		return nil, err
	}
	p := &provision.Provisioner{Layout: l, Download: &download.Client{}, Agent: assets.GuestAgent}
	// No deadline of our own: on a loaded machine this has taken over a
	// quarter of an hour, and go test's -timeout already ends a hang.
	return p.Provision(context.Background(), m)
}

// requireGuest fails the test when the test guest could not be provisioned.
func requireGuest(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a VM; not in -short mode")
	}
	if env.err != nil {
		t.Fatalf("test guest: %v", env.err)
	}
}

type bootOpts struct {
	network string
	events  func(vm.Event)
	// dir is the data folder whose container, shares and run files the
	// VM uses; empty is env's. No two running VMs may share one.
	dir string
}

// bootSpec is the VM spec the app would use for this data dir.
func bootSpec(t testing.TB, o bootOpts) vm.Spec {
	spec, err := newSpec(o)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func newSpec(o bootOpts) (vm.Spec, error) {
	dir := o.dir
	if dir == "" {
		dir = env.dataDir
	}
	layout := provision.Layout{Dir: filepath.Join(dir, "container")}
	ws := filepath.Join(dir, "workspace")
	out := filepath.Join(dir, "output")
	for _, d := range []string{ws, out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return vm.Spec{}, err
		}
	}
	network := o.network
	if network == "" {
		network = vm.NetworkOutbound
	}
	accel := os.Getenv("OSAURUS_TEST_ACCEL")
	if accel == "" {
		accel = vm.AccelAuto
	}
	return vm.Spec{
		Kernel:     layout.Kernel(),
		Initramfs:  layout.Initramfs(),
		RootDisk:   layout.RootDisk(),
		Shares:     []vm.Share{{Tag: "workspace", HostPath: ws, GuestPath: "/workspace"}, {Tag: "output", HostPath: out, GuestPath: "/output"}},
		Network:    network,
		CPUs:       2,
		MemoryMiB:  1024,
		ConsoleLog: filepath.Join(dir, "console.log"),
		RunDir:     filepath.Join(dir, "run"),
		Accel:      accel,
		// As the app does: a kernel that loads modules boots on q35.
		ModularKernel: layout.ModularKernel(),
	}, nil
}

func newDriver() *qemu.Driver {
	return qemu.New(qemu.Config{StateDir: qemu.DefaultStateDir(), KillWithParent: true})
}

// boot starts a VM of the test's own on the test guest and stops it when
// the test ends. A test that needs no fresh VM uses sharedGuest instead
// (see its comment for which do).
func boot(t testing.TB, o bootOpts) *vm.Machine {
	t.Helper()
	requireGuest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m, err := vm.Boot(ctx, newDriver(), bootSpec(t, o), vm.Options{OnEvent: o.events})
	if err != nil {
		t.Fatalf("boot: %v\nconsole:\n%s", err, consoleTail())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		m.Stop(ctx)
	})
	return m
}

func consoleTail() string { return consoleTailOf(env.dataDir) }

// consoleTailOf is the end of the console log of the VM run from dir.
func consoleTailOf(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "console.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func readAll(resp *http.Response) ([]byte, error) {
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", resp.Request.URL, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// uidBlock hands each registry that creates users in the shared test
// guest its own range of Linux uids. The guest's root disk outlives each
// boot, so its /etc/passwd keeps every earlier test's agents, and a new
// registry starting at agents.FirstUID would be refused their uids, as a
// real guest rightly refuses a uid another user has. Registries of tests
// that copy the container (the CLI's) start at FirstUID: their copies
// only hold users from these blocks, which start well above it.
var uidBlock atomic.Int32

const uidBlockSize = 500

// openAgents opens the registry at path, seeding it first (seedAgents)
// when there is none.
func openAgents(t testing.TB, path string) *agents.Registry {
	t.Helper()
	if _, err := os.Stat(path); os.IsNotExist(err) {
		seedAgents(t, path)
	}
	reg, err := agents.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// seedAgents makes an empty registry at path that hands out uids in a
// block no other registry of this test binary uses, and removes the homes
// earlier tests' agents left in the shared workspace.
func seedAgents(t testing.TB, path string) {
	t.Helper()
	next := agents.FirstUID + 10000 + int(uidBlock.Add(1))*uidBlockSize
	if next+uidBlockSize > agents.LastUID {
		t.Fatalf("out of uid blocks for the shared guest (%d registries)", uidBlock.Load())
	}
	// Those homes are owned by the earlier agents' uids, and the guest
	// rightly refuses to hand one to a new agent of the same name.
	// Tests run one at a time, so no VM uses them now.
	// The folder itself stays: the shared guest is running, and a
	// folder removed behind VirtioFS can stay in the guest's cache, so
	// that a home made in it fails with ENOENT.
	for _, d := range []string{env.dataDir, sharedDir()} {
		homes, _ := filepath.Glob(filepath.Join(d, "workspace", "agents", "*"))
		for _, h := range homes {
			if err := os.RemoveAll(h); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	seed := fmt.Sprintf(`{"version":1,"agents":[],"nextUID":%d}`, next)
	if err := os.WriteFile(path, []byte(seed), 0o600); err != nil {
		t.Fatal(err)
	}
}

// str is v as a string, or "" when it is none: a tool result that lacks a
// field fails the assertion that reads it instead of panicking the whole
// test binary.
func str(v any) string {
	s, _ := v.(string)
	return s
}
