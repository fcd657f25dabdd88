//go:build linux

package network

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/mdlayher/netlink"
)

func TestParseNFLog(t *testing.T) {
	ip4 := make([]byte, 24)
	ip4[0], ip4[9] = 0x45, 6
	copy(ip4[16:20], []byte{10, 0, 2, 2})
	binary.BigEndian.PutUint16(ip4[22:], 8080)
	ip6 := make([]byte, 44)
	ip6[0], ip6[6] = 0x60, 17
	copy(ip6[24:40], netip.MustParseAddr("fe80::1").AsSlice())
	binary.BigEndian.PutUint16(ip6[42:], 53)
	for _, tc := range []struct {
		payload []byte
		dst     string
		proto   string
		port    int
	}{
		{ip4, "10.0.2.2", "tcp", 8080},
		{ip6, "fe80::1", "udp", 53},
		{[]byte{0x45, 0}, "invalid IP", "", 0},
	} {
		b, err := netlink.MarshalAttributes([]netlink.Attribute{
			{Type: nfulaIfindexIndev, Data: binary.BigEndian.AppendUint32(nil, 7)},
			{Type: nfulaPrefix, Data: []byte(nflogPrefix + refuseDenied + "\x00")},
			{Type: nfulaPayload, Data: tc.payload},
		})
		if err != nil {
			t.Fatal(err)
		}
		p, err := parseNFLog(append([]byte{2, 0, 0, nflogGroup}, b...))
		if err != nil {
			t.Fatal(err)
		}
		if p.indev != 7 || p.prefix != nflogPrefix+refuseDenied || p.dst.String() != tc.dst || p.proto != tc.proto || p.port != tc.port {
			t.Errorf("%x: %+v", tc.payload, p)
		}
	}
	if _, err := parseNFLog([]byte{1}); err == nil {
		t.Error("a short message parsed")
	}
}
