//go:build linux

package network

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The network is configured with raw rtnetlink messages: the guest root
// may be any distribution, with or without iproute2 or busybox ip.

// rtnl is a NETLINK_ROUTE socket for request/ack exchanges. It belongs to
// the network namespace of the thread that opened it.
type rtnl struct {
	fd  int
	seq uint32
}

func openRtnl() (*rtnl, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	return &rtnl{fd: fd}, nil
}

func (r *rtnl) Close() error { return unix.Close(r.fd) }

// nlmsg builds one netlink request: header, fixed body, attributes.
type nlmsg struct {
	typ   uint16
	flags uint16
	b     []byte // body and attributes, without the header
}

func align4(n int) int { return (n + 3) &^ 3 }

func (m *nlmsg) attr(typ uint16, data []byte) {
	l := unix.SizeofRtAttr + len(data)
	a := make([]byte, align4(l))
	binary.NativeEndian.PutUint16(a[0:], uint16(l))
	binary.NativeEndian.PutUint16(a[2:], typ)
	copy(a[unix.SizeofRtAttr:], data)
	m.b = append(m.b, a...)
}

func (m *nlmsg) attrU32(typ uint16, v uint32) {
	m.attr(typ, binary.NativeEndian.AppendUint32(nil, v))
}

// do sends m and waits for the kernel's acknowledgement.
func (r *rtnl) do(m *nlmsg) error {
	r.seq++
	hdr := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(m.b))
	binary.NativeEndian.PutUint32(hdr[0:], uint32(unix.SizeofNlMsghdr+len(m.b)))
	binary.NativeEndian.PutUint16(hdr[4:], m.typ)
	binary.NativeEndian.PutUint16(hdr[6:], m.flags|unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(hdr[8:], r.seq)
	if err := unix.Sendto(r.fd, append(hdr, m.b...), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, msg := range msgs {
			if msg.Header.Seq != r.seq || msg.Header.Type != unix.NLMSG_ERROR {
				continue
			}
			if len(msg.Data) < 4 {
				return fmt.Errorf("netlink: short error message")
			}
			if code := int32(binary.NativeEndian.Uint32(msg.Data)); code != 0 {
				return unix.Errno(-code)
			}
			return nil
		}
	}
}

// up brings the interface called name up and returns its index, found
// with one ioctl: net.InterfaceByName dumps and parses every link, which
// the boot pays for in emulated time.
func (r *rtnl) up(name string) (int, error) {
	ifr, err := unix.NewIfreq(name)
	if err == nil {
		err = unix.IoctlIfreq(r.fd, unix.SIOCGIFINDEX, ifr)
	}
	if err != nil {
		return 0, fmt.Errorf("interface %s: %w", name, err)
	}
	idx := int(ifr.Uint32())
	if err := r.setLinkFlags(idx, unix.IFF_UP, unix.IFF_UP); err != nil {
		return 0, fmt.Errorf("%s up: %w", name, err)
	}
	return idx, nil
}

// setLinkFlags sets the interface flags in mask to flags.
func (r *rtnl) setLinkFlags(idx int, flags, mask uint32) error {
	m := &nlmsg{typ: unix.RTM_NEWLINK}
	info := make([]byte, unix.SizeofIfInfomsg)
	info[0] = unix.AF_UNSPEC
	binary.NativeEndian.PutUint32(info[4:], uint32(idx))
	binary.NativeEndian.PutUint32(info[8:], flags)
	binary.NativeEndian.PutUint32(info[12:], mask)
	m.b = info
	return r.do(m)
}

func family(a netip.Addr) byte {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// addAddr assigns p to the interface; assigning it again is not an error.
func (r *rtnl) addAddr(idx int, p netip.Prefix) error {
	addr := p.Addr()
	m := &nlmsg{typ: unix.RTM_NEWADDR, flags: unix.NLM_F_CREATE | unix.NLM_F_REPLACE}
	ifa := make([]byte, unix.SizeofIfAddrmsg)
	ifa[0] = family(addr)
	ifa[1] = byte(p.Bits())
	ifa[3] = unix.RT_SCOPE_UNIVERSE
	binary.NativeEndian.PutUint32(ifa[4:], uint32(idx))
	m.b = ifa
	m.attr(unix.IFA_LOCAL, addr.AsSlice())
	m.attr(unix.IFA_ADDRESS, addr.AsSlice())
	if addr.Is4() && p.Bits() < 31 {
		b := addr.As4()
		host := ^uint32(0) >> p.Bits()
		v := binary.BigEndian.Uint32(b[:]) | host
		m.attr(unix.IFA_BROADCAST, binary.BigEndian.AppendUint32(nil, v))
	}
	return r.do(m)
}

// addDefaultRoute routes everything via gw on the interface.
func (r *rtnl) addDefaultRoute(idx int, gw netip.Addr) error {
	m := &nlmsg{typ: unix.RTM_NEWROUTE, flags: unix.NLM_F_CREATE | unix.NLM_F_REPLACE}
	rt := make([]byte, unix.SizeofRtMsg)
	rt[0] = family(gw)
	rt[4] = unix.RT_TABLE_MAIN
	rt[5] = unix.RTPROT_BOOT
	rt[6] = unix.RT_SCOPE_UNIVERSE
	rt[7] = unix.RTN_UNICAST
	m.b = rt
	m.attr(unix.RTA_GATEWAY, gw.AsSlice())
	m.attrU32(unix.RTA_OIF, uint32(idx))
	return r.do(m)
}

// LinkUp brings the named interface up.
func LinkUp(name string) error {
	r, err := openRtnl()
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = r.up(name)
	return err
}

// ConfigureInterface brings name up with address addr and, when gw is
// valid, a default route through gw.
func ConfigureInterface(name string, addr netip.Prefix, gw netip.Addr) error {
	r, err := openRtnl()
	if err != nil {
		return err
	}
	defer r.Close()
	idx, err := r.up(name)
	if err != nil {
		return err
	}
	if err := r.addAddr(idx, addr); err != nil {
		return fmt.Errorf("%s address %s: %w", name, addr, err)
	}
	if gw.IsValid() {
		if err := r.addDefaultRoute(idx, gw); err != nil {
			return fmt.Errorf("default route via %s: %w", gw, err)
		}
	}
	return nil
}

// FirstInterface waits up to timeout for a network interface other than
// lo to appear in sysDir (/sys/class/net) and returns the first by name.
func FirstInterface(sysDir string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		ents, err := os.ReadDir(sysDir)
		if err == nil {
			var names []string
			for _, e := range ents {
				if e.Name() != "lo" {
					names = append(names, e.Name())
				}
			}
			if len(names) > 0 {
				slices.Sort(names)
				return names[0], nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no network interface appeared in %s", sysDir)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
