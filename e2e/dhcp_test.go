//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/vm"
)

// bootDHCP boots the test guest with its NIC configured by the guest
// agent's DHCP client, which is how every vz guest gets its network. QEMU's
// slirp serves DHCP too, so the client runs against a real server here.
func bootDHCP(t *testing.T) *vm.Machine {
	t.Helper()
	requireGuest(t)
	spec := bootSpec(t, bootOpts{})
	spec.NetworkConfig = vm.NetworkConfigDHCP
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m, err := vm.Boot(ctx, newDriver(), spec, vm.Options{})
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

func TestDHCP(t *testing.T) {
	m := bootDHCP(t)
	c := m.Agent()
	if w := m.Guest().Warnings; len(w) > 0 {
		t.Errorf("boot warnings: %v", w)
	}

	// The guest must have been told to use DHCP, or the checks below
	// would pass on the static layout.
	if out, _, _ := sh(t, c, "", "cat /proc/cmdline"); !strings.Contains(out, "osaurus.net=dhcp") || strings.Contains(out, "osaurus.ip=") {
		t.Fatalf("kernel command line %q, want osaurus.net=dhcp and no static address", out)
	}

	for _, tc := range []struct{ what, cmd, want string }{
		{"name server from option 6", "cat /etc/resolv.conf", "nameserver 10.0.2.3\n"},
		{"address and prefix", "ip -4 -o addr show scope global", " 10.0.2.15/24 "},
		{"default route from option 3", "ip -4 route show default", "default via 10.0.2.2 "},
	} {
		out, errOut, st := sh(t, c, "", tc.cmd)
		if st.Code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: `%s` printed %q (stderr %q, %+v), want %q", tc.what, tc.cmd, out, errOut, st, tc.want)
		}
	}

	// The agent logs what it got, lease time included.
	console, _ := os.ReadFile(filepath.Join(env.dataDir, "console.log"))
	const leaseLine = "10.0.2.15/24 via 10.0.2.2, DNS [10.0.2.3], from DHCP server 10.0.2.2, lease "
	i := strings.LastIndex(string(console), leaseLine)
	if i < 0 {
		t.Errorf("console lacks the agent's DHCP lease line:\n%s", consoleTail())
	} else {
		start := strings.LastIndex(string(console[:i]), "\n") + 1
		end := i + strings.IndexByte(string(console[i:])+"\n", '\n')
		t.Logf("agent: %s (ready %.2fs after kernel start)", console[start:end], m.Guest().BootSeconds)
	}

	t.Run("reaches the host loopback via the DHCP gateway", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "hello DHCP guest")
		})}
		go srv.Serve(ln)
		defer srv.Close()
		port := ln.Addr().(*net.TCPAddr).Port
		out, errOut, st := sh(t, c, "", fmt.Sprintf("curl -sS --max-time 20 http://10.0.2.2:%d/", port))
		if st.Code != 0 || out != "hello DHCP guest" {
			t.Fatalf("curl: %q %q %+v", out, errOut, st)
		}
	})
}
