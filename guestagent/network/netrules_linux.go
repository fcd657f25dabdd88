//go:build linux

package network

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// The rules live in one inet table of the guest's root network namespace.
// Agents' processes run in namespaces of their own, joined to the root
// one by a veth pair whose root end is named vethPrefix+index; the rules
// match on that name, which only root can change.
const (
	nftTable   = "osaurus_sandbox"
	vethPrefix = "osn"
	// chains
	chainForward = "forward"     // base: forward hook
	chainInput   = "input"       // base: input hook
	chainNAT     = "postrouting" // base: NAT postrouting hook
	chainAgentFw = "agent_forward"
	chainAgentIn = "agent_input"
	chainDenied  = "denied"
)

// agentRule is what the rules need to know of one agent.
type agentRule struct {
	veth   string     // root end of its veth pair
	gw     netip.Addr // address of the root end (the proxy listens there)
	policy netpolicy.Policy
}

// ruleSet is everything the table holds, built from the agents' policies.
type ruleSet struct {
	resolvers []netip.Addr // the VM's DNS servers (from resolv.conf)
	subnet    netip.Prefix // all agents' addresses, for NAT
	host      []netip.Addr // the host's own addresses, as the guest sees them
	agents    []agentRule
	// logged: every reject of an agent's packet first logs it to NFLOG
	// group nflogGroup, for the refusal log.
	logged bool
}

// installRules replaces the table's contents with rs in one atomic batch:
// no packet ever sees half a policy.
func installRules(rs ruleSet) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := &nftables.Table{Name: nftTable, Family: nftables.TableFamilyINet}
	c.AddTable(t)
	c.FlushTable(t)
	accept := nftables.ChainPolicyAccept
	fwd := c.AddChain(&nftables.Chain{Name: chainForward, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	in := c.AddChain(&nftables.Chain{Name: chainInput, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	nat := c.AddChain(&nftables.Chain{Name: chainNAT, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept})
	afw := c.AddChain(&nftables.Chain{Name: chainAgentFw, Table: t})
	ain := c.AddChain(&nftables.Chain{Name: chainAgentIn, Table: t})
	den := c.AddChain(&nftables.Chain{Name: chainDenied, Table: t})
	add := func(ch *nftables.Chain, ex ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: ex})
	}
	// refuse logs (when rs.logged) and rejects; kind tells the log why.
	refuse := func(kind string) []expr.Any {
		if !rs.logged {
			return []expr.Any{reject()}
		}
		return []expr.Any{&expr.Log{
			Key:   1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX | 1<<unix.NFTA_LOG_SNAPLEN,
			Group: nflogGroup, Snaplen: nflogSnaplen, Data: []byte(nflogPrefix + kind),
		}, reject()}
	}

	// Everything an agent sends goes through its chains; the rest of the
	// VM (root's own processes) is not affected.
	add(fwd, append(iifPrefix(vethPrefix), jump(chainAgentFw))...)
	add(in, append(iifPrefix(vethPrefix), jump(chainAgentIn))...)
	add(nat, cat(saddr(rs.subnet), oifPrefixNot(vethPrefix), []expr.Any{&expr.Masq{}})...)

	// denied: the ranges no agent reaches, whatever its policy.
	for _, p := range netpolicy.Denied() {
		add(den, cat(daddr(p), refuse(refuseDenied))...)
	}
	// The host's own addresses, wherever they are: a user-mode NAT
	// reaches the host's listeners on any address of its own.
	for _, a := range rs.host {
		add(den, cat(daddr(netip.PrefixFrom(a, a.BitLen())), refuse(refuseDenied))...)
	}

	for _, a := range rs.agents {
		if a.policy.Mode != netpolicy.Outbound {
			continue
		}
		// DNS goes to the VM's resolver only, before the denied ranges
		// (the resolver is QEMU's 10.0.2.3, or the Mac under vz).
		for _, r := range rs.resolvers {
			for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
				add(afw, cat(iif(a.veth), daddr(netip.PrefixFrom(r, r.BitLen())), l4proto(proto), dport(53), accept1())...)
			}
		}
	}
	for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
		add(afw, cat(l4proto(proto), dport(53), refuse(refuseDNS))...) // any other DNS server
	}
	add(afw, jump(chainDenied))
	for _, a := range rs.agents {
		if a.policy.Mode == netpolicy.Outbound {
			add(afw, cat(iif(a.veth), accept1())...)
		}
	}
	add(afw, refuse(refusePolicy)...) // none, domain lists, and unknown interfaces

	// Into the VM itself an agent reaches only its own proxy, and only
	// with a domain list.
	for _, a := range rs.agents {
		if a.policy.Mode == netpolicy.Domains {
			add(ain, cat(iif(a.veth), daddr(netip.PrefixFrom(a.gw, 32)), l4proto(unix.IPPROTO_TCP), dport(ProxyPort), accept1())...)
		}
	}
	add(ain, refuse(refuseVM)...)

	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: installing the network policy: %w", err)
	}
	return nil
}

func cat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func ifname(s string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, s)
	return b
}

func iif(name string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(name)}}
}

// iifPrefix matches interface names starting with p (nft's "p*"): the
// comparison covers only len(p) bytes.
func iifPrefix(p string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(p)}}
}

func oifPrefixNot(p string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte(p)}}
}

func nfproto(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

func l4proto(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

func dport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)}}
}

// addrMatch matches the source (src) or destination address against p,
// checking the family first so an IPv4 offset is never read from an IPv6
// header.
func addrMatch(p netip.Prefix, src bool) []expr.Any {
	p = p.Masked()
	var fam byte = unix.NFPROTO_IPV6
	off, n := uint32(24), uint32(16)
	if p.Addr().Is4() {
		fam, off, n = unix.NFPROTO_IPV4, 16, 4
	}
	if src {
		off -= n
	}
	mask := make([]byte, n)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return cat(nfproto(fam), []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: mask, Xor: make([]byte, n)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Addr().AsSlice()},
	})
}

