package network

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

func TestDHCPMessageRoundTrip(t *testing.T) {
	m := &dhcpMessage{
		Op:     bootReply,
		XID:    0xdeadbeef,
		Secs:   3,
		Flags:  flagBroadcast,
		CIAddr: netip.MustParseAddr("10.0.2.9"),
		YIAddr: netip.MustParseAddr("10.0.2.15"),
		CHAddr: net.HardwareAddr{2, 0, 0, 0, 0, 7},
		Options: map[byte][]byte{
			optMessageType: {dhcpOffer},
			optRouter:      {10, 0, 2, 2},
			optDNS:         {10, 0, 2, 3, 1, 1, 1, 1},
			// Longer than one option instance holds: split on the wire,
			// joined again on reading (RFC 3396).
			optHostname: make([]byte, 300),
		},
	}
	b := m.marshal()
	if len(b) < dhcpMinLen {
		t.Errorf("message is %d bytes, want at least %d", len(b), dhcpMinLen)
	}
	if b[dhcpHeaderLen+4] != optMessageType {
		t.Errorf("first option is %d, want the message type", b[dhcpHeaderLen+4])
	}
	got, err := parseDHCP(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, m)
	}
}

func TestParseDHCPRejects(t *testing.T) {
	good := (&dhcpMessage{Op: bootReply, CHAddr: make(net.HardwareAddr, 6), Options: map[byte][]byte{optMessageType: {dhcpAck}}}).marshal()
	optStart := dhcpHeaderLen + 4
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:100] }},
		{"no magic cookie", func(b []byte) []byte { b[dhcpHeaderLen] = 0; return b }},
		{"hardware address too long", func(b []byte) []byte { b[2] = 17; return b }},
		{"option past the end", func(b []byte) []byte { return append(b[:optStart], optRouter, 4, 10, 0) }},
		{"no end option", func(b []byte) []byte { return append(b[:optStart], optRouter, 4, 10, 0, 2, 2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.edit(append([]byte(nil), good...))
			if _, err := parseDHCP(b); !errors.Is(err, errBadDHCP) {
				t.Errorf("err = %v, want errBadDHCP", err)
			}
		})
	}
}

func TestLeaseFrom(t *testing.T) {
	ack := func(yiaddr string, opts map[byte][]byte) *dhcpMessage {
		return &dhcpMessage{YIAddr: netip.MustParseAddr(yiaddr), Options: opts}
	}
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	for _, tc := range []struct {
		name string
		ack  *dhcpMessage
		want Lease
		bad  bool
	}{
		{name: "vz-like", ack: ack("192.168.64.3", map[byte][]byte{
			optSubnetMask: {255, 255, 255, 0}, optRouter: {192, 168, 64, 1}, optDNS: {192, 168, 64, 1},
			optServerID: {192, 168, 64, 1}, optLeaseTime: u32(85536),
		}), want: Lease{
			Address: netip.MustParsePrefix("192.168.64.3/24"), Gateway: netip.MustParseAddr("192.168.64.1"),
			DNS: []netip.Addr{netip.MustParseAddr("192.168.64.1")}, Server: netip.MustParseAddr("192.168.64.1"),
			Duration: 85536 * time.Second,
		}},
		{name: "no mask: classful", ack: ack("10.0.2.15", map[byte][]byte{}),
			want: Lease{Address: netip.MustParsePrefix("10.0.2.15/8")}},
		{name: "several name servers", ack: ack("10.0.2.15", map[byte][]byte{optSubnetMask: {255, 255, 255, 0}, optDNS: {10, 0, 2, 3, 10, 0, 2, 4}}),
			want: Lease{Address: netip.MustParsePrefix("10.0.2.15/24"), DNS: []netip.Addr{netip.MustParseAddr("10.0.2.3"), netip.MustParseAddr("10.0.2.4")}}},
		{name: "no address", ack: ack("0.0.0.0", map[byte][]byte{}), bad: true},
		{name: "broadcast address", ack: ack("255.255.255.255", map[byte][]byte{}), bad: true},
		{name: "zero mask", ack: ack("10.0.2.15", map[byte][]byte{optSubnetMask: {0, 0, 0, 0}}), bad: true},
		{name: "non-contiguous mask", ack: ack("10.0.2.15", map[byte][]byte{optSubnetMask: {255, 0, 255, 0}}), bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := leaseFrom(tc.ack)
			if tc.bad {
				if !errors.Is(err, errBadDHCP) {
					t.Errorf("got %+v, %v; want errBadDHCP", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
