package network

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// onRefusal gets every refusal (the guest's refusal log).
	onRefusal func(agentproto.NetRefusal)
	// conns caps open connections per agent and in all; nil: the
	// default caps.
	conns     *connLimiter
	connsOnce sync.Once
}

func (p *egressProxy) limit() *connLimiter {
	p.connsOnce.Do(func() {
		if p.conns == nil {
			p.conns = NewConnLimiter("egress proxy", maxProxyConnsPerAgent, maxProxyConns)
		}
	})
	return p.conns
}

func newEgressProxy(policyOf func(netip.Addr) (netpolicy.Policy, string, bool), record func(agentproto.NetRefusal), lg *log.Logger) *egressProxy {
	d := &net.Dialer{Timeout: 15 * time.Second}
	return &egressProxy{
		policyOf: policyOf,
		resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
		denied:    netpolicy.IsDenied,
		dial:      d.DialContext,
		ports:     proxyPorts,
		log:       lg,
		onRefusal: record,
	}
}

// Bounds of the proxy's work per connection: every connection holds
// descriptors in PID 1, which serves every agent.
const (
	// maxProxyHead bounds a request line and its headers (431 past it).
	maxProxyHead = 16 << 10
	// proxyHeadTimeout is how long a client may take to send a request
	// head, and a tunnel's first bytes (the TLS ClientHello).
	proxyHeadTimeout = 20 * time.Second
	// proxyIdleTimeout closes a tunnel that moved no byte either way for
	// that long.
	proxyIdleTimeout = 5 * time.Minute
	// maxProxyConnsPerAgent and maxProxyConns cap open connections.
	maxProxyConnsPerAgent = 64
	maxProxyConns         = 1024
)

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

// agentKey is the agent an identity of policyOf belongs to: a plugin's
// processes ("user+plugin") count against their agent.
func agentKey(user string) string {
	a, _, _ := strings.Cut(user, "+")
	return a
}

// headReader reads one request head at a time from a client, at most
// maxProxyHead bytes of it: lim runs out past that.
type headReader struct {
	lim *io.LimitedReader
	br  *bufio.Reader
	rec *recorder
}

// recorder keeps the first bytes read through it (the first head, which
// http.ReadRequest does not hand back whole: it drops Host).
type recorder struct {
	r   io.Reader
	buf []byte
	on  bool
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if r.on {
		r.buf = append(r.buf, p[:n]...)
	}
	return n, err
}

func newHeadReader(c net.Conn) *headReader {
	rec := &recorder{r: c, on: true}
	lim := &io.LimitedReader{R: rec, N: maxProxyHead}
	return &headReader{lim: lim, br: bufio.NewReaderSize(lim, 4096), rec: rec}
}

