// Package bootparams is the contract between the host, which writes the
// kernel command line, and the guest agent, which reads it from
// /proc/cmdline at boot. Keeping it in one place keeps both sides in step.
package bootparams

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Share is a VirtioFS share: the device tag and where the guest mounts it.
type Share struct {
	Tag   string
	Mount string
}

// Network is how the guest configures its NIC: statically (Address set),
// by DHCP (DHCP set, the other fields empty), or not at all (zero Network).
type Network struct {
	// DHCP makes the guest ask the NAT's DHCP server for its address,
	// gateway and DNS. It is for NATs whose layout the host does not choose
	// (vz: macOS picks the subnet, usually 192.168.64.0/24).
	DHCP    bool
	Address netip.Prefix // e.g. 10.0.2.15/24
	Gateway netip.Addr   // e.g. 10.0.2.2
	DNS     netip.Addr   // e.g. 10.0.2.3
}

// Enabled says whether the guest has a NIC to configure.
func (n Network) Enabled() bool { return n.DHCP || n.Address.IsValid() }

// DefaultNAT is the layout of QEMU's user-mode NAT (slirp) as the QEMU
// driver configures it. Static setup skips a DHCP round trip at boot.
var DefaultNAT = Network{
	Address: netip.MustParsePrefix("10.0.2.15/24"),
	Gateway: netip.MustParseAddr("10.0.2.2"),
	DNS:     netip.MustParseAddr("10.0.2.3"),
}

// DHCPNAT is a NIC configured by DHCP.
var DHCPNAT = Network{DHCP: true}

// Params is everything the guest agent needs to know at boot.
type Params struct {
	RootDevice string  // block device holding the ext4 root, e.g. /dev/vda
	Shares     []Share // mounted in order
	Network    Network
	SerialPort string // virtio-serial port name to serve on; "" when not used
	VsockPort  uint32 // vsock port to listen on; 0 when not used
	Debug      bool   // verbose agent logging on the console
}

const prefix = "osaurus."

// Encode renders the parameters as kernel command line words.
func (p Params) Encode() string {
	var w []string
	if p.RootDevice != "" {
		w = append(w, prefix+"root="+p.RootDevice)
	}
	for _, s := range p.Shares {
		w = append(w, prefix+"share="+s.Tag+":"+s.Mount)
	}
	switch {
	case p.Network.DHCP:
		w = append(w, prefix+"net=dhcp")
	case p.Network.Enabled():
		w = append(w, prefix+"ip="+p.Network.Address.String(),
			prefix+"gw="+p.Network.Gateway.String(),
			prefix+"dns="+p.Network.DNS.String())
	default:
		w = append(w, prefix+"net=none")
	}
	if p.SerialPort != "" {
		w = append(w, prefix+"port="+p.SerialPort)
	}
	if p.VsockPort != 0 {
		w = append(w, prefix+"vsock="+strconv.FormatUint(uint64(p.VsockPort), 10))
	}
	if p.Debug {
		w = append(w, prefix+"debug=1")
	}
	return strings.Join(w, " ")
}

// Parse reads the osaurus.* words of a kernel command line and ignores the
// rest.
func Parse(cmdline string) (Params, error) {
	var p Params
	for _, word := range strings.Fields(cmdline) {
		key, val, ok := strings.Cut(word, "=")
		if !ok || !strings.HasPrefix(key, prefix) {
			continue
		}
		var err error
		switch strings.TrimPrefix(key, prefix) {
		case "root":
			p.RootDevice = val
		case "share":
			tag, mnt, ok := strings.Cut(val, ":")
			if !ok || tag == "" || !strings.HasPrefix(mnt, "/") {
				return p, fmt.Errorf("bootparams: %s: want TAG:/absolute/path", word)
			}
			p.Shares = append(p.Shares, Share{Tag: tag, Mount: mnt})
		case "ip":
			p.Network.Address, err = netip.ParsePrefix(val)
		case "gw":
			p.Network.Gateway, err = netip.ParseAddr(val)
		case "dns":
			p.Network.DNS, err = netip.ParseAddr(val)
		case "net":
			switch val {
			case "none":
			case "dhcp":
				p.Network.DHCP = true
			default:
				err = fmt.Errorf("want net=none or net=dhcp")
			}
		case "port":
			p.SerialPort = val
		case "vsock":
			var n uint64
			n, err = strconv.ParseUint(val, 10, 32)
			p.VsockPort = uint32(n)
		case "debug":
			p.Debug = val == "1"
		}
		if err != nil {
			return p, fmt.Errorf("bootparams: %s: %w", word, err)
		}
	}
	if p.Network.DHCP && p.Network.Address.IsValid() {
		// Which one the host meant is anyone's guess; DHCP still works
		// wherever the static layout would.
		p.Network = DHCPNAT
		return p, fmt.Errorf("bootparams: osaurus.net=dhcp and osaurus.ip= both given; using DHCP")
	}
	return p, nil
}
