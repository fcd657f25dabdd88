//go:build linux

package network

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/osthread"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// agentSubnet holds every agent's veth pair: agent i gets the /30 at
// offset 4*i, the root end .1 and the agent's end .2. It is inside
// 10.0.0.0/8, which no agent reaches, so agents can't reach each other
// over it either.
var agentSubnet = netip.MustParsePrefix("10.213.0.0/16")

const maxAgentNets = 1<<14 - 1

// ErrNetPolicy: the guest can't enforce a network policy (a kernel
// without veth or nftables); only "none" can run.
var ErrNetPolicy = errors.New("network policy can't be enforced")

// NetPolicy gives each agent user its own network namespace and keeps the
// guest's nftables rules in step with the agents' policies. The host
// sends the policy with every process start (agentproto ExecRequest.Network);
// a change takes effect for that process and every later one.
//
// Enforcement lives in the root namespace, where agents have no rights:
// they can't change their addresses, routes or the rules, and a
// namespace an agent creates itself (through a user namespace) has no
// network at all.
type NetPolicy struct {
	log *log.Logger

	mu      sync.Mutex
	nets    map[string]*agentNet // by user name
	byAddr  map[netip.Addr]*agentNet
	next    int
	setup   bool  // table, forwarding and proxy are up
	setupOK error // why they are not, once tried
	proxy   *egressProxy
	// modules is closed when the kernel modules the policy needs (veth,
	// nftables) are loaded; nil means they are.
	modules <-chan struct{}
	// refusals is the log of refused connections; logRules says the
	// kernel logs the firewall's refusals into it (NFLOG works).
	refusals *netLog
	logRules bool
	// free are indexes of freed namespaces, for reuse.
	free []int
	// hostAddrs are the host's own addresses as the host reported them
	// (hello): under a user-mode NAT a connection to one reaches the
	// host's own services, so they are denied like the gateway.
	hostAddrs []netip.Addr
}

// maxNetsPerUser caps one user's namespaces: its own and one per plugin
// whose processes it runs. Each holds a veth pair and rules in PID 1.
const maxNetsPerUser = 32

// maxHostAddrs bounds the addresses a hello may name.
const maxHostAddrs = 256

// agentNet is one agent user's namespace.
type agentNet struct {
	user    string
	scope   string // "" or the plugin whose processes these are
	index   int
	ns      netns.NsHandle // open for the agent's lifetime (PID 1 keeps it)
	veth    string
	gw      netip.Addr
	addr    netip.Addr
	linked  bool   // the veth pair exists
	ifindex uint32 // of the root end, once linked
	policy  netpolicy.Policy
	inode   uint64 // of ns, to tell whose a bridge caller's namespace is
}

// NewNetPolicy returns the policy keeper of the guest.
func NewNetPolicy(lg *log.Logger) *NetPolicy {
	if lg == nil {
		lg = log.New(os.Stderr, "", 0)
	}
	n := &NetPolicy{log: lg, nets: map[string]*agentNet{}, byAddr: map[netip.Addr]*agentNet{}, next: 1, refusals: newNetLog()}
	n.proxy = newEgressProxy(n.policyOf, func(r agentproto.NetRefusal) {
		r.User, r.Plugin, _ = strings.Cut(r.User, scopeSep) // policyOf's key
		n.refusals.add(r)
	}, lg)
	n.proxy.denied = n.isDenied
	return n
}

// isDenied is netpolicy.IsDenied plus the host's own addresses.
func (n *NetPolicy) isDenied(a netip.Addr) bool {
	if netpolicy.IsDenied(a) {
		return true
	}
	a = a.Unmap()
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Contains(n.hostAddrs, a) || a == defaultGateway("/proc/net/route")
}

