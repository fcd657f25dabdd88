//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/vm"
)

// The shared guest is one VM, booted by the first test that asks for it
// and stopped by TestMain, that every test needing no fresh VM of its own
// uses: booting takes most of a minute under TCG, and most tests only need
// a running guest and agents of their own. A test keeps its own VM (boot)
// when it stops, kills, restarts or crashes the VM, needs options at boot
// (network mode, events, host addresses the boot hello reports), or runs
// the CLI or the owner on a data folder of its own. Attacks on PID 1 and
// on the per-agent limits share it: they assert the guest survives, and
// if it didn't, every later test says which earlier test stopped it.
//
// Between tests nobody is attached to it. A test takes it in one of two
// ways, both the ways a real process does: sharedHost makes a real owner
// (host.Host) of its data folder, which adopts the running VM as an owner
// adopts the VM a dead predecessor left; sharedGuest attaches a session
// of its own (vm.Attach), for tests of the guest and of parts below the
// owner. When the test ends its session lets go (vm.Machine.Detach) and
// the VM keeps running.
//
// Tests stay independent: each gets its agents and users fresh (a new
// registry hands out uids no earlier registry used, see seedAgents), a
// Host gets the folder's data files fresh, and at its end every Linux
// user it added in the guest is deleted, which kills their processes and
// frees their cgroups, namespaces and private /tmp. What a test changes as
// root in the guest (files, addresses, a server it starts) outlives it,
// so such changes use names and addresses no other test uses.
var shared struct {
	once sync.Once
	err  error
	// booted is the machine as booted, detached at once: its Done says
	// when the QEMU process ends, and its pid must not change.
	booted *vm.Machine
	mu     sync.Mutex // held by the test using the guest
	last   string     // the test that used it last
	// casTrusted: the host's extra CAs are installed (trustHostCAs).
	casTrusted bool
	// owner is the test's owner of the guest (sharedHost), if any.
	owner *host.Host
}

// sharedDir is the shared guest's data folder: its own copy of the
// container (two VMs never share a root disk), settings, shares and run
// files; the data files of the test's owner while one runs.
func sharedDir() string { return filepath.Join(env.dataDir, "shared") }

// sharedPaths is sharedDir as a data folder.
func sharedPaths() config.Paths { return config.Paths{Root: sharedDir()} }

// takeShared boots the shared guest on first use and makes t its user
// until t ends.
func takeShared(t testing.TB) {
	t.Helper()
	requireGuest(t)
	shared.once.Do(func() { shared.booted, shared.err = bootShared() })
	if shared.err != nil {
		t.Fatalf("shared test guest: %v", shared.err)
	}
	if !shared.mu.TryLock() {
		t.Fatal("the shared test guest is in use by another test: tests that share it must not run in parallel")
	}
	select {
	case <-shared.booted.Done():
		shared.mu.Unlock()
		t.Fatalf("the shared test guest stopped during %s, which used it last\nconsole:\n%s", shared.last, consoleTailOf(sharedDir()))
	default:
	}
	shared.last = t.Name()
	t.Cleanup(shared.mu.Unlock)
}

