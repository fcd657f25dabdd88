//go:build linux

package network

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

func TestDefaultGateway(t *testing.T) {
	route := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n" +
		"eth0\t00000000\t0202000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
	p := filepath.Join(t.TempDir(), "route")
	if err := os.WriteFile(p, []byte(route), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := defaultGateway(p); got != netip.MustParseAddr("10.0.2.2") {
		t.Errorf("defaultGateway = %v, want 10.0.2.2", got)
	}
	if got := defaultGateway(filepath.Join(t.TempDir(), "none")); got.IsValid() {
		t.Errorf("no route file: %v", got)
	}
}

func TestHostAddrsDenied(t *testing.T) {
	n := NewNetPolicy(nil)
	n.SetHostAddrs([]string{"198.51.100.7", "2001:db8::7", "not an address", "fe80::1%eth0"})
	for _, s := range []string{"198.51.100.7", "::ffff:198.51.100.7", "2001:db8::7", "10.0.2.2"} {
		if !n.isDenied(netip.MustParseAddr(s)) {
			t.Errorf("%s is not denied", s)
		}
	}
	if n.isDenied(netip.MustParseAddr("198.51.100.8")) {
		t.Error("198.51.100.8 (not the host's) is denied")
	}
	if got := n.ruleSet().host; len(got) < 2 || got[0] != netip.MustParseAddr("198.51.100.7") {
		t.Errorf("rules' host addresses %v", got)
	}
}