// SetHostAddrs records the host's own addresses (from its hello) and
// denies them to every agent. Entries that don't parse are skipped.
func (n *NetPolicy) SetHostAddrs(addrs []string) {
	var out []netip.Addr
	for _, s := range addrs {
		if len(out) == maxHostAddrs {
			break
		}
		if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
			out = append(out, a.Unmap())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	out = slices.Compact(out)
	n.mu.Lock()
	defer n.mu.Unlock()
	if slices.Equal(out, n.hostAddrs) {
		return
	}
	n.hostAddrs = out
	if n.setup {
		if err := installRules(n.ruleSet()); err != nil {
			n.log.Printf("network: denying the host's addresses: %v", err)
		}
	}
}

// defaultGateway is the IPv4 default gateway in a /proc/net/route file:
// the host as the guest sees it.
func defaultGateway(path string) netip.Addr {
	b, err := os.ReadFile(path)
	if err != nil {
		return netip.Addr{}
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "00000000" {
			continue
		}
		v, err := strconv.ParseUint(f[2], 16, 32)
		if err != nil || v == 0 {
			continue
		}
		// The kernel prints the address in host (little-endian) order.
		return netip.AddrFrom4([4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)})
	}
	return netip.Addr{}
}

// AfterModules makes n wait, before it uses veth or nftables, until
// ready is closed: boot loads their modules after the handshake. Call it
// before the first Prepare.
func (n *NetPolicy) AfterModules(ready <-chan struct{}) { n.modules = ready }

// scopeSep joins a user and a scope in a namespace key; neither a user
// name nor a scope can contain it.
const scopeSep = "+"

// MaxScopeLen bounds ExecRequest.NetScope.
const maxScopeLen = 64

// checkScope accepts a plugin id: lower-case letters, digits and '-'.
func checkScope(s string) error {
	if len(s) > maxScopeLen {
		return fmt.Errorf("net_scope is longer than %d characters", maxScopeLen)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("net_scope %q: use lower-case letters, digits and -", s)
		}
	}
	return nil
}

// Refusals answers a net_log call: the connections the policy refused.
func (n *NetPolicy) Refusals(ctx context.Context, req *agentproto.NetLogRequest) *agentproto.NetLogResponse {
	return n.refusals.read(ctx, req)
}

// byIfindex names the agent whose veth's root end has index i, and the
// kind of its policy, for the firewall's log entries.
func (n *NetPolicy) byIfindex(i uint32) (user, scope, mode string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, an := range n.nets {
		if an.linked && an.ifindex == i {
			return an.user, an.scope, [...]string{"none", "outbound", "domains"}[an.policy.Mode]
		}
	}
	return "", "", ""
}

// policyOf is the proxy's view: the agent whose namespace address is addr.
func (n *NetPolicy) policyOf(addr netip.Addr) (netpolicy.Policy, string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	an := n.byAddr[addr.Unmap()]
	if an == nil {
		return netpolicy.Policy{}, "", false
	}
	if an.scope != "" {
		return an.policy, an.user + scopeSep + an.scope, true
	}
	return an.policy, an.user, true
}