// firstHost is the Host header of the first request as sent, "" if none.
func (h *headReader) firstHost() string {
	head := h.rec.buf
	if i := bytes.Index(head, []byte("\r\n\r\n")); i >= 0 {
		head = head[:i]
	}
	lines := strings.Split(string(head), "\n")
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(strings.TrimSuffix(l, "\r"), ":")
		if ok && strings.EqualFold(k, "host") {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

var errHeadTooLarge = fmt.Errorf("the request line and headers are over %d bytes", maxProxyHead)

// next reads a request; its body (if any) is read from the conn without
// the head's limit.
func (h *headReader) next() (*http.Request, error) {
	h.lim.N = maxProxyHead
	req, err := http.ReadRequest(h.br)
	if err != nil {
		if h.lim.N <= 0 {
			return nil, errHeadTooLarge
		}
		return nil, err
	}
	h.lim.N = 1 << 62
	if h.rec.on {
		h.rec.on = false
		req.Header.Set("Host", h.firstHost())
	}
	return req, nil
}

// handle serves one client connection: one request, then the tunnel or
// the upstream response.
func (p *egressProxy) handle(c net.Conn) {
	defer c.Close()
	src, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	pol, user, _ := p.policyOf(src.Addr())
	hr := newHeadReader(c)
	c.SetReadDeadline(time.Now().Add(proxyHeadTimeout))
	release, lerr := p.limit().Acquire(agentKey(user))
	if lerr != nil {
		// Read what fits of the request, so the client sees the answer
		// rather than a reset.
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		hr.next()
		p.answer(c, user, "", "", http.StatusTooManyRequests, lerr.Error())
		return
	}
	defer release()
	req, err := hr.next()
	switch {
	case errors.Is(err, errHeadTooLarge):
		p.answer(c, user, "", "", http.StatusRequestHeaderFieldsTooLarge, err.Error())
		return
	case err != nil:
		if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
			p.answer(c, user, "", "", http.StatusBadRequest, "bad request: "+err.Error())
		}
		return
	}
	c.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	host, port, err := requestTarget(req)
	if err != nil {
		p.refuse(c, user, req.Host, "", err.Error())
		return
	}
	if req.Method != http.MethodConnect {
		// RFC 9112 lets a proxy ignore Host beside an absolute URL; a
		// different one is refused instead, so no server ever sees a
		// name the policy did not check. (headReader.next put the Host
		// line back as sent; http.ReadRequest drops it.)
		if h := req.Header.Get("Host"); h != "" && !sameHost(h, host, port) {
			p.refuse(c, user, host, port, fmt.Sprintf("the Host header names %q, not the requested %s", clip(h, 255), host))
			return
		}
	}
	up, user, err := p.connect(ctx, src.Addr(), host, port)
	if err != nil {
		p.refuse(c, user, host, port, err.Error())
		return
	}
	defer up.Close()
	if req.Method != http.MethodConnect {
		// Plain HTTP: forward this one request in origin form and close
		// afterwards; nothing else the client sends reaches upstream, so
		// a second request on the connection can't name another host.
		req.RequestURI = ""
		req.URL.Scheme, req.URL.Host = "", ""
		req.Header.Del("Proxy-Connection")
		req.Header.Del("Proxy-Authorization")
		req.Close = true
		if err := req.Write(up); err != nil {
			return
		}
		copyIdle(c, up, up, nil)
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	if pol.Mode != netpolicy.Domains {
		splice(c, hr.br, up)
		return
	}
	// A domain list: the name the client means is in the tunnel's first
	// bytes (SNI, or each request's Host), and must be on the list too.
	c.SetReadDeadline(time.Now().Add(proxyHeadTimeout))
	first, err := hr.br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == tlsRecordHandshake {
		raw, sni, err := readClientHello(hr.br)
		c.SetReadDeadline(time.Time{})
		if err == nil && !pol.AllowsName(sni) {
			err = fmt.Errorf("the TLS server name (SNI) %q is not in the agent's network policy", clip(sni, 255))
		}
		if err != nil {
			p.record(user, host, port, err.Error())
			// A fatal access_denied alert: the client's TLS stack
			// reports a refusal instead of a broken connection.
			c.Write([]byte{21, 3, 1, 0, 2, 2, 49})
			return
		}
		if _, err := up.Write(raw); err != nil {
			return
		}
		splice(c, hr.br, up)
		return
	}
	p.tunnelHTTP(c, hr, up, pol, user, host, port)
}

// tunnelHTTP relays plain HTTP through a CONNECT tunnel, checking each
// request's Host against the list before it goes upstream. A refused
// request ends the tunnel with a 403 once the answers before it are out.
func (p *egressProxy) tunnelHTTP(c net.Conn, hr *headReader, up net.Conn, pol netpolicy.Policy, user, host, port string) {
	last := new(atomic.Int64)
	last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	var refusing, upDone atomic.Bool
	go func() {
		copyIdle(c, up, up, last)
		if !refusing.Load() {
			// Upstream is done (a response that ends at close): pass the
			// end on and stop waiting for more requests.
			upDone.Store(true)
			if tc, ok := c.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			c.SetReadDeadline(time.Now())
		}
		close(done)
	}()
	var refused string
	for {
		c.SetReadDeadline(time.Now().Add(proxyIdleTimeout))
		if upDone.Load() {
			break
		}
		req, err := hr.next()
		if err != nil {
			if upDone.Load() {
				break
			}
			if errors.Is(err, errHeadTooLarge) {
				refused = err.Error()
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, net.ErrClosed) {
				refused = errNotTLS.Error() + ": " + err.Error()
			}
			if refused != "" {
				refusing.Store(true)
			}
			break
		}
		last.Store(time.Now().UnixNano())
		name, _, err := net.SplitHostPort(req.Host)
		if err != nil {
			name = req.Host
		}
		if req.Host == "" || !pol.AllowsName(name) {
			refusing.Store(true)
			refused = fmt.Sprintf("the Host header %q of a request in the tunnel is not in the agent's network policy", clip(req.Host, 255))
			break
		}
		if err := req.Write(up); err != nil {
			break
		}
	}
	if refused == "" {
		if tc, ok := up.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		<-done
		return
	}
	p.record(user, host, port, refused)
	// Answers to the requests before the refused one are the client's.
	if tc, ok := up.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	t := time.AfterFunc(5*time.Second, func() { up.Close() })
	<-done
	t.Stop()
	p.answer(c, user, host, port, http.StatusForbidden, refused)
}

// sameHost reports whether a Host header names host (and port, when it
// has one).
func sameHost(h, host, port string) bool {
	h = strings.ToLower(strings.TrimSpace(h))
	name, hp, err := net.SplitHostPort(h)
	if err != nil {
		name, hp = h, ""
	}
	return strings.TrimSuffix(name, ".") == strings.TrimSuffix(host, ".") && (hp == "" || hp == port)
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
	p.answer(c, user, host, port, http.StatusForbidden, reason)
}

// answer records a refusal and answers it with code and the reason.
func (p *egressProxy) answer(c net.Conn, user, host, port string, code int, reason string) {
	p.record(user, host, port, reason)
	what := "the request"
	if host != "" {
		what = net.JoinHostPort(host, port)
	}
	body := "osaurus-sandbox: the network policy refuses " + what + ": " + reason + "\n"
	if code != http.StatusForbidden {
		body = "osaurus-sandbox: the egress proxy refuses " + what + ": " + reason + "\n"
	}
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), strconv.Itoa(len(body)), body)
	if tc, ok := c.(*net.TCPConn); ok && code != http.StatusForbidden {
		// The client may still be sending (an oversized head): closing
		// with unread input would reset the connection and lose the
		// answer, so drain a bounded amount first.
		tc.CloseWrite()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	}
}

