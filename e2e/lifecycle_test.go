//go:build linux

package e2e

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/provision/download"
	"github.com/osaurus/osaurus-sandbox/sandbox"
	"github.com/osaurus/osaurus-sandbox/vm/qemu"
)

// copyContainer gives a test its own data dir holding a copy of the shared
// provision (sparse copy of the root disk), so it need not build another.
func copyContainer(t testing.TB) config.Paths {
	t.Helper()
	p := config.Paths{Root: t.TempDir()}
	if out, err := exec.Command("cp", "-a", "--sparse=always", env.layout.Dir, p.ContainerDir()).CombinedOutput(); err != nil {
		t.Fatalf("copy container: %v: %s", err, out)
	}
	if err := config.SaveSandbox(p.SandboxJSON(), testConfig(t)); err != nil {
		t.Fatal(err)
	}
	return p
}

// testConfig is the defaults with a port for MCP over HTTP chosen by the
// test, so an owner it starts never collides with the developer's app
// (or another test) on the default port.
func testConfig(t testing.TB) config.Sandbox {
	t.Helper()
	cfg := config.Defaults()
	cfg.MCPPort = freePort(t)
	return cfg
}

// freePort returns a loopback port nothing listened on a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// switchableServer serves the test guest until turned off, to prove that
// provisioning again works offline.
type switchableServer struct {
	*httptest.Server
	mu  sync.Mutex
	off bool
}

func newSwitchableServer(t testing.TB) *switchableServer {
	t.Helper()
	s := &switchableServer{}
	files := http.FileServer(http.Dir(os.Getenv("OSAURUS_TEST_GUEST")))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		off := s.off
		s.mu.Unlock()
		if off {
			hj, _ := w.(http.Hijacker)
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close() // like a network that is down
			}
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *switchableServer) setOff(off bool) {
	s.mu.Lock()
	s.off = off
	s.mu.Unlock()
}

func newTestManager(t testing.TB, p config.Paths, srv *switchableServer, o sandbox.Options) *sandbox.Manager {
	t.Helper()
	cfg := testConfig(t)
	cfg.ImageManifest = srv.URL + "/manifest.json"
	cfg.DiagnosticsURL = srv.URL + "/manifest.json"
	if a := os.Getenv("OSAURUS_TEST_ACCEL"); a != "" {
		cfg.Accel = a
	}
	if err := config.SaveSandbox(p.SandboxJSON(), cfg); err != nil {
		t.Fatal(err)
	}
	var manifestCache []byte
	o.Paths = p
	o.Driver = qemu.New(qemu.Config{StateDir: qemu.DefaultStateDir(), KillWithParent: true})
	o.Agent = assets.GuestAgent
	// The app's bridge hook: osaurus-host copied in, guest calls served.
	br := bridge.New(bridge.Options{HostCLI: assets.HostCLI})
	t.Cleanup(func() { br.Close() })
	o.OnGuest = br.Attach
	o.Download = &download.Client{}
	o.Manifest = func(ctx context.Context, cfg config.Sandbox) (*provision.Manifest, error) {
		// Like the app: fetch, else fall back to the copy from last time.
		resp, err := http.Get(cfg.ImageManifest)
		if err == nil {
			b, rerr := readAll(resp)
			resp.Body.Close()
			if rerr == nil {
				manifestCache = b
			}
		}
		if manifestCache == nil {
			return nil, errors.New("manifest unreachable and never fetched")
		}
		return provision.ParseManifest(manifestCache, cfg.ImageManifest)
	}
	m := sandbox.New(o)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		m.Close(ctx, true)
	})
	return m
}

