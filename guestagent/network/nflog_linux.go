//go:build linux

package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// The firewall's refusals reach the log through NFLOG: every reject rule
// of the agents' chains first logs the packet to nflogGroup, and PID 1
// reads that group over a netfilter netlink socket in the guest's root
// namespace. Only the kernel, or a process with CAP_NET_ADMIN there (root
// of the guest, never an agent: agents' processes live in namespaces of
// their own without that capability), can send to that socket, so an
// agent can neither forge nor suppress an entry.
const (
	nflogGroup   = 7
	nflogSnaplen = 80 // an IPv6 header and the ports are all we read
	nflogPrefix  = "osaurus:"
)

// NFLOG protocol numbers (linux/netfilter/nfnetlink_log.h); x/sys/unix
// does not carry them.
const (
	nfulnlMsgPacket    = 0
	nfulnlMsgConfig    = 1
	nfulaCfgCmd        = 1
	nfulaCfgMode       = 2
	nfulaCfgTimeout    = 4
	nfulaCfgQthresh    = 5
	nfulnlCfgCmdBind   = 1
	nfulnlCopyPacket   = 2
	nfulaIfindexIndev  = 4
	nfulaPayload       = 9
	nfulaPrefix        = 10
	nfnetlinkV0        = 0
	nflogReadBufBytes  = 1 << 20
	nflogMaxPrefixSize = 64
)

// Rule kinds, the part of a log prefix after nflogPrefix.
const (
	refuseDenied = "denied" // a range no agent reaches
	refuseDNS    = "dns"    // a DNS server other than the VM's resolver
	refusePolicy = "policy" // none, or a domain list's direct connection
	refuseVM     = "vm"     // the VM's own services
)

// openNFLog binds a netlink socket to nflogGroup, copying packets.
func openNFLog() (*netlink.Conn, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, fmt.Errorf("netfilter netlink socket: %w", err)
	}
	config := func(attrs ...netlink.Attribute) error {
		b, err := netlink.MarshalAttributes(attrs)
		if err != nil {
			return err
		}
		hdr := []byte{unix.AF_UNSPEC, nfnetlinkV0, 0, 0}
		binary.BigEndian.PutUint16(hdr[2:], nflogGroup)
		_, err = c.Execute(netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_ULOG<<8 | nfulnlMsgConfig),
				Flags: netlink.Request | netlink.Acknowledge},
			Data: append(hdr, b...),
		})
		return err
	}
	mode := make([]byte, 6) // struct nfulnl_msg_config_mode: be32 range, u8 mode, u8 pad
	binary.BigEndian.PutUint32(mode, nflogSnaplen)
	mode[4] = nfulnlCopyPacket
	one := binary.BigEndian.AppendUint32(nil, 1)
	if err := config(netlink.Attribute{Type: nfulaCfgCmd, Data: []byte{nfulnlCfgCmdBind}}); err != nil {
		c.Close()
		return nil, fmt.Errorf("binding NFLOG group %d (kernel module nfnetlink_log): %w", nflogGroup, err)
	}
	// Every packet at once (queue threshold 1), not in batches.
	if err := config(netlink.Attribute{Type: nfulaCfgMode, Data: mode},
		netlink.Attribute{Type: nfulaCfgQthresh, Data: one},
		netlink.Attribute{Type: nfulaCfgTimeout, Data: one}); err != nil {
		c.Close()
		return nil, fmt.Errorf("configuring NFLOG group %d: %w", nflogGroup, err)
	}
	c.SetReadBuffer(nflogReadBufBytes)
	return c, nil
}

// nflogPacket is what one NFLOG message tells.
type nflogPacket struct {
	indev  uint32
	prefix string
	dst    netip.Addr
	proto  string
	port   int
}

