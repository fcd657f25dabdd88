// Package network is the guest's networking: the boot-time DHCP client and
// netlink interface setup, and the per-agent network policy (a network
// namespace and veth per agent, the nftables rules that confine it, the
// nflog reader that records refusals, the egress proxy with its HTTP and
// TLS SNI parsing, and the package-mirror lookup).
//
// The message and rule logic (DHCP encoding and parsing, rule generation,
// nflog parsing, proxy request and ClientHello parsing, mirror lookup) is
// tested without root; only tests that build a network namespace or
// install a seccomp filter need root, and they fail saying so.
package network
