//go:build linux

package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/vm"
)

// standInEnv makes this test binary act as qemu-system-*: under accel=kvm
// it fails the way the environment variable says (abort, exit, hang); under
// accel=tcg it serves the guest agent's handshake on the agent socket, as a
// booted guest would.
const standInEnv = "OSAURUS_STAND_IN_QEMU"

func TestMain(m *testing.M) {
	if mode := os.Getenv(standInEnv); mode != "" {
		os.Exit(standInQEMU(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func standInQEMU(mode string, args []string) int {
	var accel, agentSock, pidFile string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "-machine":
			_, accel, _ = strings.Cut(args[i+1], "accel=")
		case "-chardev":
			if strings.HasPrefix(args[i+1], "socket,id=agent,") {
				for _, kv := range strings.Split(args[i+1], ",") {
					if p, ok := strings.CutPrefix(kv, "path="); ok {
						agentSock = p
					}
				}
			}
		case "-pidfile":
			pidFile = args[i+1]
		}
	}
	if pidFile != "" {
		os.WriteFile(pidFile, []byte(fmt.Sprint(os.Getpid())), 0o644)
	}
	if accel == vm.AccelKVM {
		switch mode {
		case "abort":
			// What QEMU prints on the hosts where it aborts under KVM.
			fmt.Fprintln(os.Stderr, "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x0")
			// QEMU then dies of SIGABRT; Go's runtime would catch that and
			// print its own dump, so the stand-in dies of a signal it can't.
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		case "exit":
			fmt.Fprintln(os.Stderr, "qemu-system-x86_64: failed to initialize kvm: Invalid argument")
			return 1
		case "hang":
			// A guest that never boots: wait to be killed.
			time.Sleep(time.Hour)
		}
		return 3
	}
	if agentSock == "" {
		fmt.Fprintln(os.Stderr, "stand-in qemu: no agent socket in", args)
		return 2
	}
	l, err := net.Listen("unix", agentSock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stand-in qemu:", err)
		return 2
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return 2
		}
		go func() {
			if err := agentproto.AcceptClaim(c); err != nil {
				return
			}
			peer, err := agentproto.NewServerPeer(c)
			if err != nil {
				return
			}
			mux := agentproto.NewMux()
			mux.Handle(agentproto.OpHello, agentproto.Unary(func(context.Context, *agentproto.HelloRequest) (*agentproto.HelloResponse, error) {
				return &agentproto.HelloResponse{Major: agentproto.VersionMajor, Minor: agentproto.VersionMinor, Distro: "stand-in"}, nil
			}))
			peer.Serve(context.Background(), mux)
		}()
	}
}

// TestAutoFallsBackToTCG boots through the real driver with a stand-in QEMU
// that fails under KVM in each way seen on real hosts, and checks that
// "auto" ends up running under TCG, says why, and remembers it.
func TestAutoFallsBackToTCG(t *testing.T) {
	for _, tc := range []struct {
		mode, reason string
	}{
		{"abort", "failed to set MSR"},
		{"exit", "failed to initialize kvm"},
		{"hang", "did not answer"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv(standInEnv, tc.mode)
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			d := New(Config{QEMU: exe, StateDir: state, KVMBootTimeout: 2 * time.Second,
				TCGBootTimeout: time.Minute, KillWithParent: true, NoVsock: true})
			d.kvmOpens = func() bool { return true } // /dev/kvm opens, as on the broken hosts
			spec := vm.Spec{RunDir: filepath.Join(dir, "run"), CPUs: 1, MemoryMiB: 256, Network: vm.NetworkNone}
			for _, f := range []*string{&spec.Kernel, &spec.Initramfs, &spec.RootDisk} {
				*f = filepath.Join(dir, fmt.Sprintf("f%p", f))
				if err := os.WriteFile(*f, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var events []vm.Event
			m, err := vm.Boot(context.Background(), d, spec, vm.Options{OnEvent: func(e vm.Event) { events = append(events, e) }})
			if err != nil {
				t.Fatalf("boot: %v", err)
			}
			defer func() { m.Kill(); <-m.Done() }()
			info := m.Info()
			if info.Accel != vm.AccelTCG {
				t.Fatalf("running under %s, want tcg", info.Accel)
			}
			if !strings.Contains(info.AccelReason, tc.reason) {
				t.Errorf("AccelReason %q does not say %q", info.AccelReason, tc.reason)
			}
			var retried bool
			for _, e := range events {
				retried = retried || (e.State == vm.StateStarting && e.Err != nil && strings.Contains(e.Err.Error(), tc.reason))
			}
			if !retried {
				t.Errorf("no starting event tells why KVM failed: %+v", events)
			}
			var rec accelRecord
			b, err := os.ReadFile(filepath.Join(state, "accel.json"))
			if err != nil || json.Unmarshal(b, &rec) != nil || !rec.KVMBroken || !strings.Contains(rec.Reason, tc.reason) {
				t.Fatalf("accel.json = %s (%v), want kvmBroken with the reason", b, err)
			}
			// A new driver (the next app start) goes straight to TCG.
			d2 := New(Config{QEMU: exe, StateDir: state})
			d2.kvmOpens = func() bool { return true }
			if a, auto, why := d2.chooseAccel(spec); a != vm.AccelTCG || !auto || why == "" {
				t.Errorf("next start chose %s (auto %v, reason %q), want tcg with a reason", a, auto, why)
			}
		})
	}
}

// TestExplicitKVMDoesNotFallBack: a user who asked for KVM gets its error.
func TestExplicitKVMDoesNotFallBack(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(standInEnv, "abort")
	dir := t.TempDir()
	d := New(Config{QEMU: exe, StateDir: dir, KVMBootTimeout: 2 * time.Second, KillWithParent: true, NoVsock: true})
	spec := vm.Spec{RunDir: filepath.Join(dir, "run"), CPUs: 1, MemoryMiB: 256, Network: vm.NetworkNone, Accel: vm.AccelKVM}
	for _, f := range []*string{&spec.Kernel, &spec.Initramfs, &spec.RootDisk} {
		*f = filepath.Join(dir, fmt.Sprintf("f%p", f))
		os.WriteFile(*f, nil, 0o644)
	}
	_, err = vm.Boot(context.Background(), d, spec, vm.Options{})
	if !errors.Is(err, vm.ErrVMDied) || !strings.Contains(err.Error(), "failed to set MSR") {
		t.Fatalf("err = %v, want the VM's death with QEMU's message", err)
	}
}
