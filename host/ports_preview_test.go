package host

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
)

// backend is the agent's server: a real HTTP server on loopback, reached
// by the preview's relay in place of the guest's. Requests to /hold wait
// until release is closed; active and peak count them.
type backend struct {
	port                 int
	release              chan struct{}
	active, peak, served atomic.Int32
}

func newBackend(t *testing.T) *backend {
	t.Helper()
	b := &backend{release: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.port = ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.served.Add(1)
		if r.URL.Path == "/hold" {
			n := b.active.Add(1)
			for {
				p := b.peak.Load()
				if n <= p || b.peak.CompareAndSwap(p, n) {
					break
				}
			}
			<-b.release
			b.active.Add(-1)
		}
		fmt.Fprintf(w, "the agent's .env, seen by Host %s", r.Host)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return b
}

// exposeBackend opens a preview of b with the limits given and returns
// the preview's address (127.0.0.1:PORT).
func exposeBackend(t *testing.T, b *backend, maxConns int, idle time.Duration) string {
	t.Helper()
	p := &Ports{MaxConns: maxConns, Idle: idle, dial: func(ctx context.Context, _ string, port int) (io.ReadWriteCloser, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	}}
	t.Cleanup(func() { p.Close("", 0) })
	url, err := p.Expose(context.Background(), agents.Agent{Slug: "alice", Name: "alice"}, b.port)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/")
}

// get sends one request with the Host header given over a new connection
// to addr (always the loopback preview) and returns the status and body.
func get(t *testing.T, addr, host, path string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("Host %s: %v", host, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body)
}

// A preview answers only requests addressed to itself: a page that
// rebinds its own name to 127.0.0.1 (DNS rebinding) sends that name as
// Host and is refused before anything reaches the agent's server.
func TestPreviewRefusesForeignHost(t *testing.T) {
	b := newBackend(t)
	addr := exposeBackend(t, b, 0, 0)
	_, port, _ := net.SplitHostPort(addr)
	for _, tc := range []struct {
		host string
		want int
	}{
		{"127.0.0.1:" + port, 200},
		{"localhost:" + port, 200},
		{"LocalHost:" + port, 200},
		{"evil.example:" + port, 403},
		{"evil.example", 403},
		{"127.0.0.1", 403},
		{"localhost", 403},
		{"127.0.0.1:1" + port, 403},
		{"localhost.evil.example:" + port, 403},
		{"127.0.0.1.nip.io:" + port, 403},
		{"[::1]:" + port, 403},
		{"", 403},
	} {
		before := b.served.Load()
		code, body := get(t, addr, tc.host, "/")
		if code != tc.want {
			t.Errorf("Host %q: %d %q, want %d", tc.host, code, body, tc.want)
		}
		if tc.want == 403 && (b.served.Load() != before || strings.Contains(body, ".env")) {
			t.Errorf("Host %q reached the agent's server: %q", tc.host, body)
		}
	}
}

// A preview holds at most MaxConns connections: more wait until one
// closes, and the agent's server never sees more at once.
func TestPreviewBoundsConnections(t *testing.T) {
	const max, extra = 3, 4
	b := newBackend(t)
	addr := exposeBackend(t, b, max, time.Minute)
	var wg sync.WaitGroup
	codes := make(chan int, max+extra)
	for range max + extra {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _ := get(t, addr, addr, "/hold")
			codes <- code
		}()
	}
	if !testwait.Within(10*time.Second, 5*time.Millisecond, func() bool { return b.active.Load() == max }) {
		t.Fatalf("%d requests held, want %d", b.active.Load(), max)
	}
	close(b.release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("a queued request ended %d, want 200 once its turn came", c)
		}
	}
	if p := b.peak.Load(); p != max {
		t.Errorf("the agent's server saw %d connections at once through the preview, want at most %d", p, max)
	}
	if s := b.served.Load(); s != max+extra {
		t.Errorf("%d requests served, want %d", s, max+extra)
	}
}

// A connection that sends nothing, or nothing more after a response, is
// closed after the idle time.
func TestPreviewClosesIdleConnections(t *testing.T) {
	b := newBackend(t)
	addr := exposeBackend(t, b, 0, 300*time.Millisecond)
	for _, tc := range []struct {
		name  string
		first string
	}{
		{"silent from the start", ""},
		{"idle after a request", "GET / HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, tc.first)
		r := bufio.NewReader(c)
		if tc.first != "" {
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		// The deadline bounds the test; the preview must close well before.
		start := time.Now()
		c.SetReadDeadline(start.Add(10 * time.Second))
		_, err = r.ReadByte()
		if err != io.EOF {
			t.Errorf("%s: read %v after %v, want the preview to close the connection (EOF)", tc.name, err, time.Since(start))
		}
		c.Close()
	}
}
