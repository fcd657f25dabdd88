//go:build linux

package network

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	dhcpServerPort = 67
	dhcpClientPort = 68
	// The first retransmission comes quickly: a NAT's server answers at
	// once, and a lost first packet is most likely a link still coming up.
	dhcpFirstWait = 500 * time.Millisecond
	dhcpMaxWait   = 4 * time.Second
)

// errDHCPNak: the server refused the address it had offered; start over.
var errDHCPNak = errors.New("DHCP server sent NAK")

// RequestLease brings ifname up and asks a DHCP server on its link for a
// lease (DISCOVER, OFFER, REQUEST, ACK), retransmitting with backoff until
// it gets one or ctx ends. It only reads the lease; applying it is up to
// the caller. hostname, when set, is sent as option 12 so the server can
// name the lease.
func RequestLease(ctx context.Context, ifname, hostname string) (Lease, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return Lease{}, fmt.Errorf("interface %s: %w", ifname, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return Lease{}, fmt.Errorf("interface %s: not Ethernet (hardware address %q)", ifname, ifi.HardwareAddr)
	}
	if err := LinkUp(ifname); err != nil {
		return Lease{}, err
	}
	conn, err := listenDHCP(ctx, ifname)
	if err != nil {
		return Lease{}, err
	}
	defer conn.Close()
	// Wake a blocked read when ctx ends.
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()

	c := &dhcpClient{conn: conn, mac: ifi.HardwareAddr, hostname: hostname, xid: rand.Uint32(), start: time.Now()}
	wait := dhcpFirstWait
	var last error
	for attempt := 1; ; attempt++ {
		// Retransmissions keep the transaction id, so a late answer to an
		// earlier one still counts.
		began := time.Now()
		l, err := c.exchange(ctx, wait)
		if err == nil {
			return l, nil
		}
		last = err
		if ctx.Err() != nil {
			return Lease{}, fmt.Errorf("DHCP on %s: no lease after %d attempts in %v (last: %v): %w",
				ifname, attempt, time.Since(c.start).Round(time.Millisecond), last, ctx.Err())
		}
		if errors.Is(err, errDHCPNak) {
			c.xid = rand.Uint32()
			continue // a new transaction at once, as RFC 2131 says
		}
		// A send that failed at once (link not ready yet) waits like an
		// unanswered one.
		if rest := wait - time.Since(began); rest > 0 {
			t := time.NewTimer(rest)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		wait = min(wait*2, dhcpMaxWait)
	}
}

// listenDHCP opens the client's UDP socket on port 68, tied to ifname.
// SO_BINDTODEVICE lets a socket on an interface without an address send
// broadcasts (from 0.0.0.0) and receive the server's broadcast replies,
// so no raw packet socket is needed.
func listenDHCP(ctx context.Context, ifname string) (net.PacketConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			s := int(fd)
			serr = errors.Join(
				unix.SetsockoptString(s, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, ifname),
				unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_BROADCAST, 1),
				unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1),
			)
		})
		return errors.Join(err, serr)
	}}
	conn, err := lc.ListenPacket(ctx, "udp4", fmt.Sprintf("0.0.0.0:%d", dhcpClientPort))
	if err != nil {
		return nil, fmt.Errorf("DHCP socket on %s: %w", ifname, err)
	}
	return conn, nil
}

type dhcpClient struct {
	conn     net.PacketConn
	mac      net.HardwareAddr
	hostname string
	xid      uint32
	start    time.Time
}

// exchange runs one DISCOVER/OFFER/REQUEST/ACK transaction, waiting up to
// wait for each answer.
func (c *dhcpClient) exchange(ctx context.Context, wait time.Duration) (Lease, error) {
	offer, err := c.roundTrip(ctx, c.message(dhcpDiscover), wait, func(m *dhcpMessage) bool {
		return m.msgType() == dhcpOffer && m.YIAddr.Is4() && m.optAddr(optServerID).IsValid()
	})
	if err != nil {
		return Lease{}, fmt.Errorf("waiting for an offer: %w", err)
	}
	server := offer.optAddr(optServerID)
	req := c.message(dhcpRequest)
	req.Options[optRequestedIP] = offer.YIAddr.AsSlice()
	req.Options[optServerID] = server.AsSlice()
	ack, err := c.roundTrip(ctx, req, wait, func(m *dhcpMessage) bool {
		t := m.msgType()
		return (t == dhcpAck || t == dhcpNak) && m.optAddr(optServerID) == server
	})
	if err != nil {
		return Lease{}, fmt.Errorf("waiting for an ack from %s: %w", server, err)
	}
	if ack.msgType() == dhcpNak {
		return Lease{}, fmt.Errorf("%w for %s (%s)", errDHCPNak, offer.YIAddr, ack.Options[optMessage])
	}
	return leaseFrom(ack)
}

// message starts a client message of type typ with the options every
// message carries.
func (c *dhcpClient) message(typ byte) *dhcpMessage {
	m := &dhcpMessage{
		Op:     bootRequest,
		XID:    c.xid,
		Secs:   uint16(min(time.Since(c.start)/time.Second, 0xffff)),
		Flags:  flagBroadcast,
		CHAddr: c.mac,
		Options: map[byte][]byte{
			optMessageType: {typ},
			optClientID:    append([]byte{1}, c.mac...), // hardware type 1, then the MAC
			optParamList:   {optSubnetMask, optRouter, optDNS, optLeaseTime, optServerID},
			optMaxSize:     {0x05, 0xdc}, // 1500: one Ethernet frame
		},
	}
	if c.hostname != "" {
		m.Options[optHostname] = []byte(c.hostname)
	}
	return m
}

var dhcpBroadcast = &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpServerPort}

// roundTrip broadcasts m and returns the first reply to this transaction
// that accept takes, or an error once wait has passed.
func (c *dhcpClient) roundTrip(ctx context.Context, m *dhcpMessage, wait time.Duration, accept func(*dhcpMessage) bool) (*dhcpMessage, error) {
	if _, err := c.conn.WriteTo(m.marshal(), dhcpBroadcast); err != nil {
		return nil, fmt.Errorf("send: %w", err)
	}
	deadline := time.Now().Add(wait)
	if err := c.conn.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	if ctx.Err() != nil { // AfterFunc may have fired before the deadline was set
		return nil, ctx.Err()
	}
	buf := make([]byte, 1500)
	for {
		n, _, err := c.conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil, fmt.Errorf("no answer in %v", wait)
			}
			return nil, err
		}
		r, err := parseDHCP(buf[:n])
		if err != nil || r.Op != bootReply || r.XID != c.xid || !macEqual(r.CHAddr, c.mac) {
			continue // another client's, or noise
		}
		if accept(r) {
			return r, nil
		}
	}
}

func macEqual(a, b net.HardwareAddr) bool { return string(a) == string(b) }

// LinkDown takes the named interface down.
func LinkDown(name string) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("interface %s: %w", name, err)
	}
	r, err := openRtnl()
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.setLinkFlags(ifi.Index, 0, unix.IFF_UP); err != nil {
		return fmt.Errorf("%s down: %w", name, err)
	}
	return nil
}

// ResolvConf renders /etc/resolv.conf for the given name servers. The
// resolver reads at most three.
func ResolvConf(dns []netip.Addr) []byte {
	var b []byte
	for _, a := range dns[:min(len(dns), 3)] {
		b = fmt.Appendf(b, "nameserver %s\n", a)
	}
	return b
}
