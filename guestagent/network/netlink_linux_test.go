//go:build linux

package network

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// inNetns runs fn on a thread in a fresh network namespace. The thread is
// never unlocked, so the runtime discards it together with the namespace.
func inNetns(t *testing.T, fn func() error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("run as root: this test builds a network namespace with a tap interface, which needs CAP_NET_ADMIN and CAP_SYS_ADMIN (sudo go test); the package's other tests need no root")
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		errc <- fn()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// createTap makes a tap interface that lives as long as the returned fd.
func createTap(name string) (int, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /dev/net/tun (modprobe tun): %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("TUNSETIFF: %w", err)
	}
	return fd, nil
}

func TestConfigureInterface(t *testing.T) {
	inNetns(t, func() error {
		if err := LinkUp("lo"); err != nil {
			return err
		}
		if lo, err := net.InterfaceByName("lo"); err != nil || lo.Flags&net.FlagUp == 0 {
			return fmt.Errorf("lo not up: %+v %v", lo, err)
		}
		fd, err := createTap("tap7")
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		addr := netip.MustParsePrefix("10.0.2.15/24")
		gw := netip.MustParseAddr("10.0.2.2")
		// Twice: a re-run (agent restart) must not fail on existing state.
		for range 2 {
			if err := ConfigureInterface("tap7", addr, gw); err != nil {
				return err
			}
		}
		ifi, err := net.InterfaceByName("tap7")
		if err != nil {
			return err
		}
		if ifi.Flags&net.FlagUp == 0 {
			return fmt.Errorf("tap7 not up: %v", ifi.Flags)
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			return err
		}
		var v4 []string
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
				v4 = append(v4, p.String())
			}
		}
		if len(v4) != 1 || v4[0] != "10.0.2.15/24" {
			return fmt.Errorf("tap7 IPv4 addresses %v, want 10.0.2.15/24", v4)
		}
		// /proc/thread-self: /proc/self/net would show the process's
		// namespace, not this thread's.
		routes, err := os.ReadFile("/proc/thread-self/net/route")
		if err != nil {
			return err
		}
		// Destination 0.0.0.0, gateway 10.0.2.2 in little-endian hex.
		if !strings.Contains(string(routes), "tap7\t00000000\t0202000A") {
			return fmt.Errorf("no default route via 10.0.2.2:\n%s", routes)
		}
		if err := ConfigureInterface("missing0", addr, gw); err == nil {
			return fmt.Errorf("configuring a missing interface succeeded")
		}
		return nil
	})
}

func TestFirstInterface(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"lo", "eth1", "enp0s2"} {
		os.Mkdir(dir+"/"+n, 0o755)
	}
	if got, err := FirstInterface(dir, 0); err != nil || got != "enp0s2" {
		t.Fatalf("FirstInterface = %q, %v", got, err)
	}
	empty := t.TempDir()
	os.Mkdir(empty+"/lo", 0o755)
	if _, err := FirstInterface(empty, 0); err == nil {
		t.Fatal("found an interface where only lo exists")
	}
}
