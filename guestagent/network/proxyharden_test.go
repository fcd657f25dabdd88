package network

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawProxy sends req to the proxy and returns the answer's status line
// and body.
func (f *proxyFixture) raw(t *testing.T, req string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go io.WriteString(c, req)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%.60q: %v", req, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxyBoundsHead(t *testing.T) {
	f := newProxyFixture(t, "up.example.com", true)
	big := "GET http://up.example.com:" + f.upPort + "/ HTTP/1.1\r\nX-Pad: " + strings.Repeat("a", maxProxyHead) + "\r\n\r\n"
	if code, body := f.raw(t, big); code != http.StatusRequestHeaderFieldsTooLarge || !strings.Contains(body, fmt.Sprint(maxProxyHead)) {
		t.Errorf("oversized head: %d %q, want 431 naming the limit", code, body)
	}
	// A head just under the limit still works.
	ok := "GET http://up.example.com:" + f.upPort + "/ok HTTP/1.1\r\nX-Pad: " + strings.Repeat("a", maxProxyHead/2) + "\r\n\r\n"
	if code, body := f.raw(t, ok); code != 200 || !strings.Contains(body, "/ok") {
		t.Errorf("head under the limit: %d %q", code, body)
	}
	<-f.seen
}

func TestProxyCapsConnsPerAgent(t *testing.T) {
	f := newProxyFixture(t, "up.example.com", true)
	f.proxy.connsOnce.Do(func() { f.proxy.conns = NewConnLimiter("egress proxy", 3, 100) })
	var open []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open = append(open, c)
	}
	// The three are counted once the proxy accepted them; the fourth is
	// refused with the limit named.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := f.raw(t, "GET http://up.example.com:"+f.upPort+"/ HTTP/1.1\r\n\r\n")
		if code == http.StatusTooManyRequests {
			if !strings.Contains(body, "3 connections") || !strings.Contains(body, "limit per agent") {
				t.Errorf("429 body %q does not name the limit", body)
			}
			break
		}
		<-f.seen
		if time.Now().After(deadline) {
			t.Fatalf("a fourth connection was never refused: %d %q", code, body)
		}
	}
	// Closing one makes room again.
	open[0].Close()
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, _ := f.raw(t, "GET http://up.example.com:"+f.upPort+"/again HTTP/1.1\r\n\r\n")
		if code == 200 {
			<-f.seen
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no room after a close: %d", code)
		}
	}
}

func TestProxyHostHeader(t *testing.T) {
	f := newProxyFixture(t, "up.example.com,api.wild.example", true)
	// Absolute form with another Host: refused, nothing dialed.
	code, body := f.raw(t, "GET http://up.example.com:"+f.upPort+"/ HTTP/1.1\r\nHost: other.example\r\n\r\n")
	if code != http.StatusForbidden || !strings.Contains(body, "Host header") {
		t.Errorf("absolute form with another Host: %d %q", code, body)
	}
	// In a CONNECT tunnel: the first request (listed Host) goes through,
	// the second (unlisted Host) ends the tunnel with 403.
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hp := "up.example.com:" + f.upPort
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hp, hp)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	fmt.Fprintf(c, "GET /one HTTP/1.1\r\nHost: %s\r\n\r\nGET /two HTTP/1.1\r\nHost: other.example\r\n\r\n", hp)
	r1, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := io.ReadAll(r1.Body)
	if r1.StatusCode != 200 || !strings.Contains(string(b1), "/one") {
		t.Errorf("listed Host in the tunnel: %d %q", r1.StatusCode, b1)
	}
	<-f.seen
	r2, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(r2.Body)
	if r2.StatusCode != http.StatusForbidden || !strings.Contains(string(b2), "other.example") {
		t.Errorf("unlisted Host in the tunnel: %d %q", r2.StatusCode, b2)
	}
	select {
	case r := <-f.seen:
		t.Errorf("upstream saw the refused request %s %s", r.Host, r.URL)
	default:
	}
}

func TestProxyChecksSNI(t *testing.T) {
	f := newProxyFixture(t, "up.example.com,api.wild.example", true)
	tunnel := func(sni string) string {
		t.Helper()
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hp := "up.example.com:" + f.upPort
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hp, hp)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		c.Write(clientHello(t, sni))
		// The upstream is plain HTTP: a hello that reaches it gets a 400.
		b, _ := io.ReadAll(br)
		return string(b)
	}
	if got := tunnel("api.wild.example"); !strings.Contains(got, "400 Bad Request") {
		t.Errorf("listed SNI: %q, want the upstream's answer", got)
	}
	if got := tunnel("other.example"); got != "\x15\x03\x01\x00\x02\x02\x31" {
		t.Errorf("unlisted SNI: %q, want an access_denied alert", got)
	}
	if got := tunnel(""); got != "\x15\x03\x01\x00\x02\x02\x31" {
		t.Errorf("no SNI: %q, want an access_denied alert", got)
	}
}

// TestProxyTunnelCloseDelimited: a response that ends when the upstream
// closes (HTTP/1.0, no length) ends for the client too, though the proxy
// reads the tunnel request by request.
func TestProxyTunnelCloseDelimited(t *testing.T) {
	f := newProxyFixture(t, "up.example.com", true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		http.ReadRequest(bufio.NewReader(c))
		io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\nuntil close")
		c.Close()
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	f.proxy.ports[port] = true
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hp := "up.example.com:" + port
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: %s\r\n\r\n", hp, hp)
	c.SetReadDeadline(time.Now().Add(time.Minute))
	b, err := io.ReadAll(c)
	if err != nil || !strings.HasSuffix(string(b), "until close") {
		t.Fatalf("close-delimited response through a tunnel: %q %v", b, err)
	}
}
