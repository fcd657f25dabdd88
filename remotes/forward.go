package remotes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/netutil"
)

// Previews through a remote context (docs/remote.md): an agent's
// sandbox_expose_port answers with a URL on the far machine's loopback,
// which the user's browser here can't reach. Forwards give the user a
// URL on this machine's 127.0.0.1 instead: a local HTTP server whose
// every connection to the far side is the context's own ssh with -W to
// the far side's 127.0.0.1:PORT. No port is opened on the far side, no
// ssh options beyond the context's are needed, and nothing here listens
// beyond 127.0.0.1. The mcp relay and the window's Ports tab use them.
//
// It is HTTP, not a byte pipe, because the far side's preview answers
// only requests addressed to its own 127.0.0.1:PORT (its defence against
// DNS rebinding): the forward checks the Host the browser sent against
// its own address in the same way, then addresses the far preview as it
// expects.

const (
	// MaxForwards bounds the local listeners one Forwards opens (a
	// hostile far side can't make it open more).
	MaxForwards = 16
	// fwdConns bounds the ssh processes of one forward at a time; fwdIdle
	// is how long one may sit idle, shorter than the far preview's own
	// idle limit (2 minutes), so this side closes first.
	fwdConns = 16
	fwdIdle  = time.Minute
	// The local server's own bounds, as the far preview's.
	fwdServeConns = 32
	fwdServeIdle  = 2 * time.Minute
)

// Forwards are local forwards to one context's previews, one per far
// port, until CloseAll.
type Forwards struct {
	// Argv is the ssh command line of one connection to the far side's
	// 127.0.0.1:port (Context.ForwardArgv).
	Argv func(port int) []string
	// CtxName names the context in errors.
	CtxName string

	mu     sync.Mutex
	byPort map[int]*forward
	closed bool
}

// forward serves one far preview on a local port.
type forward struct {
	fs                 *Forwards
	farPort, localPort int
	srv                *http.Server
	tr                 *http.Transport

	mu     sync.Mutex
	conns  map[*sshConn]bool // live ssh processes
	closed bool
}

// Forwards is a new set of forwards to c's previews.
func (c Context) Forwards() *Forwards { return &Forwards{Argv: c.ForwardArgv, CtxName: c.Name} }

// Open returns the local port forwarding to the far side's
// 127.0.0.1:farPort, opening it the first time.
func (fs *Forwards) Open(farPort int) (int, error) {
	if farPort < 1 || farPort > 65535 {
		return 0, fmt.Errorf("port %d: want 1–65535", farPort)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.closed {
		return 0, errors.New("the forwards are closed")
	}
	if f := fs.byPort[farPort]; f != nil {
		return f.localPort, nil
	}
	if len(fs.byPort) >= MaxForwards {
		return 0, fmt.Errorf("this session already forwards %d previews, the limit; start a new one (an MCP session, or the window) for more", MaxForwards)
	}
	// The far side's port number when it is free here, so the page's
	// address is the same on both machines; else any.
	ln, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(farPort))
	if err != nil {
		if ln, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
			return 0, fmt.Errorf("listening on 127.0.0.1: %w", err)
		}
	}
	f := &forward{fs: fs, farPort: farPort, localPort: ln.Addr().(*net.TCPAddr).Port, conns: map[*sshConn]bool{}}
	f.tr = &http.Transport{
		DialContext:         func(context.Context, string, string) (net.Conn, error) { return f.dial() },
		MaxConnsPerHost:     fwdConns,
		MaxIdleConnsPerHost: fwdConns,
		IdleConnTimeout:     fwdIdle,
		DisableCompression:  true,
	}
	f.srv = f.server()
	if fs.byPort == nil {
		fs.byPort = map[int]*forward{}
	}
	fs.byPort[farPort] = f
	go f.srv.Serve(netutil.LimitListener(ln, fwdServeConns))
	return f.localPort, nil
}

// server is the forward's local HTTP server: requests addressed to it
// (Host 127.0.0.1:LOCAL or localhost:LOCAL, as the far preview checks
// its own) go to the far preview, addressed to its own port there. A
// request's Origin that is this forward's own becomes the far page's own
// (a form posted from the page to itself, as a secret prompt's page
// checks); any other Origin passes as it came, to be refused there.
func (f *forward) server() *http.Server {
	lp, fp := strconv.Itoa(f.localPort), strconv.Itoa(f.farPort)
	toFar := map[string]string{"127.0.0.1:" + lp: "127.0.0.1:" + fp, "localhost:" + lp: "localhost:" + fp}
	toLocal := map[string]string{"127.0.0.1:" + fp: "127.0.0.1:" + lp, "localhost:" + fp: "localhost:" + lp}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			host := toFar[strings.ToLower(r.In.Host)]
			r.Out.URL.Scheme, r.Out.URL.Host, r.Out.Host = "http", host, host
			if o, ok := strings.CutPrefix(strings.ToLower(r.In.Header.Get("Origin")), "http://"); ok {
				if far, ok := toFar[o]; ok {
					r.Out.Header.Set("Origin", "http://"+far)
				}
			}
		},
		// A redirect to the far preview's own address is to this one.
		ModifyResponse: func(r *http.Response) error {
			if loc, err := url.Parse(r.Header.Get("Location")); err == nil && loc.Scheme == "http" {
				if h, ok := toLocal[strings.ToLower(loc.Host)]; ok {
					loc.Host = h
					r.Header.Set("Location", loc.String())
				}
			}
			return nil
		},
		Transport: f.tr,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, fmt.Sprintf("preview forwarded over SSH from context %s (its 127.0.0.1:%d): %v", f.fs.CtxName, f.farPort, err), http.StatusBadGateway)
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	return &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, ok := toFar[strings.ToLower(r.Host)]; !ok {
				http.Error(w, fmt.Sprintf("this preview answers only requests to http://127.0.0.1:%s/ (Host %q refused: a page on another name can't read it)", lp, r.Host), http.StatusForbidden)
				return
			}
			proxy.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: fwdServeIdle,
		IdleTimeout:       fwdServeIdle,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
}

