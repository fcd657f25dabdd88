//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/vm"
	"github.com/osaurus/osaurus-sandbox/vm/qemu"
)

// bootMachine boots a VM of the test's own on the test guest with the
// given QEMU machine type and stops it when the test ends.
func bootMachine(t testing.TB, machine string) *vm.Machine {
	t.Helper()
	requireGuest(t)
	spec := bootSpec(t, bootOpts{})
	spec.Machine = machine
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m, err := vm.Boot(ctx, newDriver(), spec, vm.Options{})
	if err != nil {
		t.Fatalf("boot on %s: %v\nconsole:\n%s", machine, err, consoleTail())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		m.Stop(ctx)
	})
	return m
}

// qemuArgs is the command line of the machine's QEMU.
func qemuArgs(t testing.TB, m *vm.Machine) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(m.Info().Pid), "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// TestMicroVM boots the test guest on QEMU's microvm machine (virtio-mmio,
// no PCI) and checks what the product relies on there: the agent channel
// and exec, both VirtioFS shares, the NAT to the host's loopback, and an
// agent's cgroup limits. It needs a kernel with virtio-mmio built in (ours).
func TestMicroVM(t *testing.T) {
	requireGuest(t)
	if env.layout.ModularKernel() {
		t.Fatalf("the test guest's kernel loads modules, and microvm needs virtio-mmio built in: build the test guest with our kernel (make kernel test-guest)")
	}
	m := bootMachine(t, vm.MachineMicroVM)
	c := m.Agent()
	args := qemuArgs(t, m)
	if i := slices.Index(args, "-machine"); i < 0 || !strings.HasPrefix(args[i+1], "microvm,") {
		t.Fatalf("QEMU runs %q, want -machine microvm", args)
	}
	for _, a := range args {
		if strings.Contains(a, "-pci") {
			t.Errorf("a PCI device on microvm: %q", a)
		}
	}
	t.Logf("vm: %+v", m.Info())

	t.Run("exec", func(t *testing.T) {
		out, _, st := sh(t, c, "", "echo hello; ls /sys/bus/pci/devices 2>/dev/null | wc -l")
		if st.Code != 0 || out != "hello\n0\n" {
			t.Fatalf("exec: %q %+v (want no PCI devices)", out, st)
		}
		// Without ACPI under TCG there is no HPET or PM timer: worth
		// knowing when timings differ from q35.
		out, _, _ = sh(t, c, "", "cat /sys/devices/system/clocksource/clocksource0/current_clocksource")
		t.Logf("guest clocksource: %s", strings.TrimSpace(out))
	})

	t.Run("VirtioFS shares both ways", func(t *testing.T) {
		host := filepath.Join(env.dataDir, "workspace", "microvm-from-host.txt")
		if err := os.WriteFile(host, []byte("written on the host\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _, _ := sh(t, c, "", "cat /workspace/microvm-from-host.txt")
		if out != "written on the host\n" {
			t.Fatalf("guest read %q", out)
		}
		sh(t, c, "", "echo written in the guest > /output/microvm-from-guest.txt")
		b, err := os.ReadFile(filepath.Join(env.dataDir, "output", "microvm-from-guest.txt"))
		if err != nil || string(b) != "written in the guest\n" {
			t.Fatalf("host read %q, %v", b, err)
		}
	})

	t.Run("NAT reaches the host loopback", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "hello microvm")
		})}
		go srv.Serve(ln)
		defer srv.Close()
		url := fmt.Sprintf("http://10.0.2.2:%d/", ln.Addr().(*net.TCPAddr).Port)
		out, errOut, st := sh(t, c, "", "curl -sS --max-time 20 "+url)
		if st.Code != 0 || out != "hello microvm" {
			t.Fatalf("curl: %q %q %+v", out, errOut, st)
		}
	})

	t.Run("an agent's memory limit holds", func(t *testing.T) {
		ctx := context.Background()
		const user = "agent-microvm"
		if _, err := c.UserAdd(ctx, agentproto.UserAddRequest{Name: user, Home: "/home/" + user}); err != nil {
			t.Fatal(err)
		}
		limits := &agentproto.Limits{MaxProcesses: 64, MemoryMB: agentproto.MinMemoryMB, CPUWeight: agentproto.DefaultCPUWeight}
		// Holds 256 MiB in one process, four times the limit.
		_, _, st, err := c.Output(ctx, agentproto.ExecRequest{
			Identity: agentproto.Identity{User: user}, Limits: limits,
			Shell: "x=$(head -c 268435456 /dev/zero | tr '\\0' a); echo ${#x}",
		})
		if err != nil {
			t.Fatal(err)
		}
		if st.Limit != agentproto.LimitMemory {
			t.Fatalf("256 MiB under a %d MiB limit: %+v, want the memory limit hit", agentproto.MinMemoryMB, st)
		}
		out, _, _ := sh(t, c, "", "cat /sys/fs/cgroup/osaurus/user-"+user+"/memory.max")
		if strings.TrimSpace(out) != strconv.Itoa(agentproto.MinMemoryMB<<20) {
			t.Errorf("memory.max %q, want %d", out, agentproto.MinMemoryMB<<20)
		}
	})

	t.Run("stop leaves nothing running", func(t *testing.T) {
		// The app's stop timeout (sandbox.Options.StopTimeout's default).
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		if err := m.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		// How long is logged, not asserted: without ACPI the guest's
		// power-off only halts it, and the stop ends in a kill.
		t.Logf("stop took %v", time.Since(start).Round(time.Millisecond))
		if left := qemu.Helpers(filepath.Join(env.dataDir, "run")); len(left) > 0 {
			t.Fatalf("after stop, still running: %v", left)
		}
	})
}

