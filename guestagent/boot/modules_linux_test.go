//go:build linux

package boot

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/osaurus/osaurus-sandbox/provision/kmod"
	"github.com/osaurus/osaurus-sandbox/vm/bootparams"
)

func TestModuleNameOf(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"/lib/modules/07-virtio_net.ko", "virtio_net"},
		{"123-crc32c-generic.ko", "crc32c_generic"},
		{"virtio_pci.ko", "virtio_pci"},
		{"x1-odd.ko", "x1_odd"}, // not a position prefix
	} {
		if got := moduleNameOf(tc.file); got != tc.want {
			t.Errorf("moduleNameOf(%q) = %q, want %q", tc.file, got, tc.want)
		}
	}
}

func TestModuleDepends(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want []string
	}{
		{"list", "\x7fELF...\x00license=GPL\x00depends=virtio,virtio_ring,net-failover\x00intree=Y\x00", []string{"virtio", "virtio_ring", "net_failover"}},
		{"empty", "\x00depends=\x00retpoline=Y\x00", nil},
		{"none", "\x00license=GPL\x00", nil},
		{"unterminated", "\x00depends=virtio", nil},
	} {
		if got := moduleDepends([]byte(tc.data)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: moduleDepends = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The modules a configuration doesn't use are skipped; the ones it does
// (and fuse, which users may need) never are.
func TestUnneededModules(t *testing.T) {
	nat := bootparams.Network{Address: netip.MustParsePrefix("10.0.2.15/24"), Gateway: netip.MustParseAddr("10.0.2.2")}
	share := []bootparams.Share{{Tag: "workspace", Mount: "/workspace"}}
	for _, tc := range []struct {
		name       string
		p          bootparams.Params
		skip, keep []string
	}{
		{"serial with net and shares", bootparams.Params{SerialPort: "p", Network: nat, Shares: share},
			[]string{"vsock", "vmw_vsock_virtio_transport", "vmw_vsock_virtio_transport_common"},
			[]string{"virtio_console", "virtio_net", "failover", "virtiofs", "fuse", "virtio_blk"}},
		{"vsock offline without shares", bootparams.Params{VsockPort: 1024},
			[]string{"virtio_console", "virtio_net", "net_failover", "failover", "virtiofs"},
			[]string{"vsock", "vmw_vsock_virtio_transport", "fuse", "virtio_pci"}},
		{"dhcp", bootparams.Params{VsockPort: 1024, Network: bootparams.Network{DHCP: true}},
			nil, []string{"virtio_net", "failover"}},
	} {
		skip := unneededModules(tc.p)
		for _, m := range tc.skip {
			if !skip[m] {
				t.Errorf("%s: %s is loaded; want it skipped", tc.name, m)
			}
		}
		for _, m := range tc.keep {
			if skip[m] {
				t.Errorf("%s: %s is skipped; the configuration needs it", tc.name, m)
			}
		}
		// The network policy builds each agent's namespace (veth) and its
		// rules (nftables with NAT and reject) at run time, whatever the
		// boot configuration: its modules and their dependencies are never
		// skipped.
		policy := append(kmod.OptionalGuestModules(), "nf_nat", "nf_conntrack", "nf_defrag_ipv4",
			"nf_defrag_ipv6", "nf_reject_ipv4", "nf_reject_ipv6", "nft_reject", "nfnetlink", "libcrc32c")
		for _, m := range policy {
			if skip[m] {
				t.Errorf("%s: %s is skipped; the network policy needs it", tc.name, m)
			}
		}
	}
}

// Only what nothing but the network policy needs waits until after the
// handshake; a module that boot needs too (libcrc32c for a modular ext4)
// loads now.
func TestSplitDeferred(t *testing.T) {
	mod := func(name string, deps ...string) moduleFile {
		return moduleFile{path: "/lib/modules/" + name + ".ko", name: name, deps: deps}
	}
	all := []moduleFile{
		mod("virtio_ring"), mod("virtio", "virtio_ring"), mod("virtio_pci", "virtio", "virtio_ring"),
		mod("libcrc32c"), mod("ext4", "libcrc32c"),
		mod("veth"), mod("nfnetlink"), mod("nf_tables", "nfnetlink", "libcrc32c"),
		mod("nf_defrag_ipv4"), mod("nf_conntrack", "nf_defrag_ipv4", "libcrc32c"),
		mod("nf_nat", "nf_conntrack", "libcrc32c"), mod("nft_chain_nat", "nf_nat", "nf_tables"),
		mod("nft_masq", "nf_nat", "nf_tables"), mod("nf_reject_ipv4"), mod("nft_reject", "nf_reject_ipv4"),
		mod("nft_reject_inet", "nft_reject", "nf_tables"),
	}
	now, later := splitDeferred(all)
	names := func(ms []moduleFile) []string {
		var s []string
		for _, m := range ms {
			s = append(s, m.name)
		}
		return s
	}
	wantNow := []string{"virtio_ring", "virtio", "virtio_pci", "libcrc32c", "ext4"}
	wantLater := []string{"veth", "nfnetlink", "nf_tables", "nf_defrag_ipv4", "nf_conntrack", "nf_nat",
		"nft_chain_nat", "nft_masq", "nf_reject_ipv4", "nft_reject", "nft_reject_inet"}
	if got := names(now); !slices.Equal(got, wantNow) {
		t.Errorf("now = %q, want %q", got, wantNow)
	}
	if got := names(later); !slices.Equal(got, wantLater) {
		t.Errorf("later = %q, want %q", got, wantLater)
	}
	// Without policy modules in the image nothing waits.
	if _, later := splitDeferred(all[:5]); len(later) != 0 {
		t.Errorf("later = %q without policy modules, want none", names(later))
	}
}

// The guest defers exactly the network policy's modules that the host
// ships; a module added on one side only would load late or at boot.
func TestPolicyModulesMatchTheHost(t *testing.T) {
	var host []string
	for _, m := range kmod.OptionalGuestModules() {
		if m != "crc32c_generic" && m != "ext4" { // the root filesystem's, not the policy's
			host = append(host, m)
		}
	}
	if !slices.Equal(host, policyModules) {
		t.Errorf("policyModules = %q; kmod.OptionalGuestModules ships %q for the policy", policyModules, host)
	}
}
