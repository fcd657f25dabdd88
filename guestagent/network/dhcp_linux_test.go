//go:build linux

package network

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeDHCP is a DHCP server on the far end of a tap device: it reads the
// raw Ethernet frames the kernel sends out of the tap and answers with
// frames of its own, so the client runs against the real kernel path (an
// interface without an address, broadcasts both ways).
type fakeDHCP struct {
	tap    *os.File
	server netip.Addr // server identifier and source address
	offer  netip.Addr
	lease  uint32 // seconds

	ignoreDiscovers int // drop this many DISCOVERs first (a lossy link)
	nakRequests     int // NAK this many REQUESTs first
	foreignFirst    bool

	mu   sync.Mutex
	seen []seenFrame
}

// seenFrame is one client message with the addresses it travelled with.
type seenFrame struct {
	ethDst       net.HardwareAddr
	ipSrc, ipDst netip.Addr
	sport, dport uint16
	msg          *dhcpMessage
}

func (s *fakeDHCP) frames() []seenFrame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenFrame(nil), s.seen...)
}

// newTapFile makes a tap whose file supports deadlines and Close.
func newTapFile(name string) (*os.File, error) {
	fd, err := createTap(name)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun"), nil
}

// serve answers until the tap is closed.
func (s *fakeDHCP) serve() {
	buf := make([]byte, 2048)
	for {
		n, err := s.tap.Read(buf)
		if err != nil {
			return
		}
		f, ok := parseFrame(buf[:n])
		if !ok || f.dport != dhcpServerPort {
			continue // IPv6 router solicitations and the like
		}
		s.mu.Lock()
		s.seen = append(s.seen, f)
		reply := s.answer(f.msg)
		s.mu.Unlock()
		if reply == nil {
			continue
		}
		if s.foreignFirst {
			// Another transaction's reply first: the client must skip it.
			other := *reply
			other.XID++
			other.YIAddr = netip.MustParseAddr("10.0.2.99")
			s.tap.Write(s.frame(&other))
		}
		s.tap.Write(s.frame(reply))
	}
}

func (s *fakeDHCP) answer(m *dhcpMessage) *dhcpMessage {
	r := &dhcpMessage{
		Op: bootReply, XID: m.XID, Flags: m.Flags, CHAddr: m.CHAddr, YIAddr: s.offer,
		Options: map[byte][]byte{
			optServerID:   s.server.AsSlice(),
			optSubnetMask: {255, 255, 255, 0},
			optRouter:     {10, 0, 2, 2},
			optDNS:        {10, 0, 2, 3},
			optLeaseTime:  binary.BigEndian.AppendUint32(nil, s.lease),
		},
	}
	switch m.msgType() {
	case dhcpDiscover:
		if s.ignoreDiscovers > 0 {
			s.ignoreDiscovers--
			return nil
		}
		r.Options[optMessageType] = []byte{dhcpOffer}
	case dhcpRequest:
		if s.nakRequests > 0 {
			s.nakRequests--
			return &dhcpMessage{Op: bootReply, XID: m.XID, CHAddr: m.CHAddr, Options: map[byte][]byte{
				optMessageType: {dhcpNak}, optServerID: s.server.AsSlice(), optMessage: []byte("try again"),
			}}
		}
		r.Options[optMessageType] = []byte{dhcpAck}
	default:
		return nil
	}
	return r
}

// frame wraps m in UDP, IPv4 and Ethernet, broadcast as slirp does.
func (s *fakeDHCP) frame(m *dhcpMessage) []byte {
	payload := m.marshal()
	udp := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:], dhcpServerPort)
	binary.BigEndian.PutUint16(udp[2:], dhcpClientPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	// Checksum 0: none, which IPv4 allows.
	udp = append(udp, payload...)
	ip := make([]byte, 20)
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(udp)))
	ip[8] = 64
	ip[9] = unix.IPPROTO_UDP
	src := s.server.As4()
	copy(ip[12:], src[:])
	copy(ip[16:], []byte{255, 255, 255, 255})
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	eth := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x00}
	return append(append(eth, ip...), udp...)
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// parseFrame reads a DHCP message out of an Ethernet/IPv4/UDP frame.
func parseFrame(b []byte) (seenFrame, bool) {
	if len(b) < 14+20+8 || binary.BigEndian.Uint16(b[12:]) != 0x0800 {
		return seenFrame{}, false
	}
	ip := b[14:]
	ihl := int(ip[0]&0xf) * 4
	if ip[9] != unix.IPPROTO_UDP || len(ip) < ihl+8 {
		return seenFrame{}, false
	}
	udp := ip[ihl:]
	m, err := parseDHCP(udp[8:])
	if err != nil {
		return seenFrame{}, false
	}
	return seenFrame{
		ethDst: net.HardwareAddr(bytes.Clone(b[:6])),
		ipSrc:  addr4(ip[12:]), ipDst: addr4(ip[16:]),
		sport: binary.BigEndian.Uint16(udp[0:]), dport: binary.BigEndian.Uint16(udp[2:]),
		msg: m,
	}, true
}

