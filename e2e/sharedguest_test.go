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
	"sync/atomic"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/bridge"
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
// Tests stay independent: each gets its agents and users fresh (a new
// registry hands out uids no earlier registry used, see openAgents), and
// at its end every Linux user it added in the guest is deleted, which
// kills their processes and frees their cgroups, namespaces and private
// /tmp. What a test changes as root in the guest (files, addresses, a
// server it starts) outlives it, so such changes use names and addresses
// no other test uses.
var shared struct {
	once sync.Once
	m    *vm.Machine
	err  error
	// bridge serves the guest's bridge calls for the test running now:
	// a guest session has one server of calls, so the tests' bridges
	// take turns behind it (see attachBridge).
	bridge atomic.Pointer[bridge.Server]
	mu     sync.Mutex // held by the test using the guest
	last   string     // the test that used it last
	// casTrusted: the host's extra CAs are installed (trustHostCAs).
	casTrusted bool
}

// sharedDir is the shared guest's data folder: its own copy of the
// container (two VMs never share a root disk), shares and run files.
func sharedDir() string { return filepath.Join(env.dataDir, "shared") }

// sharedGuest returns the shared booted guest, booting it on first use.
// When t ends, the users t added in the guest are deleted.
func sharedGuest(t testing.TB) *vm.Machine {
	t.Helper()
	requireGuest(t)
	shared.once.Do(func() { shared.m, shared.err = bootShared() })
	if shared.err != nil {
		t.Fatalf("shared test guest: %v", shared.err)
	}
	if !shared.mu.TryLock() {
		t.Fatal("the shared test guest is in use by another test: tests that share it must not run in parallel")
	}
	if err := shared.m.Err(); err != nil {
		shared.mu.Unlock()
		t.Fatalf("the shared test guest stopped during %s, which used it last: %v\nconsole:\n%s", shared.last, err, consoleTailOf(sharedDir()))
	}
	shared.last = t.Name()
	g := shared.m.Agent()
	before, err := guestUsers(g)
	if err != nil {
		shared.mu.Unlock()
		t.Fatalf("shared test guest: %v", err)
	}
	t.Cleanup(func() {
		defer shared.mu.Unlock()
		shared.bridge.Store(nil)
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
	return shared.m
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

// bootShared copies the provisioned container and boots it, with
// osaurus-host installed and the guest's bridge calls routed to the
// bridge of the test running now.
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
	mux := agentproto.NewMux()
	mux.Handle(agentproto.OpBridge, func(ctx context.Context, c *agentproto.Call) error {
		br := shared.bridge.Load()
		if br == nil {
			return fmt.Errorf("%w: no bridge is attached to the shared test guest (attachBridge)", agentproto.ErrUnavailable)
		}
		return br.Handle(ctx, c)
	})
	go g.Peer.Serve(context.Background(), mux)
	return m, nil
}

// attachBridge serves m's bridge calls with br until t ends. On a VM of
// the test's own that is br.Attach; the shared guest's one server of
// calls hands them to br instead.
func attachBridge(t testing.TB, m *vm.Machine, br *bridge.Server) {
	t.Helper()
	if m != shared.m {
		br.Attach(context.Background(), m.Agent())
		return
	}
	shared.bridge.Store(br)
	t.Cleanup(func() { shared.bridge.CompareAndSwap(br, nil) })
}

// dataDirOf is the data folder m runs from (its shares live there).
func dataDirOf(m *vm.Machine) string {
	if m != nil && m == shared.m {
		return sharedDir()
	}
	return env.dataDir
}

// stopSharedGuest stops the shared guest, if a test booted it.
func stopSharedGuest() error {
	if shared.m == nil {
		return nil
	}
	// Stop kills the VM if it has not powered off by then, and returns
	// once its processes are gone.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return shared.m.Stop(ctx)
}