// parseNFLog reads one NFLOG packet message (without the netlink header).
func parseNFLog(data []byte) (nflogPacket, error) {
	var p nflogPacket
	if len(data) < 4 {
		return p, errors.New("short nfgenmsg")
	}
	ad, err := netlink.NewAttributeDecoder(data[4:])
	if err != nil {
		return p, err
	}
	var payload []byte
	for ad.Next() {
		b := ad.Bytes()
		switch ad.Type() {
		case nfulaIfindexIndev:
			if len(b) == 4 {
				p.indev = binary.BigEndian.Uint32(b)
			}
		case nfulaPrefix:
			if len(b) > nflogMaxPrefixSize {
				b = b[:nflogMaxPrefixSize]
			}
			p.prefix = strings.TrimRight(string(b), "\x00")
		case nfulaPayload:
			payload = b
		}
	}
	if err := ad.Err(); err != nil {
		return p, err
	}
	p.dst, p.proto, p.port = parseIPHeader(payload)
	return p, nil
}

// parseIPHeader reads the destination, protocol and port of an IP packet.
func parseIPHeader(b []byte) (netip.Addr, string, int) {
	var proto byte
	var l4 []byte
	var dst netip.Addr
	switch {
	case len(b) >= 20 && b[0]>>4 == 4:
		ihl := int(b[0]&0x0f) * 4
		proto = b[9]
		dst = netip.AddrFrom4([4]byte(b[16:20]))
		if ihl >= 20 && len(b) >= ihl {
			l4 = b[ihl:]
		}
	case len(b) >= 40 && b[0]>>4 == 6:
		proto = b[6]
		dst = netip.AddrFrom16([16]byte(b[24:40]))
		l4 = b[40:]
	default:
		return netip.Addr{}, "", 0
	}
	name := fmt.Sprintf("ip-proto-%d", proto)
	port := 0
	switch proto {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP:
		name = map[byte]string{unix.IPPROTO_TCP: "tcp", unix.IPPROTO_UDP: "udp"}[proto]
		if len(l4) >= 4 {
			port = int(binary.BigEndian.Uint16(l4[2:4]))
		}
	case unix.IPPROTO_ICMP:
		name = "icmp"
	case unix.IPPROTO_ICMPV6:
		name = "icmpv6"
	}
	return dst, name, port
}

// refusalReason explains a firewall refusal to people.
func refusalReason(kind string, mode string) string {
	switch kind {
	case refuseDenied:
		return "the address is in a range no agent may reach (the host, the VM's other agents, private, loopback, link-local, carrier-grade NAT, metadata)"
	case refuseDNS:
		return "DNS goes only to the VM's resolver"
	case refuseVM:
		return "the VM's own services are closed to agents (a domain list reaches only its proxy)"
	case refusePolicy:
		switch mode {
		case "none":
			return "the agent's network policy is none"
		case "domains":
			return "with a domain list, connections go only through the proxy (HTTP_PROXY); direct ones are refused"
		}
		return "the agent's network policy allows no such connection"
	}
	return "refused by the guest's firewall"
}

// readNFLog records every logged packet until c fails. who maps the
// packet's input interface to the agent and its policy mode.
func readNFLog(c *netlink.Conn, l *netLog, who func(ifindex uint32) (user, scope, mode string)) error {
	for {
		msgs, err := c.Receive()
		if err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				// The kernel dropped log messages we read too slowly.
				l.add(agentproto.NetRefusal{By: agentproto.RefusedByFirewall, Dest: "?",
					Reason: "some refusals were not recorded: the guest read the kernel's log too slowly"})
				continue
			}
			return err
		}
		for _, m := range msgs {
			if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_ULOG<<8|nfulnlMsgPacket) {
				continue
			}
			p, err := parseNFLog(m.Data)
			if err != nil {
				continue
			}
			kind, ok := strings.CutPrefix(p.prefix, nflogPrefix)
			if !ok {
				continue // someone else's log rule
			}
			user, scope, mode := who(p.indev)
			dest := "?"
			if p.dst.IsValid() {
				dest = p.dst.String()
			}
			l.add(agentproto.NetRefusal{User: user, Plugin: scope, Dest: dest, Port: p.port, Proto: p.proto,
				By: agentproto.RefusedByFirewall, Reason: refusalReason(kind, mode)})
		}
	}
}