func TestRequestLease(t *testing.T) {
	inNetns(t, func() error {
		tap, err := newTapFile("dhcp0")
		if err != nil {
			return err
		}
		defer tap.Close()
		srv := &fakeDHCP{
			tap: tap, server: netip.MustParseAddr("10.0.2.2"), offer: netip.MustParseAddr("10.0.2.15"), lease: 86400,
			ignoreDiscovers: 1, nakRequests: 1, foreignFirst: true,
		}
		go srv.serve()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		lease, err := RequestLease(ctx, "dhcp0", "sandbox")
		if err != nil {
			return err
		}
		want := Lease{
			Address: netip.MustParsePrefix("10.0.2.15/24"), Gateway: netip.MustParseAddr("10.0.2.2"),
			DNS: []netip.Addr{netip.MustParseAddr("10.0.2.3")}, Server: netip.MustParseAddr("10.0.2.2"),
			Duration: 24 * time.Hour,
		}
		if fmt.Sprint(lease) != fmt.Sprint(want) {
			return fmt.Errorf("lease %v, want %v", lease, want)
		}
		if !strings.Contains(lease.String(), "lease 24h0m0s") {
			return fmt.Errorf("lease reads %q; the lease time belongs in the log", lease)
		}

		// Discover (dropped), discover, request (NAK'd), discover, request.
		var types []byte
		for _, f := range srv.frames() {
			types = append(types, f.msg.msgType())
		}
		if wantTypes := []byte{dhcpDiscover, dhcpDiscover, dhcpRequest, dhcpDiscover, dhcpRequest}; !bytes.Equal(types, wantTypes) {
			return fmt.Errorf("client sent message types %v, want %v", types, wantTypes)
		}
		ifi, err := net.InterfaceByName("dhcp0")
		if err != nil {
			return err
		}
		for i, f := range srv.frames() {
			m := f.msg
			switch {
			case f.ipSrc != netip.IPv4Unspecified() || f.ipDst != netip.MustParseAddr("255.255.255.255") ||
				f.sport != dhcpClientPort || f.ethDst.String() != "ff:ff:ff:ff:ff:ff":
				return fmt.Errorf("message %d went %v:%d → %v:%d (eth %v), want a broadcast from 0.0.0.0:68", i, f.ipSrc, f.sport, f.ipDst, f.dport, f.ethDst)
			case m.Flags&flagBroadcast == 0:
				return fmt.Errorf("message %d lacks the broadcast flag: the kernel would drop a unicast reply", i)
			case m.CHAddr.String() != ifi.HardwareAddr.String():
				return fmt.Errorf("message %d: chaddr %v, want %v", i, m.CHAddr, ifi.HardwareAddr)
			case string(m.Options[optHostname]) != "sandbox":
				return fmt.Errorf("message %d: hostname %q", i, m.Options[optHostname])
			}
			if m.msgType() == dhcpRequest &&
				(m.optAddr(optRequestedIP) != srv.offer || m.optAddr(optServerID) != srv.server) {
				return fmt.Errorf("request %d asks for %v from %v, want %v from %v", i, m.optAddr(optRequestedIP), m.optAddr(optServerID), srv.offer, srv.server)
			}
		}
		// A new transaction after the NAK: a fresh transaction id.
		if fs := srv.frames(); fs[3].msg.XID == fs[2].msg.XID {
			return fmt.Errorf("the DISCOVER after a NAK reused transaction id %#x", fs[2].msg.XID)
		}

		// What the agent does next at boot: apply the lease.
		if err := ConfigureInterface("dhcp0", lease.Address, lease.Gateway); err != nil {
			return err
		}
		routes, err := os.ReadFile("/proc/thread-self/net/route")
		if err != nil {
			return err
		}
		if !strings.Contains(string(routes), "dhcp0\t00000000\t0202000A") {
			return fmt.Errorf("no default route via 10.0.2.2:\n%s", routes)
		}
		return nil
	})
}

func TestRequestLeaseNoServer(t *testing.T) {
	inNetns(t, func() error {
		tap, err := newTapFile("dhcp1")
		if err != nil {
			return err
		}
		defer tap.Close()
		srv := &fakeDHCP{tap: tap, ignoreDiscovers: 1 << 30}
		go srv.serve()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		lease, err := RequestLease(ctx, "dhcp1", "")
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no lease") {
			return fmt.Errorf("RequestLease = %v, %v; want an error saying no lease, wrapping the deadline", lease, err)
		}
		// It retransmitted rather than waiting once.
		if n := len(srv.frames()); n < 2 {
			return fmt.Errorf("client sent %d DISCOVERs, want retransmissions", n)
		}
		// The boot path takes the interface down again.
		if err := LinkDown("dhcp1"); err != nil {
			return err
		}
		if ifi, err := net.InterfaceByName("dhcp1"); err != nil || ifi.Flags&net.FlagUp != 0 {
			return fmt.Errorf("dhcp1 still up after LinkDown: %+v %v", ifi, err)
		}
		return nil
	})
}

func TestRequestLeaseMissingInterface(t *testing.T) {
	inNetns(t, func() error {
		if _, err := RequestLease(context.Background(), "missing0", ""); err == nil || !strings.Contains(err.Error(), "missing0") {
			return fmt.Errorf("err = %v, want one naming the interface", err)
		}
		return nil
	})
}

func TestResolvConf(t *testing.T) {
	var dns []netip.Addr
	for _, s := range []string{"10.0.2.3", "192.168.64.1", "1.1.1.1", "8.8.8.8"} {
		dns = append(dns, netip.MustParseAddr(s))
	}
	// glibc reads at most three name servers.
	want := "nameserver 10.0.2.3\nnameserver 192.168.64.1\nnameserver 1.1.1.1\n"
	if got := string(ResolvConf(dns)); got != want {
		t.Errorf("ResolvConf = %q, want %q", got, want)
	}
}
