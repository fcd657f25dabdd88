package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// A minimal DHCPv4 message codec (RFC 2131, options from RFC 2132): just
// what a client needs to get an address, a router and name servers from a
// NAT's DHCP server. Written here rather than imported to keep the agent,
// which runs as PID 1 in every guest, free of a networking dependency tree.

// Message types (option 53).
const (
	dhcpDiscover byte = 1
	dhcpOffer    byte = 2
	dhcpRequest  byte = 3
	dhcpAck      byte = 5
	dhcpNak      byte = 6
)

// Option codes.
const (
	optPad         byte = 0
	optSubnetMask  byte = 1
	optRouter      byte = 3
	optDNS         byte = 6
	optHostname    byte = 12
	optRequestedIP byte = 50
	optLeaseTime   byte = 51
	optMessageType byte = 53
	optServerID    byte = 54
	optParamList   byte = 55
	optMessage     byte = 56 // a server's error text
	optMaxSize     byte = 57
	optClientID    byte = 61
	optEnd         byte = 255
)

const (
	bootRequest = 1
	bootReply   = 2
	// flagBroadcast asks the server to broadcast its replies: until the
	// client has its address the kernel drops IP unicast to it.
	flagBroadcast = 0x8000

	dhcpHeaderLen = 236
	// dhcpMinLen is the smallest message some BOOTP relays and servers
	// accept; shorter messages are padded.
	dhcpMinLen = 300
)

var dhcpMagic = [4]byte{99, 130, 83, 99}

// errBadDHCP reports a message that is not a well-formed DHCP message.
var errBadDHCP = errors.New("malformed DHCP message")

// dhcpMessage is one DHCP message. Options maps option codes to values;
// an option split across several instances (RFC 3396) is joined.
type dhcpMessage struct {
	Op      byte
	XID     uint32
	Secs    uint16
	Flags   uint16
	CIAddr  netip.Addr // client's current address (renewals)
	YIAddr  netip.Addr // "your" address: what the server offers
	CHAddr  net.HardwareAddr
	Options map[byte][]byte
}

func addr4(b []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(b[:4])
	return a
}

func put4(b []byte, a netip.Addr) {
	if a.Is4() {
		v := a.As4()
		copy(b, v[:])
	}
}

// marshal encodes m. The message type goes first, as some servers expect;
// the other options follow in code order.
func (m *dhcpMessage) marshal() []byte {
	b := make([]byte, dhcpHeaderLen, dhcpMinLen)
	b[0] = m.Op
	b[1] = 1 // htype: Ethernet
	b[2] = byte(len(m.CHAddr))
	binary.BigEndian.PutUint32(b[4:], m.XID)
	binary.BigEndian.PutUint16(b[8:], m.Secs)
	binary.BigEndian.PutUint16(b[10:], m.Flags)
	put4(b[12:], m.CIAddr)
	put4(b[16:], m.YIAddr)
	copy(b[28:44], m.CHAddr)
	b = append(b, dhcpMagic[:]...)
	codes := make([]byte, 0, len(m.Options))
	for c := range m.Options {
		if c != optMessageType {
			codes = append(codes, c)
		}
	}
	slices.Sort(codes)
	if _, ok := m.Options[optMessageType]; ok {
		codes = slices.Insert(codes, 0, optMessageType)
	}
	for _, c := range codes {
		v := m.Options[c]
		for {
			n := min(len(v), 255)
			b = append(b, c, byte(n))
			b = append(b, v[:n]...)
			v = v[n:]
			if len(v) == 0 {
				break
			}
		}
	}
	b = append(b, optEnd)
	for len(b) < dhcpMinLen {
		b = append(b, optPad)
	}
	return b
}