// record logs a refusal (the guest's refusal log and PID 1's log).
func (p *egressProxy) record(user, host, port, reason string) {
	if p.onRefusal != nil {
		n, _ := strconv.Atoi(port)
		// The name and the reason may carry what the client sent: keep
		// the log bounded.
		p.onRefusal(agentproto.NetRefusal{User: user, Dest: clip(host, 255), Port: n, Proto: "tcp",
			By: agentproto.RefusedByProxy, Reason: clip(reason, 400)})
	}
	if p.log != nil {
		p.log.Printf("network: refused %s -> %s port %s: %s", user, clip(host, 255), port, clip(reason, 400))
	}
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

// splice copies both ways until either side is done, or until neither
// moved a byte for proxyIdleTimeout. br holds what the client sent after
// the request head.
func splice(c net.Conn, br *bufio.Reader, up net.Conn) {
	last := new(atomic.Int64)
	last.Store(time.Now().UnixNano())
	done := make(chan struct{}, 2)
	go func() {
		copyIdle(up, br, c, last)
		if tc, ok := up.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		copyIdle(c, up, up, last)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

// copyIdle copies from src (reading srcConn) to dst until EOF, an error,
// or no byte moved for proxyIdleTimeout in this direction or the other
// (last, shared by both directions; nil: this one only).
func copyIdle(dst net.Conn, src io.Reader, srcConn net.Conn, last *atomic.Int64) {
	CopyIdleFor(dst, src, srcConn, last, proxyIdleTimeout)
}

// CopyIdleFor is copyIdle with another idle time.
func CopyIdleFor(dst net.Conn, src io.Reader, srcConn net.Conn, last *atomic.Int64, idle time.Duration) {
	if last == nil {
		last = new(atomic.Int64)
		last.Store(time.Now().UnixNano())
	}
	buf := make([]byte, 32<<10)
	for {
		srcConn.SetReadDeadline(time.Now().Add(idle))
		n, err := src.Read(buf)
		if n > 0 {
			last.Store(time.Now().UnixNano())
			dst.SetWriteDeadline(time.Now().Add(idle))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && time.Since(time.Unix(0, last.Load())) < idle {
				continue // the other direction is busy
			}
			return
		}
	}
}