// BenchmarkMachineTypes compares QEMU's x86_64 machine types on the test
// guest, interleaved: from vm.Boot to the first `true` run, and then one
// exec round trip of `true` (median of 10 on that boot), in alternating
// order. Each VM is killed after, as BenchmarkBootToFirstExec does.
// OSAURUS_BENCH_RUNS sets the number of rounds (default 5).
func BenchmarkMachineTypes(b *testing.B) {
	requireGuest(b)
	if env.layout.ModularKernel() {
		b.Fatalf("the test guest's kernel loads modules, and microvm needs virtio-mmio built in: build the test guest with our kernel (make kernel test-guest)")
	}
	runs := 5
	if s := os.Getenv("OSAURUS_BENCH_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("OSAURUS_BENCH_RUNS=%q: want a positive whole number", s)
		}
		runs = n
	}
	machines := []string{vm.MachineQ35, vm.MachineMicroVM}
	for b.Loop() {
		boots := map[string][]time.Duration{}
		execs := map[string][]time.Duration{}
		for i := range runs {
			order := machines
			if i%2 == 1 {
				// ABBA order: neither machine always boots first.
				order = []string{machines[1], machines[0]}
			}
			for _, machine := range order {
				bt, ex := bootOnce(b, machine)
				b.Logf("round %d %s: boot to first exec %v, exec true %v", i+1, machine, bt.Round(time.Millisecond), ex.Round(100*time.Microsecond))
				boots[machine] = append(boots[machine], bt)
				execs[machine] = append(execs[machine], ex)
			}
		}
		for _, machine := range machines {
			bt, ex := median(boots[machine]), median(execs[machine])
			b.Logf("%s: median boot to first exec %v, exec true %v (%d runs)", machine, bt.Round(time.Millisecond), ex.Round(100*time.Microsecond), runs)
			b.ReportMetric(bt.Seconds(), machine+"-boot-s")
			b.ReportMetric(float64(ex.Microseconds())/1000, machine+"-exec-ms")
		}
	}
}

// bootOnce boots the test guest on machine, runs `true` (the boot's end)
// and ten more, and kills the VM.
func bootOnce(b *testing.B, machine string) (boot, exec time.Duration) {
	spec := bootSpec(b, bootOpts{})
	spec.Machine = machine
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	m, err := vm.Boot(ctx, newDriver(), spec, vm.Options{})
	if err != nil {
		b.Fatalf("boot on %s: %v\nconsole:\n%s", machine, err, consoleTail())
	}
	defer m.Kill()
	run := func() {
		if st, err := m.Agent().Exec(ctx, agentproto.ExecRequest{Argv: []string{"true"}}, nil, nil, nil); err != nil || st.Code != 0 {
			b.Fatalf("exec true on %s: %+v %v", machine, st, err)
		}
	}
	run()
	boot = time.Since(start)
	// A faster boot that dropped a step (a share, the network) is no
	// result: the guest reports failed steps as warnings.
	if w := m.Guest().Warnings; len(w) > 0 {
		b.Errorf("%s: the guest booted with warnings: %q", machine, w)
	}
	// Where the time went: the guest's clock starts with its kernel.
	g, info := m.Guest(), m.Info()
	b.Logf("%s: QEMU start → first exec %v; guest uptime at the agent's hello %v", machine,
		time.Since(info.HypervisorStarted).Round(time.Millisecond), time.Duration(g.UptimeSeconds*float64(time.Second)).Round(time.Millisecond))
	var ds []time.Duration
	for range 10 {
		t0 := time.Now()
		run()
		ds = append(ds, time.Since(t0))
	}
	return boot, median(ds)
}