// parseDHCP decodes a message. Options in the sname and file fields
// (option overload) are not read: no NAT's server needs them.
func parseDHCP(b []byte) (*dhcpMessage, error) {
	if len(b) < dhcpHeaderLen+len(dhcpMagic) {
		return nil, fmt.Errorf("%w: %d bytes", errBadDHCP, len(b))
	}
	if [4]byte(b[dhcpHeaderLen:]) != dhcpMagic {
		return nil, fmt.Errorf("%w: no magic cookie", errBadDHCP)
	}
	hlen := int(b[2])
	if hlen > 16 {
		return nil, fmt.Errorf("%w: hardware address length %d", errBadDHCP, hlen)
	}
	m := &dhcpMessage{
		Op:      b[0],
		XID:     binary.BigEndian.Uint32(b[4:]),
		Secs:    binary.BigEndian.Uint16(b[8:]),
		Flags:   binary.BigEndian.Uint16(b[10:]),
		CIAddr:  addr4(b[12:]),
		YIAddr:  addr4(b[16:]),
		CHAddr:  net.HardwareAddr(slices.Clone(b[28 : 28+hlen])),
		Options: map[byte][]byte{},
	}
	opts := b[dhcpHeaderLen+len(dhcpMagic):]
	for len(opts) > 0 {
		code := opts[0]
		if code == optEnd {
			return m, nil
		}
		if code == optPad {
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || len(opts) < 2+int(opts[1]) {
			return nil, fmt.Errorf("%w: option %d runs past the end", errBadDHCP, code)
		}
		n := int(opts[1])
		m.Options[code] = append(m.Options[code], opts[2:2+n]...)
		opts = opts[2+n:]
	}
	return nil, fmt.Errorf("%w: no end option", errBadDHCP)
}

// msgType is the value of option 53, 0 when missing.
func (m *dhcpMessage) msgType() byte {
	if v := m.Options[optMessageType]; len(v) == 1 {
		return v[0]
	}
	return 0
}

// optAddrs reads an option holding a list of IPv4 addresses.
func (m *dhcpMessage) optAddrs(code byte) []netip.Addr {
	v := m.Options[code]
	var as []netip.Addr
	for len(v) >= 4 {
		as = append(as, addr4(v))
		v = v[4:]
	}
	return as
}

func (m *dhcpMessage) optAddr(code byte) netip.Addr {
	if as := m.optAddrs(code); len(as) > 0 {
		return as[0]
	}
	return netip.Addr{}
}

// Lease is the network setup a DHCP server handed out.
type Lease struct {
	Address  netip.Prefix  // the guest's address and subnet, e.g. 192.168.64.3/24
	Gateway  netip.Addr    // the default router (option 3); invalid when none
	DNS      []netip.Addr  // name servers (option 6), in the server's order
	Server   netip.Addr    // the DHCP server that granted the lease
	Duration time.Duration // lease time (option 51); 0 when not given
}

func (l Lease) String() string {
	dns := make([]string, len(l.DNS))
	for i, a := range l.DNS {
		dns[i] = a.String()
	}
	lease := "none given"
	if l.Duration > 0 {
		lease = l.Duration.String()
	}
	return fmt.Sprintf("%s via %s, DNS [%s], from DHCP server %s, lease %s",
		l.Address, l.Gateway, strings.Join(dns, " "), l.Server, lease)
}

// leaseFrom reads the lease out of an ACK.
func leaseFrom(ack *dhcpMessage) (Lease, error) {
	a := ack.YIAddr
	if !a.Is4() || a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return Lease{}, fmt.Errorf("%w: offered address %v", errBadDHCP, a)
	}
	bits := -1
	if v := ack.Options[optSubnetMask]; len(v) == 4 {
		ones, size := net.IPMask(v).Size()
		if size == 0 || ones == 0 {
			return Lease{}, fmt.Errorf("%w: subnet mask %v", errBadDHCP, net.IP(v))
		}
		bits = ones
	} else {
		// No mask: the address's class decides, as RFC 1122 says.
		ones, _ := net.IP(a.AsSlice()).DefaultMask().Size()
		bits = ones
	}
	l := Lease{
		Address: netip.PrefixFrom(a, bits),
		Gateway: ack.optAddr(optRouter),
		DNS:     ack.optAddrs(optDNS),
		Server:  ack.optAddr(optServerID),
	}
	if v := ack.Options[optLeaseTime]; len(v) == 4 {
		l.Duration = time.Duration(binary.BigEndian.Uint32(v)) * time.Second
	}
	return l, nil
}
