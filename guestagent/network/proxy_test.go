package network

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// proxyFixture is the egress proxy in front of a loopback upstream. Names
// resolve through a fixed table; loopback counts as public here only so
// the upstream can be on this machine; everything else is judged by
// netpolicy.IsDenied as in the guest.
type proxyFixture struct {
	proxy    *egressProxy
	log      *netLog
	addr     string // proxy listen address
	upPort   string
	mu       sync.Mutex
	dialed   []string
	upstream *httptest.Server
	seen     chan *http.Request
}

func newProxyFixture(t *testing.T, policy string, known bool) *proxyFixture {
	t.Helper()
	f := &proxyFixture{seen: make(chan *http.Request, 8)}
	f.upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.seen <- r
		fmt.Fprintf(w, "upstream %s %s", r.Host, r.URL.Path)
	}))
	t.Cleanup(f.upstream.Close)
	_, f.upPort, _ = net.SplitHostPort(f.upstream.Listener.Addr().String())

	pol := netpolicy.MustParse(policy)
	names := map[string][]netip.Addr{
		"up.example.com":      {netip.MustParseAddr("127.0.0.1")},
		"api.wild.example":    {netip.MustParseAddr("127.0.0.1")},
		"private.example.com": {netip.MustParseAddr("10.0.2.2"), netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("::ffff:192.168.1.1")},
	}
	f.log = newNetLog()
	p := newEgressProxy(func(netip.Addr) (netpolicy.Policy, string, bool) { return pol, "agent-t", known }, f.log.add, nil)
	p.resolve = func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := names[host]; ok {
			return a, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
	loop := netip.MustParseAddr("127.0.0.1")
	p.denied = func(a netip.Addr) bool { return a != loop && netpolicy.IsDenied(a) }
	d := &net.Dialer{}
	p.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		f.mu.Lock()
		f.dialed = append(f.dialed, addr)
		f.mu.Unlock()
		return d.DialContext(ctx, network, addr)
	}
	p.ports = map[string]bool{"80": true, "443": true, f.upPort: true}
	f.proxy = p
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go p.serve(ln)
	f.addr = ln.Addr().String()
	return f
}

func (f *proxyFixture) get(t *testing.T, target string) (int, string) {
	t.Helper()
	pu, _ := url.Parse("http://" + f.addr)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	resp, err := c.Get(target)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// connect opens a CONNECT tunnel by hand and, when it is granted, sends
// one request through it.
func (f *proxyFixture) connect(t *testing.T, hostport string) (string, string) {
	t.Helper()
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.Status, string(b)
	}
	fmt.Fprintf(c, "GET /tunnel HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hostport)
	r2, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r2.Body)
	return resp.Status, string(b)
}

func TestProxyAllows(t *testing.T) {
	f := newProxyFixture(t, "up.example.com,*.wild.example", true)
	code, body := f.get(t, "http://up.example.com:"+f.upPort+"/x")
	if code != 200 || body != "upstream up.example.com:"+f.upPort+" /x" {
		t.Fatalf("plain HTTP: %d %q", code, body)
	}
	r := <-f.seen
	if r.RequestURI != "/x" || r.Header.Get("Proxy-Connection") != "" {
		t.Errorf("upstream got %q with headers %v: want origin form without proxy headers", r.RequestURI, r.Header)
	}
	if status, body := f.connect(t, "api.wild.example:"+f.upPort); !strings.HasPrefix(status, "200") || body != "upstream api.wild.example:"+f.upPort+" /tunnel" {
		t.Fatalf("CONNECT: %s %q", status, body)
	}
	<-f.seen
}

func TestProxyRefuses(t *testing.T) {
	f := newProxyFixture(t, "up.example.com,private.example.com", true)
	tests := []struct {
		what, target, reason string
	}{
		{"unlisted name", "http://other.example.com:%s/", "not in the agent's network policy"},
		{"IP literal", "http://127.0.0.1:%s/", "not in the agent's network policy"},
		{"listed name with private answers", "http://private.example.com:%s/", "resolves only to addresses no agent may reach"},
		{"listed name on another port", "http://up.example.com:25/%s", "only ports 80 and 443"},
	}
	for _, tc := range tests {
		target := tc.target
		if strings.Contains(target, "%s") {
			target = fmt.Sprintf(target, f.upPort)
		}
		code, body := f.get(t, target)
		if code != http.StatusForbidden || !strings.Contains(body, tc.reason) {
			t.Errorf("%s: %d %q, want 403 with %q", tc.what, code, body, tc.reason)
		}
		if status, body := f.connect(t, strings.TrimSuffix(strings.TrimPrefix(target, "http://"), "/")); !strings.HasPrefix(status, "403") || !strings.Contains(body, tc.reason) {
			if tc.what != "listed name on another port" { // the URL form has a path, not a CONNECT target
				t.Errorf("%s over CONNECT: %s %q", tc.what, status, body)
			}
		}
	}
	f.mu.Lock()
	dialed := f.dialed
	f.mu.Unlock()
	if len(dialed) != 0 {
		t.Errorf("the proxy dialed %v for refused requests", dialed)
	}
	got := f.log.read(context.Background(), &agentproto.NetLogRequest{}).Entries
	n := 0
	for _, e := range got {
		n += e.Count
	}
	if n < len(tests) || len(got) == 0 {
		t.Fatalf("refusals recorded: %d in %+v", n, got)
	}
	for _, e := range got {
		if e.User != "agent-t" || e.Dest == "" || e.Time.IsZero() || e.By != agentproto.RefusedByProxy || e.Reason == "" {
			t.Errorf("refusal entry %+v", e)
		}
	}

	// Not a proxy request at all.
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "GET /x HTTP/1.1\r\nHost: up.example.com\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("origin-form request: %v %v, want 403", resp, err)
	}
}

func TestProxyUnknownAgent(t *testing.T) {
	f := newProxyFixture(t, "outbound", false)
	if code, body := f.get(t, "http://up.example.com:"+f.upPort+"/"); code != http.StatusForbidden || !strings.Contains(body, "no known agent") {
		t.Fatalf("unknown source: %d %q", code, body)
	}
}

func TestRequestTarget(t *testing.T) {
	tests := []struct {
		raw, host, port string
		ok              bool
	}{
		{"CONNECT Example.COM:443 HTTP/1.1\r\nHost: x\r\n\r\n", "example.com", "443", true},
		{"GET http://example.com/a HTTP/1.1\r\nHost: example.com\r\n\r\n", "example.com", "80", true},
		{"GET http://example.com:8080/a HTTP/1.1\r\nHost: example.com\r\n\r\n", "example.com", "8080", true},
		{"GET https://example.com/a HTTP/1.1\r\nHost: example.com\r\n\r\n", "", "", false},
		{"GET /a HTTP/1.1\r\nHost: example.com\r\n\r\n", "", "", false},
		{"CONNECT example.com HTTP/1.1\r\nHost: x\r\n\r\n", "", "", false},
	}
	for _, tc := range tests {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(tc.raw)))
		if err != nil {
			t.Fatalf("%q: %v", tc.raw, err)
		}
		host, port, err := requestTarget(req)
		if (err == nil) != tc.ok || host != tc.host || port != tc.port {
			t.Errorf("%q: %q %q %v", tc.raw, host, port, err)
		}
	}
}
