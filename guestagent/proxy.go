package guestagent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// ProxyPort is where the egress proxy listens, on each agent's gateway
// address (the root side of its veth pair).
const ProxyPort = 3128

// proxyPorts are the destination ports a domain list opens: HTTP and HTTPS.
var proxyPorts = map[string]bool{"80": true, "443": true}

// Errors of the proxy's decision.
var (
	errProxyName    = errors.New("the name is not in the agent's network policy")
	errProxyPort    = errors.New("only ports 80 and 443 are allowed")
	errProxyPrivate = errors.New("the name resolves only to addresses no agent may reach (host, private, loopback, link-local, metadata)")
	errProxyAgent   = errors.New("the connection comes from no known agent")
)

// egressProxy enforces domain allowlists: an HTTP proxy (CONNECT for
// HTTPS, absolute URLs for plain HTTP) that checks the requested name
// against the agent's policy, resolves it itself and refuses answers in a
// denied range, so neither an IP literal nor a DNS answer pointing inside
// (DNS rebinding) gets through. Agents with a domain list can reach
// nothing else: the guest's rules drop their direct connections.
type egressProxy struct {
	// policyOf returns the policy in force for the agent connecting from
	// addr, and the agent's user name for the log.
	policyOf func(addr netip.Addr) (netpolicy.Policy, string, bool)
	// resolve and denied are net.DefaultResolver and netpolicy.IsDenied;
	// unit tests replace them to serve a loopback upstream.
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	denied  func(netip.Addr) bool
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	ports   map[string]bool // proxyPorts; tests add their server's
	log     *log.Logger
	// record gets every refusal (the guest's refusal log).
	record func(agentproto.NetRefusal)
}

func newEgressProxy(policyOf func(netip.Addr) (netpolicy.Policy, string, bool), record func(agentproto.NetRefusal), lg *log.Logger) *egressProxy {
	d := &net.Dialer{Timeout: 15 * time.Second}
	return &egressProxy{
		policyOf: policyOf,
		resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
		denied: netpolicy.IsDenied,
		dial:   d.DialContext,
		ports:  proxyPorts,
		log:    lg,
		record: record,
	}
}

// serve accepts connections until ln is closed.
func (p *egressProxy) serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return err
		}
		go p.handle(c)
	}
}

// handle serves one client connection: one request, then the tunnel or
// the upstream response.
func (p *egressProxy) handle(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	src, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	host, port, err := requestTarget(req)
	if err != nil {
		_, user, _ := p.policyOf(src.Addr())
		p.refuse(c, user, req.Host, "", err.Error())
		return
	}
	up, user, err := p.connect(ctx, src.Addr(), host, port)
	if err != nil {
		p.refuse(c, user, host, port, err.Error())
		return
	}
	defer up.Close()
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
			return
		}
	} else {
		// Plain HTTP: forward this one request in origin form and close
		// afterwards, so a second request on the connection can't name
		// another host.
		req.RequestURI = ""
		req.URL.Scheme, req.URL.Host = "", ""
		req.Header.Del("Proxy-Connection")
		req.Header.Del("Proxy-Authorization")
		req.Close = true
		if err := req.Write(up); err != nil {
			return
		}
	}
	splice(c, br, up)
}

// requestTarget is the host and port a proxy request asks for.
func requestTarget(req *http.Request) (host, port string, err error) {
	var hostport string
	switch {
	case req.Method == http.MethodConnect:
		hostport = req.RequestURI
	case req.URL != nil && req.URL.Scheme == "http" && req.URL.Host != "":
		hostport = req.URL.Host
		if req.URL.Port() == "" {
			hostport = net.JoinHostPort(req.URL.Hostname(), "80")
		}
	default:
		return "", "", fmt.Errorf("not a proxy request (want CONNECT host:port or an absolute http:// URL)")
	}
	host, port, err = net.SplitHostPort(hostport)
	if err != nil {
		return "", "", fmt.Errorf("bad target %q", hostport)
	}
	return strings.ToLower(host), port, nil
}

// connect makes the policy decision for agent src asking for host:port
// and, when allowed, dials an address the name resolves to that is in no
// denied range.
func (p *egressProxy) connect(ctx context.Context, src netip.Addr, host, port string) (net.Conn, string, error) {
	pol, user, ok := p.policyOf(src)
	if !ok {
		return nil, "", errProxyAgent
	}
	if !pol.AllowsName(host) {
		return nil, user, errProxyName
	}
	if !p.ports[port] {
		return nil, user, errProxyPort
	}
	addrs, err := p.resolve(ctx, host)
	if err != nil {
		return nil, user, fmt.Errorf("resolving %s: %w", host, err)
	}
	var lastErr error = errProxyPrivate
	for _, a := range addrs {
		if p.denied(a) {
			continue
		}
		c, err := p.dial(ctx, "tcp", net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, user, nil
		}
		lastErr = err
	}
	return nil, user, lastErr
}

// refuse answers 403 with the reason and records the refusal.
func (p *egressProxy) refuse(c net.Conn, user, host, port, reason string) {
	if p.record != nil {
		n, _ := strconv.Atoi(port)
		// The name and the reason may carry what the client sent: keep
		// the log bounded.
		p.record(agentproto.NetRefusal{User: user, Dest: clip(host, 255), Port: n, Proto: "tcp",
			By: agentproto.RefusedByProxy, Reason: clip(reason, 400)})
	}
	if p.log != nil {
		p.log.Printf("network: refused %s -> %s port %s: %s", user, host, port, reason)
	}
	body := "osaurus-sandbox: the network policy refuses " + net.JoinHostPort(host, port) + ": " + reason + "\n"
	fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s",
		strconv.Itoa(len(body)), body)
}

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// splice copies both ways until either side is done. br holds what the
// client sent after the request head.
func splice(c net.Conn, br *bufio.Reader, up net.Conn) {
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(up, br)
		if tc, ok := up.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		io.Copy(c, up)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}