// Prepare applies setting for user (in scope: a plugin's processes get a
// namespace of their own, so a plugin's narrower policy never mixes with
// its agent's) and returns the namespace its process must start in and
// the environment to add (the proxy for a domain list). The returned
// handle belongs to n: don't close it.
func (n *NetPolicy) Prepare(user, scope, setting string) (netns.NsHandle, []string, error) {
	pol, err := netpolicy.Parse("network", setting)
	if err != nil {
		return netns.None(), nil, fmt.Errorf("%w: %v", ErrNetPolicy, err)
	}
	if err := checkScope(scope); err != nil {
		return netns.None(), nil, fmt.Errorf("%w: %v", ErrNetPolicy, err)
	}
	if pol.Mode != netpolicy.None && n.modules != nil {
		// Module loads always end (loaded or failed); a failure shows up
		// as ensureSetup's error.
		<-n.modules
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	an, err := n.netFor(user, scope)
	if err != nil {
		return netns.None(), nil, err
	}
	if pol.Mode != netpolicy.None {
		if err := n.ensureSetup(); err != nil {
			return netns.None(), nil, fmt.Errorf("%w (%v); the agent can run only with network none", ErrNetPolicy, err)
		}
		if err := n.link(an); err != nil {
			return netns.None(), nil, fmt.Errorf("%w: %v", ErrNetPolicy, err)
		}
	} else if n.ensureSetup() == nil && !an.linked {
		// none gets the veth pair too, when the rules are up: every
		// packet on it is refused, so the agent's attempts reach the
		// refusal log instead of failing unseen in its own namespace.
		// Without the rules it keeps only lo, which is just as closed.
		if err := n.link(an); err != nil {
			n.log.Printf("network: %s: %v (it keeps only loopback)", user, err)
		}
	}
	if pol.String() != an.policy.String() || !n.setup && pol.Mode != netpolicy.None {
		old := an.policy
		an.policy = pol
		if n.setup {
			if err := installRules(n.ruleSet()); err != nil {
				an.policy = old
				return netns.None(), nil, fmt.Errorf("%w: %v", ErrNetPolicy, err)
			}
		}
		n.log.Printf("network: %s: %s", user, pol)
	}
	var env []string
	if pol.Mode == netpolicy.Domains {
		url := "http://" + net.JoinHostPort(an.gw.String(), fmt.Sprint(ProxyPort))
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env = append(env, k+"="+url)
		}
		env = append(env, "NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1")
	}
	return an.ns, env, nil
}