func daddr(p netip.Prefix) []expr.Any { return addrMatch(p, false) }
func saddr(p netip.Prefix) []expr.Any { return addrMatch(p, true) }

func jump(chain string) expr.Any {
	return &expr.Verdict{Kind: expr.VerdictJump, Chain: chain}
}

func accept1() []expr.Any { return []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}} }

// reject answers "administratively prohibited" (TCP gets a reset), so a
// refused connection fails at once instead of hanging.
func reject() expr.Any {
	return &expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}
}

// InstalledRules reads the policy table back from the kernel and renders
// each rule as one line, "chain: match ... -> verdict", e.g.
//
//	denied: daddr 10.0.0.0/8 -> reject
//	agent_forward: iif osn1 -> accept
//
// It is what `sandbox-agent netrules` prints, and what the tests check:
// the rules as the kernel holds them, not as the agent meant them.
func InstalledRules() ([]string, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, err
	}
	t := &nftables.Table{Name: nftTable, Family: nftables.TableFamilyINet}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, fmt.Errorf("nftables: listing chains: %w", err)
	}
	var out []string
	found := false
	for _, ch := range chains {
		if ch.Table.Name != nftTable {
			continue
		}
		found = true
		rules, err := c.GetRules(t, ch)
		if err != nil {
			return nil, fmt.Errorf("nftables: rules of %s: %w", ch.Name, err)
		}
		for _, r := range rules {
			out = append(out, ch.Name+": "+describeRule(r.Exprs))
		}
	}
	if !found {
		return nil, fmt.Errorf("nftables: no table %s: the network policy is not installed", nftTable)
	}
	return out, nil
}

// describeRule renders the expression patterns installRules builds; any
// other expression shows as its Go type, so nothing is silently dropped.
func describeRule(ex []expr.Any) string {
	var words []string
	var load string // what register 1 holds
	var mask []byte
	for _, e := range ex {
		switch e := e.(type) {
		case *expr.Meta:
			switch e.Key {
			case expr.MetaKeyIIFNAME:
				load = "iif"
			case expr.MetaKeyOIFNAME:
				load = "oif"
			case expr.MetaKeyNFPROTO:
				load = "nfproto"
			case expr.MetaKeyL4PROTO:
				load = "l4proto"
			default:
				load = fmt.Sprintf("meta%d", e.Key)
			}
			mask = nil
		case *expr.Payload:
			mask = nil
			switch {
			case e.Base == expr.PayloadBaseTransportHeader && e.Offset == 2 && e.Len == 2:
				load = "dport"
			case e.Base == expr.PayloadBaseNetworkHeader && (e.Offset == 16 && e.Len == 4 || e.Offset == 24 && e.Len == 16):
				load = "daddr"
			case e.Base == expr.PayloadBaseNetworkHeader && (e.Offset == 12 && e.Len == 4 || e.Offset == 8 && e.Len == 16):
				load = "saddr"
			default:
				load = fmt.Sprintf("payload(%d,%d,%d)", e.Base, e.Offset, e.Len)
			}
		case *expr.Bitwise:
			mask = e.Mask
		case *expr.Cmp:
			op := " "
			if e.Op == expr.CmpOpNeq {
				op = " != "
			}
			words = append(words, load+op+cmpValue(load, e.Data, mask))
		case *expr.Verdict:
			switch e.Kind {
			case expr.VerdictAccept:
				words = append(words, "-> accept")
			case expr.VerdictDrop:
				words = append(words, "-> drop")
			case expr.VerdictJump:
				words = append(words, "-> jump "+e.Chain)
			default:
				words = append(words, fmt.Sprintf("-> verdict%d", e.Kind))
			}
		case *expr.Reject:
			words = append(words, "-> reject")
		case *expr.Masq:
			words = append(words, "-> masquerade")
		case *expr.Log:
			words = append(words, fmt.Sprintf("log group %d prefix %q", e.Group, e.Data))
		default:
			words = append(words, fmt.Sprintf("%T", e))
		}
	}
	// The family check before an address match is implied by the address.
	out := make([]string, 0, len(words))
	for i, w := range words {
		if strings.HasPrefix(w, "nfproto ") && i+1 < len(words) && (strings.HasPrefix(words[i+1], "daddr ") || strings.HasPrefix(words[i+1], "saddr ")) {
			continue
		}
		out = append(out, w)
	}
	return strings.Join(out, " ")
}

func cmpValue(load string, data, mask []byte) string {
	switch load {
	case "iif", "oif":
		s := strings.TrimRight(string(data), "\x00")
		if len(data) < unix.IFNAMSIZ {
			s += "*" // prefix match
		}
		return s
	case "nfproto":
		switch data[0] {
		case unix.NFPROTO_IPV4:
			return "ipv4"
		case unix.NFPROTO_IPV6:
			return "ipv6"
		}
	case "l4proto":
		switch data[0] {
		case unix.IPPROTO_TCP:
			return "tcp"
		case unix.IPPROTO_UDP:
			return "udp"
		}
	case "dport":
		if len(data) == 2 {
			return fmt.Sprint(binary.BigEndian.Uint16(data))
		}
	case "daddr", "saddr":
		a, ok := netip.AddrFromSlice(data)
		if !ok {
			break
		}
		bits := a.BitLen()
		if mask != nil {
			bits = 0
			for _, b := range mask {
				for ; b&0x80 != 0; b <<= 1 {
					bits++
				}
			}
		}
		return netip.PrefixFrom(a, bits).String()
	}
	return fmt.Sprintf("%x", data)
}
