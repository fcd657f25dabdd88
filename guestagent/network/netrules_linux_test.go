//go:build linux

package network

import (
	"net/netip"
	"testing"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TestDescribeRule: the renderer the tests and `sandbox-agent netrules`
// read the kernel's rules through must say exactly what each expression
// pattern installRules builds matches. (The rules themselves are checked
// as installed, on the real guest, by e2e TestNetworkPolicy.)
func TestDescribeRule(t *testing.T) {
	tests := []struct {
		ex   []expr.Any
		want string
	}{
		{append(daddr(netip.MustParsePrefix("10.0.0.0/8")), reject()), "daddr 10.0.0.0/8 -> reject"},
		{append(daddr(netip.MustParsePrefix("169.254.169.254/32")), reject()), "daddr 169.254.169.254/32 -> reject"},
		{append(daddr(netip.MustParsePrefix("fc00::/7")), reject()), "daddr fc00::/7 -> reject"},
		{append(daddr(netip.MustParsePrefix("::ffff:0:0/96")), reject()), "daddr ::ffff:0.0.0.0/96 -> reject"},
		{append(iifPrefix("osn"), jump("agent_forward")), "iif osn* -> jump agent_forward"},
		{cat(iif("osn12"), accept1()), "iif osn12 -> accept"},
		{cat(iif("osn1"), daddr(netip.MustParsePrefix("10.0.2.3/32")), l4proto(unix.IPPROTO_UDP), dport(53), accept1()),
			"iif osn1 daddr 10.0.2.3/32 l4proto udp dport 53 -> accept"},
		{cat(saddr(netip.MustParsePrefix("10.213.0.0/16")), oifPrefixNot("osn"), []expr.Any{&expr.Masq{}}),
			"saddr 10.213.0.0/16 oif != osn* -> masquerade"},
		{[]expr.Any{reject()}, "-> reject"},
		{[]expr.Any{&expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX, Group: nflogGroup, Data: []byte("osaurus:vm")}, reject()},
			`log group 7 prefix "osaurus:vm" -> reject`},
		{[]expr.Any{&expr.Counter{}}, "*expr.Counter"},
	}
	for _, tc := range tests {
		if got := describeRule(tc.ex); got != tc.want {
			t.Errorf("describeRule = %q, want %q", got, tc.want)
		}
	}
}

// TestAddrMatchMasksHostBits: a prefix given with host bits set matches
// its network, not a single address.
func TestAddrMatchMasksHostBits(t *testing.T) {
	ex := daddr(netip.MustParsePrefix("10.1.2.3/8"))
	cmp := ex[len(ex)-1].(*expr.Cmp)
	if netip.AddrFrom4([4]byte(cmp.Data)) != netip.MustParseAddr("10.0.0.0") {
		t.Fatalf("compares with %v", cmp.Data)
	}
	pl := ex[2].(*expr.Payload)
	if pl.Offset != 16 || pl.Len != 4 {
		t.Fatalf("IPv4 destination at %d+%d", pl.Offset, pl.Len)
	}
	pl6 := daddr(netip.MustParsePrefix("fe80::/10"))[2].(*expr.Payload)
	if pl6.Offset != 24 || pl6.Len != 16 {
		t.Fatalf("IPv6 destination at %d+%d", pl6.Offset, pl6.Len)
	}
}