// TestLifecycle walks a user's first day: provision (interrupted, then
// again, then offline), concurrent starts, diagnostics, a crash and the
// restart policy, stop, reset keeping the workspace, remove. The subtests
// share one manager, to boot as few times as the walk needs, but none
// relies on an earlier one: each brings the sandbox to the state it
// starts from (so each also runs alone, with -run).
func TestLifecycle(t *testing.T) {
	requireGuest(t)
	srv := newSwitchableServer(t)
	p := config.Paths{Root: t.TempDir()}
	m := newTestManager(t, p, srv, sandbox.Options{RestartDelay: 100 * time.Millisecond})
	ctx := context.Background()
	provisioned := func(t *testing.T) {
		t.Helper()
		if m.Status().State == control.NotProvisioned {
			if err := m.Provision(ctx); err != nil {
				t.Fatalf("provision: %v", err)
			}
		}
	}
	stopped := func(t *testing.T) {
		t.Helper()
		provisioned(t)
		if err := m.Stop(ctx); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	running := func(t *testing.T) {
		t.Helper()
		provisioned(t)
		if err := m.Start(ctx); err != nil {
			t.Fatalf("start: %v", err)
		}
	}

	t.Run("an interrupted provision retries cleanly", func(t *testing.T) {
		if m.Status().State != control.NotProvisioned {
			if err := m.Remove(ctx); err != nil {
				t.Fatalf("remove: %v", err)
			}
		}
		pctx, cancel := context.WithCancel(ctx)
		var once sync.Once
		stop := m.Subscribe(func(st control.Status) {
			if st.Progress != nil && st.Progress.Phase == "rootfs" && st.Progress.Done > 10<<20 {
				once.Do(cancel)
			}
		})
		err := m.Provision(pctx)
		stop()
		cancel()
		if err == nil {
			t.Fatal("provision finished despite the cancel")
		}
		if st := m.Status(); st.State != control.NotProvisioned {
			t.Fatalf("after cancel: %+v", st)
		}
		if _, err := os.Stat(provision.Layout{Dir: p.ContainerDir()}.StateFile()); !os.IsNotExist(err) {
			t.Fatal("a cancelled provision left a provisioned marker")
		}
		if err := m.Provision(ctx); err != nil {
			t.Fatal(err)
		}
		if st := m.Status(); st.State != control.Stopped {
			t.Fatalf("after provision: %+v", st)
		}
	})

	t.Run("provisioning again works offline", func(t *testing.T) {
		stopped(t) // provisioned once, online: the manifest is cached
		srv.setOff(true)
		defer srv.setOff(false)
		if err := m.Provision(ctx); err != nil {
			t.Fatalf("offline re-provision: %v", err)
		}
	})

	t.Run("concurrent starts share one boot", func(t *testing.T) {
		stopped(t)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() { defer wg.Done(); errs <- m.Start(ctx) }()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		st := m.Status()
		if st.State != control.Running || st.Pid == 0 {
			t.Fatalf("status %+v", st)
		}
		if n := countQEMU(p); n != 1 {
			t.Fatalf("%d QEMU processes for this data dir, want 1", n)
		}
	})

	t.Run("diagnostics pass", func(t *testing.T) {
		running(t)
		a := runningAgent(t, m)
		cfg, _ := config.LoadSandbox(p.SandboxJSON())
		env := diagnostics.Env{Agent: a, PackageManager: a.Info.PackageMgr, NATURL: strings.Replace(cfg.DiagnosticsURL, "127.0.0.1", "10.0.2.2", 1), Bridge: diagnostics.CheckBridge}
		var live []string
		var mu sync.Mutex
		rs := diagnostics.Run(ctx, env, diagnostics.Checks(), func(r diagnostics.Result) {
			mu.Lock()
			live = append(live, r.Name)
			mu.Unlock()
		})
		if len(rs) == 0 || len(rs) != len(diagnostics.Checks()) {
			t.Fatalf("%d results for %d checks", len(rs), len(diagnostics.Checks()))
		}
		for _, r := range rs {
			t.Logf("%-16s %-13s %6s %s", r.Name, r.Outcome, r.Duration, r.Detail)
			if r.Outcome != diagnostics.Pass {
				t.Errorf("%s: %s (%s), want pass", r.Name, r.Outcome, r.Detail)
			}
		}
		if len(live) != len(rs) {
			t.Errorf("live results %v", live)
		}
	})

	t.Run("a killed QEMU is restarted", func(t *testing.T) {
		running(t)
		before := m.Status()
		if err := syscall.Kill(before.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var st control.Status
		testwait.Eventually(t, "the killed VM to be restarted", 5*time.Minute, 200*time.Millisecond, func() bool {
			st = m.Status()
			return st.State == control.Running && st.Pid != before.Pid
		})
		if st.Restarts != before.Restarts+1 {
			t.Errorf("restarts = %d after %d, want one more", st.Restarts, before.Restarts)
		}
		if _, err := m.Agent(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("reset keeps the workspace", func(t *testing.T) {
		running(t)
		a := runningAgent(t, m)
		if _, err := a.WriteFile(ctx, agentproto.WriteFileRequest{Path: "/workspace/agents/keep/notes.txt", Data: []byte("precious"), MakeParents: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.WriteFile(ctx, agentproto.WriteFileRequest{Path: "/root/installed-thing", Data: []byte("gone after reset")}); err != nil {
			t.Fatal(err)
		}
		if err := m.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		a = runningAgent(t, m)
		r, err := a.ReadFile(ctx, agentproto.ReadFileRequest{Path: "/workspace/agents/keep/notes.txt"})
		if err != nil || string(r.Data) != "precious" {
			t.Fatalf("workspace after reset: %q %v", r.Data, err)
		}
		if _, err := a.Stat(ctx, agentproto.PathRequest{Path: "/root/installed-thing"}); !errors.Is(err, agentproto.ErrNotFound) {
			t.Fatalf("root disk was not rebuilt: %v", err)
		}
	})

	t.Run("stop, then remove keeps the workspace", func(t *testing.T) {
		running(t)
		if _, err := runningAgent(t, m).WriteFile(ctx, agentproto.WriteFileRequest{Path: "/workspace/agents/kept/notes.txt", Data: []byte("precious"), MakeParents: true}); err != nil {
			t.Fatal(err)
		}
		if err := m.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if st := m.Status(); st.State != control.Stopped {
			t.Fatalf("after stop: %+v", st)
		}
		if n := countQEMU(p); n != 0 {
			t.Fatalf("%d QEMU processes left after stop", n)
		}
		if err := m.Remove(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p.ContainerDir()); !os.IsNotExist(err) {
			t.Fatalf("container left after remove: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(p.Workspace(), "agents", "kept", "notes.txt")); err != nil || string(b) != "precious" {
			t.Fatalf("workspace after remove: %q %v", b, err)
		}
		if st := m.Status(); st.State != control.NotProvisioned {
			t.Fatalf("after remove: %+v", st)
		}
	})
}

// TestNATDiagnosticFailsWithoutNetwork: network none gives the guest no
// NIC, the NAT check fails with its hint and the others still pass.
func TestNATDiagnosticFailsWithoutNetwork(t *testing.T) {
	requireGuest(t)
	srv := newSwitchableServer(t)
	p := copyContainer(t)
	m := newTestManager(t, p, srv, sandbox.Options{})
	cfg, _ := config.LoadSandbox(p.SandboxJSON())
	cfg.Network = "none"
	config.SaveSandbox(p.SandboxJSON(), cfg)
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	a := runningAgent(t, m)
	// No network controller on the bus (the guest would not load a NIC's
	// driver with network none, so /sys/class/net alone can't tell), and
	// no interface but lo.
	if out, _, _ := sh(t, a, "", "grep -l '^0x0200' /sys/bus/pci/devices/*/class; ls /sys/class/net"); strings.Join(strings.Fields(out), " ") != "lo" {
		t.Fatalf("network devices with network none: %q, want only lo", out)
	}
	checks := []diagnostics.Check{}
	for _, c := range diagnostics.Checks() {
		if c.Name == "nat" || c.Name == "exec" {
			checks = append(checks, c)
		}
	}
	rs := diagnostics.Run(ctx, diagnostics.Env{Agent: a, NATURL: strings.Replace(srv.URL, "127.0.0.1", "10.0.2.2", 1)}, checks, nil)
	if len(rs) != 2 {
		t.Fatalf("%d results, want the nat and exec checks': %+v", len(rs), rs)
	}
	for _, r := range rs {
		switch r.Name {
		case "exec":
			if r.Outcome != diagnostics.Pass {
				t.Errorf("exec: %+v", r)
			}
		case "nat":
			if r.Outcome != diagnostics.Fail || !strings.Contains(r.Hint, "outbound") {
				t.Errorf("nat with network none: %+v, want a failure whose hint mentions outbound", r)
			}
		}
	}
}

// TestCrashedOwnerVMIsAdopted: a manager (the app) dies while the VM runs;
// the next one adopts the VM instead of leaving it orphaned.
func TestCrashedOwnerVMIsAdopted(t *testing.T) {
	requireGuest(t)
	srv := newSwitchableServer(t)
	p := copyContainer(t)
	first := newTestManager(t, p, srv, sandbox.Options{})
	ctx := context.Background()
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pid := first.Status().Pid
	// Simulate the app dying: drop the manager without stopping the VM.
	first.Close(ctx, false)

	second := newTestManager(t, p, srv, sandbox.Options{})
	if err := second.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	st := second.Status()
	if st.State != control.Running || st.Pid != pid {
		t.Fatalf("after recover: %+v, want running pid %d", st, pid)
	}
	a := runningAgent(t, second)
	out, _, _, err := a.Output(ctx, agentproto.ExecRequest{Shell: "echo adopted"})
	if err != nil || string(out) != "adopted\n" {
		t.Fatalf("exec on adopted VM: %q %v", out, err)
	}
	if err := second.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countQEMU(p) + countProcs(p, "virtiofsd"); n != 0 {
		t.Fatalf("%d QEMU or virtiofsd processes left", n)
	}
}

// countQEMU counts live QEMU processes started for a data dir.
func countQEMU(p config.Paths) int { return countProcs(p, "qemu-system") }

// countProcs counts live processes whose command line names program and
// the data dir's run folder (QEMU, virtiofsd).
func countProcs(p config.Paths, program string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), program) && strings.Contains(string(b), p.Run()+"/") {
			n++
		}
	}
	return n
}

// runningAgent is the running VM's agent, or the end of this (sub)test when
// an earlier step left no VM: a failed start must fail the steps after it,
// not panic the whole test binary.
func runningAgent(t *testing.T, m *sandbox.Manager) *agentproto.Client {
	t.Helper()
	a, err := m.Agent()
	if err != nil {
		t.Fatalf("no running VM (an earlier step failed?): %v", err)
	}
	return a
}