// sharedGuest returns a session of t's own with the shared booted guest.
// When t ends, the users t added in the guest are deleted and the
// session lets go of the VM.
func sharedGuest(t testing.TB) *vm.Machine {
	t.Helper()
	takeShared(t)
	spec, err := newSpec(bootOpts{dir: sharedDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := vm.Attach(ctx, newDriver(), spec, vm.Options{})
	if err != nil {
		t.Fatalf("attaching to the shared test guest: %v\nconsole:\n%s", err, consoleTailOf(sharedDir()))
	}
	t.Cleanup(m.Detach)
	deleteAddedUsers(t, m.Agent)
	return m
}

// sharedHost returns a real owner of the shared guest's data folder for
// t, as `serve` makes one: it adopted the running guest and serves the
// control socket and MCP over HTTP (on a port of its own), with the
// owner's redactor (the keychain), reviewer, exposer, bridge and disk
// monitor. The folder's data files (agents, plugins, memory, events,
// projects, bridge config, tasks) start empty; the settings are fn's
// changes to the test defaults. When t ends the users t added in the
// guest are deleted, the owner closes and lets go of the VM, which keeps
// running.
func sharedHost(t testing.TB, fn func(*config.Sandbox)) *host.Host {
	t.Helper()
	takeShared(t)
	p := sharedPaths()
	if err := resetData(p); err != nil {
		t.Fatal(err)
	}
	cfg := sharedConfig(t)
	if fn != nil {
		fn(&cfg)
	}
	h := newHost(t, p, cfg)
	adopted(t, h)
	shared.owner = h
	t.Cleanup(func() {
		h := shared.owner
		shared.owner = nil
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// As an owner that exits without Quit: the VM keeps running for
		// the next one.
		if err := h.Manager().Close(ctx, false); err != nil {
			t.Errorf("letting go of the shared test guest: %v", err)
		}
		if st := h.Manager().Status(); st.Restarts != 0 {
			t.Errorf("the shared test guest crashed during the test and was restarted: %+v", st)
		}
	})
	deleteAddedUsers(t, func() *agentproto.Client { return ownerAgent(t, shared.owner) })
	return h
}

// adopted fails t unless h runs the shared guest.
func adopted(t testing.TB, h *host.Host) {
	t.Helper()
	if st := h.Manager().Status(); st.State != control.Running || st.Pid != shared.booted.Info().Pid {
		t.Fatalf("the owner did not adopt the shared test guest (pid %d): %+v\nconsole:\n%s", shared.booted.Info().Pid, st, consoleTailOf(sharedDir()))
	}
}

// restartShared is the app restarting: the owner h of the shared guest's
// data folder exits, leaving the VM running, and the next owner adopts
// it, with the data files as h left them.
func restartShared(t testing.TB, h *host.Host) *host.Host {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Manager().Close(ctx, false); err != nil {
		t.Fatal(err)
	}
	h.Close()
	cfg, err := config.LoadSandbox(h.Paths().SandboxJSON())
	if err != nil {
		t.Fatal(err)
	}
	next := newHost(t, h.Paths(), cfg)
	adopted(t, next)
	shared.owner = next
	return next
}

// newHost opens a real owner of p with settings cfg (host.New, as `serve`
// does), with QEMU set to die with the test binary; it is closed when t
// ends, before the cleanups t registers afterwards.
func newHost(t testing.TB, p config.Paths, cfg config.Sandbox) *host.Host {
	t.Helper()
	if err := config.SaveSandbox(p.SandboxJSON(), cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.AgentsJSON()); os.IsNotExist(err) {
		seedAgents(t, p.AgentsJSON())
	}
	logf, stop := ownerLog(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	h, err := host.New(ctx, host.Options{Paths: p, Kind: "serve", Logf: logf, Version: "e2e", Driver: newDriver()})
	if err != nil {
		t.Fatalf("owner of %s: %v", p.Root, err)
	}
	t.Cleanup(func() { h.Close(); stop() })
	return h
}

// ownerLog is the owner's log, in t's, until stop: the owner's
// goroutines may still log while it closes.
func ownerLog(t testing.TB) (logf func(string, ...any), stop func()) {
	var mu sync.Mutex
	done := false
	return func(f string, a ...any) {
			mu.Lock()
			defer mu.Unlock()
			if !done {
				t.Logf("owner: "+f, a...)
			}
		}, func() {
			mu.Lock()
			done = true
			mu.Unlock()
		}
}

// sharedConfig is the settings of the shared guest's VM, as newSpec boots
// it, with a port for MCP over HTTP of the test's own.
func sharedConfig(t testing.TB) config.Sandbox {
	cfg := testConfig(t)
	cfg.CPUs, cfg.MemoryGB, cfg.Network, cfg.AutoStart = 2, 1, vm.NetworkOutbound, false
	// An apply's automatic checkpoint copies the shared guest's disk;
	// TestProjects turns it on and checks it.
	cfg.SafetyCheckpoints = 0
	if a := os.Getenv("OSAURUS_TEST_ACCEL"); a != "" {
		cfg.Accel = a
	}
	return cfg
}

// ownerAgent is the running VM's agent of the owner h.
func ownerAgent(t testing.TB, h *host.Host) *agentproto.Client {
	t.Helper()
	g, err := h.Manager().Agent()
	if err != nil {
		t.Fatalf("the owner's VM: %v", err)
	}
	return g
}

// hostGuest is the root agent of an owner's VM, for tests that work as
// root in the guest beside the owner.
type hostGuest struct {
	t testing.TB
	h *host.Host
}

func (g hostGuest) Agent() *agentproto.Client { return ownerAgent(g.t, g.h) }

// keptData is what resetData keeps of the shared data folder: the VM's
// disk, shares, run files and logs, and the settings.
var keptData = map[string]bool{"container": true, "workspace": true, "output": true, "run": true, "logs": true, "console.log": true}

// resetData deletes the data files of p's last owner: a new owner starts
// with none.
func resetData(p config.Paths) error {
	ents, err := os.ReadDir(p.Root)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !keptData[e.Name()] {
			if err := os.RemoveAll(filepath.Join(p.Root, e.Name())); err != nil {
				return err
			}
		}
	}
	for _, f := range []string{p.PreviewsFile(), p.DiskUsageFile(), p.AgentLogDir()} {
		if err := os.RemoveAll(f); err != nil {
			return err
		}
	}
	return nil
}

// deleteAddedUsers deletes, when t ends, the guest users t added. agent
// is the session to do it with, then.
func deleteAddedUsers(t testing.TB, agent func() *agentproto.Client) {
	t.Helper()
	before, err := guestUsers(agent())
	if err != nil {
		t.Fatalf("shared test guest: %v", err)
	}
	t.Cleanup(func() {
		g := agent()
		after, err := guestUsers(g)
		if err != nil {
			t.Errorf("shared test guest: %v", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var deleted []string
		for name, uid := range after {
			if was, ok := before[name]; ok && was == uid {
				continue
			}
			deleted = append(deleted, name)
			if err := g.UserDel(ctx, agentproto.UserDelRequest{Name: name, RemoveHome: true}); err != nil && !errors.Is(err, agentproto.ErrNoSuchUser) {
				t.Errorf("shared test guest: deleting the test's user %s: %v", name, err)
			}
			// A block lives in the agent's memory by name, past the user.
			if err := g.UserLimit(ctx, agentproto.UserLimitRequest{Name: name, Blocked: false}); err != nil {
				t.Errorf("shared test guest: unblocking the test's user %s: %v", name, err)
			}
		}
		t.Logf("shared test guest: deleted the users this test added: %v", deleted)
	})
}

// guestUsers are the guest's accounts with uids at or above the first
// one the guest hands out, with their uids (a test may add a user under
// the name an earlier test's user had).
func guestUsers(g *agentproto.Client) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := g.ReadFile(ctx, agentproto.ReadFileRequest{Path: "/etc/passwd"})
	if err != nil {
		return nil, fmt.Errorf("reading /etc/passwd: %w", err)
	}
	users := map[string]int{}
	for l := range strings.Lines(string(r.Data)) {
		f := strings.Split(l, ":")
		if len(f) < 3 {
			continue
		}
		if uid, err := strconv.Atoi(f[2]); err == nil && uid >= 1000 && uid != 65534 {
			users[f[0]] = uid
		}
	}
	return users, nil
}

// bootShared copies the provisioned container and boots it with
// osaurus-host installed, then lets go of it.
func bootShared() (*vm.Machine, error) {
	dir := sharedDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if out, err := exec.Command("cp", "-a", "--sparse=always", env.layout.Dir, filepath.Join(dir, "container")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copy container: %v: %s", err, out)
	}
	spec, err := newSpec(bootOpts{dir: dir})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m, err := vm.Boot(ctx, newDriver(), spec, vm.Options{})
	if err != nil {
		return nil, fmt.Errorf("boot: %w\nconsole:\n%s", err, consoleTailOf(dir))
	}
	g := m.Agent()
	bin, err := assets.HostCLI(g.Info.Arch)
	if err == nil {
		_, err = bridge.InstallHostCLI(ctx, g, bin)
	}
	if err != nil {
		m.Stop(ctx)
		return nil, fmt.Errorf("installing osaurus-host: %w", err)
	}
	m.Detach()
	return m, nil
}

// attachBridge serves the bridge calls of m, a session of the test's own,
// with br until the session ends.
func attachBridge(t testing.TB, m *vm.Machine, br *bridge.Server) {
	t.Helper()
	br.Attach(context.Background(), m.Agent())
}

// dataDirOf is the data folder m runs from (its shares live there).
func dataDirOf(m *vm.Machine) string {
	if m != nil && shared.booted != nil && m.Info().Pid == shared.booted.Info().Pid {
		return sharedDir()
	}
	return env.dataDir
}

// stopSharedGuest stops the shared guest, if a test booted it: it
// attaches and asks the guest to power off.
func stopSharedGuest() error {
	if shared.booted == nil {
		return nil
	}
	select {
	case <-shared.booted.Done():
		return nil
	default:
	}
	spec, err := newSpec(bootOpts{dir: sharedDir()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := vm.Attach(ctx, newDriver(), spec, vm.Options{})
	if err != nil {
		return err
	}
	// Stop kills the VM if it has not powered off by then, and returns
	// once its processes are gone.
	return m.Stop(ctx)
}