// netFor returns the namespace of user in scope, creating it (with only
// lo, up) first.
func (n *NetPolicy) netFor(user, scope string) (*agentNet, error) {
	key := user
	if scope != "" {
		key = user + scopeSep + scope
	}
	if an := n.nets[key]; an != nil {
		return an, nil
	}
	if n.userNets(user) >= maxNetsPerUser {
		// Plugins' namespaces no process uses any more go first.
		n.reclaimIdle(user)
		if n.userNets(user) >= maxNetsPerUser {
			return nil, fmt.Errorf("%w: %s already has %d network namespaces (its own and one per plugin in use), the limit per agent; uninstall plugins it no longer uses", ErrNetPolicy, user, maxNetsPerUser)
		}
	}
	if len(n.free) == 0 && n.next > maxAgentNets {
		return nil, fmt.Errorf("%w: more than %d agent networks", ErrNetPolicy, maxAgentNets)
	}
	ns, err := newNetns()
	if err != nil {
		return nil, fmt.Errorf("%w: network namespace for %s: %v", ErrNetPolicy, user, err)
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err == nil {
		var lo netlink.Link
		if lo, err = h.LinkByName("lo"); err == nil {
			err = h.LinkSetUp(lo)
		}
		h.Close()
	}
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("%w: loopback for %s: %v", ErrNetPolicy, user, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(ns), &st); err != nil {
		ns.Close()
		return nil, fmt.Errorf("%w: network namespace for %s: %v", ErrNetPolicy, user, err)
	}
	i := n.next
	if len(n.free) > 0 {
		i, n.free = n.free[len(n.free)-1], n.free[:len(n.free)-1]
	} else {
		n.next++
	}
	base := agentSubnet.Addr().As4()
	off := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(4*i)
	an := &agentNet{
		user: user, scope: scope, index: i, ns: ns, veth: fmt.Sprintf("%s%d", vethPrefix, i),
		gw: u32Addr(off + 1), addr: u32Addr(off + 2), inode: st.Ino,
	}
	n.nets[key] = an
	n.byAddr[an.addr] = an
	return an, nil
}

// userNets counts user's namespaces.
func (n *NetPolicy) userNets(user string) int {
	k := 0
	for _, an := range n.nets {
		if an.user == user {
			k++
		}
	}
	return k
}

// Release frees user's namespace in scope (a plugin's, on uninstall), or
// with all every one of user's (the user is removed). A process still in
// a freed namespace keeps only its loopback: the veth pair goes with it.
func (n *NetPolicy) Release(user, scope string, all bool) error {
	if err := checkScope(scope); err != nil {
		return fmt.Errorf("%w: %v", ErrNetPolicy, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	freed := false
	for _, an := range n.nets {
		if an.user == user && (all || an.scope == scope) {
			n.freeNet(an)
			freed = true
		}
	}
	if !freed || !n.setup {
		return nil
	}
	if err := installRules(n.ruleSet()); err != nil {
		return fmt.Errorf("%w: %v", ErrNetPolicy, err)
	}
	return nil
}

// reclaimIdle frees user's plugin namespaces no process is in.
func (n *NetPolicy) reclaimIdle(user string) {
	inUse := netnsInUse("/proc")
	freed := false
	for _, an := range n.nets {
		if an.user != user || an.scope == "" {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(int(an.ns), &st) == nil && !inUse[st.Ino] {
			n.freeNet(an)
			freed = true
		}
	}
	if freed && n.setup {
		if err := installRules(n.ruleSet()); err != nil {
			n.log.Printf("network: %v", err)
		}
	}
}

// netnsInUse is the inodes of the network namespaces processes are in.
func netnsInUse(proc string) map[uint64]bool {
	out := map[uint64]bool{}
	ents, _ := os.ReadDir(proc)
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(proc+"/"+e.Name()+"/ns/net", &st) == nil {
			out[st.Ino] = true
		}
	}
	return out
}

// freeNet deletes an's veth pair, closes PID 1's handle on its namespace
// and forgets it; the caller reinstalls the rules.
func (n *NetPolicy) freeNet(an *agentNet) {
	if an.linked {
		if l, err := netlink.LinkByName(an.veth); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				n.log.Printf("network: deleting %s of %s: %v", an.veth, an.user, err)
			}
		}
	}
	an.ns.Close()
	key := an.user
	if an.scope != "" {
		key += scopeSep + an.scope
	}
	delete(n.nets, key)
	delete(n.byAddr, an.addr)
	n.free = append(n.free, an.index)
	n.log.Printf("network: freed the namespace of %s", key)
}

// Attribute names the namespace whose inode is ino: the user it was made
// for and its scope ("" for the agent's own processes, else the plugin
// id). ok is false when n made no such namespace.
func (n *NetPolicy) Attribute(ino uint64) (user, scope string, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, an := range n.nets {
		if an.inode == ino {
			return an.user, an.scope, true
		}
	}
	return "", "", false
}

func u32Addr(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// newNetns creates a network namespace on a throwaway thread, so no Go
// thread is ever left in the wrong namespace: the locked thread ends with
// its goroutine.
func newNetns() (netns.NsHandle, error) {
	return osthread.Throwaway(netns.New)
}

// link creates an's veth pair: the agent's end becomes eth0 in its
// namespace with a default route through the root end.
func (n *NetPolicy) link(an *agentNet) error {
	if an.linked {
		return nil
	}
	peer := an.veth + "p"
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: an.veth}, PeerName: peer, PeerNamespace: netlink.NsFd(int(an.ns))}
	if err := netlink.LinkAdd(v); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("veth pair for %s: %w", an.user, err)
	}
	root, err := netlink.LinkByName(an.veth)
	if err != nil {
		return fmt.Errorf("veth %s: %w", an.veth, err)
	}
	if err := netlink.AddrReplace(root, &netlink.Addr{IPNet: ipNet(an.gw, 30)}); err != nil {
		return fmt.Errorf("address of %s: %w", an.veth, err)
	}
	if err := netlink.LinkSetUp(root); err != nil {
		return fmt.Errorf("%s up: %w", an.veth, err)
	}
	an.ifindex = uint32(root.Attrs().Index)
	h, err := netlink.NewHandleAt(an.ns, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer h.Close()
	in, err := h.LinkByName(peer)
	if err != nil {
		return fmt.Errorf("veth end in %s's namespace: %w", an.user, err)
	}
	if err := h.LinkSetName(in, "eth0"); err != nil {
		return fmt.Errorf("naming eth0 for %s: %w", an.user, err)
	}
	if err := h.AddrReplace(in, &netlink.Addr{IPNet: ipNet(an.addr, 30)}); err != nil {
		return fmt.Errorf("address for %s: %w", an.user, err)
	}
	if err := h.LinkSetUp(in); err != nil {
		return fmt.Errorf("eth0 up for %s: %w", an.user, err)
	}
	gw := an.gw.AsSlice()
	if err := h.RouteReplace(&netlink.Route{LinkIndex: in.Attrs().Index, Gw: gw}); err != nil {
		return fmt.Errorf("default route for %s: %w", an.user, err)
	}
	an.linked = true
	return nil
}

