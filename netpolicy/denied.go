package netpolicy

import "net/netip"

// denied are the destinations no agent reaches, whatever its policy: the
// host (QEMU's NAT gateway 10.0.2.2 is the host's own 127.0.0.1; under vz
// the gateway is the Mac itself, on a private subnet), the VM and its other
// agents, the local network, and cloud metadata services. The guest
// installs them as nftables sets and the egress proxy refuses names that
// resolve into them, so a DNS answer can't route around the rules.
var denied = []string{
	// IPv4
	"0.0.0.0/8",      // "this network"; 0.0.0.0 reaches local listeners
	"10.0.0.0/8",     // RFC 1918, includes QEMU's 10.0.2.0/24 (gateway = host)
	"100.64.0.0/10",  // carrier-grade NAT (RFC 6598)
	"127.0.0.0/8",    // loopback
	"169.254.0.0/16", // link-local, includes metadata 169.254.169.254
	"172.16.0.0/12",  // RFC 1918
	"192.0.0.0/24",   // IETF protocol assignments
	"192.168.0.0/16", // RFC 1918, includes vz's NAT subnet (gateway = the Mac)
	"198.18.0.0/15",  // benchmarking, used by some VPNs for local services
	"224.0.0.0/4",    // multicast
	"240.0.0.0/4",    // reserved and broadcast
	// IPv6
	"::/127",         // unspecified and loopback
	"::ffff:0:0/96",  // IPv4-mapped: would smuggle the IPv4 ranges
	"64:ff9b::/96",   // well-known NAT64 prefix (RFC 6052): carries any IPv4 address, private ones included
	"64:ff9b:1::/48", // local-use NAT64 (RFC 8215)
	"2001::/32",      // Teredo: tunnels to an IPv4 address embedded in the IPv6 one
	"2002::/16",      // 6to4: likewise (RFC 3056)
	"fc00::/7",       // unique local
	"fe80::/10",      // link-local
	"fec0::/10",      // site-local (deprecated; QEMU's user network uses fec0::/64)
	"ff00::/8",       // multicast
}

var deniedPrefixes = func() []netip.Prefix {
	out := make([]netip.Prefix, len(denied))
	for i, s := range denied {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}()

// Denied is the list of destination ranges no policy reaches.
func Denied() []netip.Prefix { return append([]netip.Prefix(nil), deniedPrefixes...) }

// IsDenied reports whether addr is in a denied range. An IPv4-mapped IPv6
// address is judged as the IPv4 address it carries.
func IsDenied(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsValid() {
		return true
	}
	for _, p := range deniedPrefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