// dial starts one ssh -W connection to the far port.
func (f *forward) dial() (net.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errors.New("the forward is closed")
	}
	c, err := startSSHConn(f.fs.Argv(f.farPort), fmt.Sprintf("ssh -W 127.0.0.1:%d (context %s)", f.farPort, f.fs.CtxName))
	if err != nil {
		return nil, err
	}
	c.onClose = func() {
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
	}
	f.conns[c] = true
	return c, nil
}

// close ends the forward: its listener, its clients' connections and
// every ssh process it started, which are gone when it returns.
func (f *forward) close() {
	f.srv.Close()
	f.tr.CloseIdleConnections()
	f.mu.Lock()
	f.closed = true
	live := make([]*sshConn, 0, len(f.conns))
	for c := range f.conns {
		live = append(live, c)
	}
	f.mu.Unlock()
	for _, c := range live {
		c.Close()
	}
}

// CloseAll ends every forward (their session is ending): their listeners,
// their clients' connections and every ssh process they started, which
// are gone when it returns. Open fails after it.
func (fs *Forwards) CloseAll() {
	fs.mu.Lock()
	fs.closed = true
	all := fs.byPort
	fs.byPort = nil
	fs.mu.Unlock()
	for _, f := range all {
		f.close()
	}
}

// sshConn is one ssh -W process as a net.Conn: its stdin and stdout are
// pipes of this process (not a socket: ssh ending its output then reads
// as the end of the connection here).
type sshConn struct {
	r, w    *os.File
	cmd     *exec.Cmd
	name    string
	done    chan struct{} // closed when ssh was waited for
	werr    error
	tail    strings.Builder // ssh's stderr, the end of it
	got     atomic.Bool     // bytes arrived
	once    sync.Once
	onClose func()
}

func startSSHConn(argv []string, name string) (*sshConn, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	c := &sshConn{r: outR, w: inW, name: name, done: make(chan struct{})}
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Stdin, c.cmd.Stdout = inR, outW
	c.cmd.Stderr = &LastBytes{W: &c.tail, N: 1024}
	// Its own process group: a terminal's Ctrl-C is the relay's to
	// handle, and closing kills ssh with any ProxyCommand it started.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A ProxyCommand's child that kept ssh's stderr can't hold Wait.
	c.cmd.WaitDelay = 5 * time.Second
	err = c.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		outR.Close()
		inW.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() {
		c.werr = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// Read reads the far side's bytes; ssh ending before any arrived (it
// could not connect or forward) is an error with its own words.
func (c *sshConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.got.Store(true)
	}
	if err == io.EOF && !c.got.Load() {
		<-c.done
		if c.werr != nil {
			why := strings.TrimSpace(c.tail.String())
			switch {
			case strings.Contains(why, "administratively prohibited"):
				why += "; the far side's sshd forbids forwarding: allow it there for this user (AllowTcpForwarding local, in sshd_config)"
			case strings.Contains(why, "forwarding failed") || strings.Contains(why, "open failed"):
				// ssh says which at log level INFO, not at ERROR.
				why += "; the far side's sshd could not open the connection: the preview may have closed there, or its sshd forbids forwarding (allow it for this user: AllowTcpForwarding local, in sshd_config)"
			}
			return 0, fmt.Errorf("%s failed (%v): %s", c.name, c.werr, why)
		}
	}
	return n, err
}

func (c *sshConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// Close ends the connection and its ssh processes, and waits for ssh.
func (c *sshConn) Close() error {
	c.once.Do(func() {
		c.w.Close()
		c.r.Close()
		select {
		case <-c.done: // gone, its pid maybe another's
		default:
			syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		}
		<-c.done
		if c.onClose != nil {
			c.onClose()
		}
	})
	return nil
}

func (c *sshConn) SetDeadline(t time.Time) error {
	return errors.Join(c.r.SetReadDeadline(t), c.w.SetWriteDeadline(t))
}
func (c *sshConn) SetReadDeadline(t time.Time) error  { return c.r.SetReadDeadline(t) }
func (c *sshConn) SetWriteDeadline(t time.Time) error { return c.w.SetWriteDeadline(t) }
func (c *sshConn) LocalAddr() net.Addr                { return sshAddr(c.name) }
func (c *sshConn) RemoteAddr() net.Addr               { return sshAddr(c.name) }

type sshAddr string

func (a sshAddr) Network() string { return "ssh" }
func (a sshAddr) String() string  { return string(a) }

// LastBytes keeps the last N bytes written to W (roughly: it keeps whole
// writes), for the end of a command's stderr in an error.
type LastBytes struct {
	W *strings.Builder
	N int
}

func (l *LastBytes) Write(p []byte) (int, error) {
	if l.W.Len()+len(p) > l.N {
		s := l.W.String() + string(p)
		if len(s) > l.N {
			s = s[len(s)-l.N:]
		}
		l.W.Reset()
		l.W.WriteString(s)
		return len(p), nil
	}
	return l.W.Write(p)
}