func ipNet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, 32)}
}

// ensureSetup installs the table, turns on forwarding and starts the
// proxy, once. A failure is remembered: it won't heal without a reboot
// (a missing kernel module).
func (n *NetPolicy) ensureSetup() error {
	if n.setup {
		return nil
	}
	if n.setupOK != nil {
		return n.setupOK
	}
	err := func() error {
		// The refusal log first: the rules log only if someone reads.
		if c, err := openNFLog(); err != nil {
			n.refusals.warn("refusals by the guest's firewall are not recorded: " + err.Error())
		} else {
			n.logRules = true
			go func() {
				n.log.Printf("network: firewall log reader stopped: %v", readNFLog(c, n.refusals, n.byIfindex))
			}()
		}
		if err := installRules(n.ruleSet()); err != nil {
			if !n.logRules {
				return err
			}
			// A kernel with NFLOG but no nft log expression: the rules
			// matter more than their log.
			n.logRules = false
			n.refusals.warn("refusals by the guest's firewall are not recorded: " + err.Error())
			if err := installRules(n.ruleSet()); err != nil {
				return err
			}
		}
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644); err != nil {
			return fmt.Errorf("enabling forwarding: %w", err)
		}
		ln, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", ProxyPort))
		if err != nil {
			return fmt.Errorf("egress proxy: %w", err)
		}
		go func() {
			// serve returns only when the listener fails; PID 1 never
			// closes it.
			n.log.Printf("network: egress proxy stopped: %v", n.proxy.serve(ln))
		}()
		return nil
	}()
	if err != nil {
		n.setupOK = err
		n.log.Printf("network: policy enforcement unavailable: %v", err)
		return err
	}
	n.setup = true
	return nil
}

// ruleSet is the rules for the agents' current policies.
func (n *NetPolicy) ruleSet() ruleSet {
	rs := ruleSet{resolvers: resolvers("/etc/resolv.conf"), subnet: agentSubnet, logged: n.logRules,
		host: slices.Clone(n.hostAddrs)}
	if gw := defaultGateway("/proc/net/route"); gw.IsValid() && !slices.Contains(rs.host, gw) {
		rs.host = append(rs.host, gw)
	}
	for i := 1; i < n.next; i++ {
		for _, an := range n.nets {
			if an.index == i {
				rs.agents = append(rs.agents, agentRule{veth: an.veth, gw: an.gw, policy: an.policy})
			}
		}
	}
	return rs
}

// resolvers are the IPv4 name servers of resolv.conf: the VM's resolver,
// the only DNS server agents may ask.
func resolvers(path string) []netip.Addr {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil && a.Is4() {
				out = append(out, a)
			}
		}
	}
	return out
}

// ForkInNetns runs fork (a ForkExec) on a throwaway thread that joined ns
// and carries the agents' seccomp filter (PrepareFork), so the child
// starts there, under it; the thread ends after the fork instead of
// going back to the pool in ns.
func ForkInNetns(ns netns.NsHandle, fork func() (int, error)) (int, error) {
	return osthread.Throwaway(func() (int, error) {
		if err := PrepareFork(ns); err != nil {
			return 0, err
		}
		return fork()
	})
}

// PrepareFork readies the calling throwaway thread (osthread.Throwaway)
// for forking an agent's process: it joins ns, when set, and takes the
// agents' seccomp filter, which the child inherits.
func PrepareFork(ns netns.NsHandle) error {
	if int(ns) > 0 {
		if err := unix.Setns(int(ns), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("%w: joining the agent's network namespace: %v", ErrNetPolicy, err)
		}
	}
	return ApplyAgentFilter()
}
