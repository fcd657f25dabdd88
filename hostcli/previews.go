package hostcli

import (
	"bytes"
	"context"
	"encoding/json"
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
	"reflect"
	"regexp"
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
// which the user's browser here can't reach. The mcp relay gives the user
// a URL on this machine's 127.0.0.1 instead: a local HTTP server whose
// every connection to the far side is the context's own ssh with -W to
// the far side's 127.0.0.1:PORT. No port is opened on the far side, no
// ssh options beyond the context's are needed, and nothing here listens
// beyond 127.0.0.1.
//
// It is HTTP, not a byte pipe, because the far side's preview answers
// only requests addressed to its own 127.0.0.1:PORT (its defence against
// DNS rebinding): the forward checks the Host the browser sent against
// its own address in the same way, then addresses the far preview as it
// expects.

const (
	exposeTool = "sandbox_expose_port"
	// maxForwards bounds the local listeners one relay opens (a hostile
	// far side can't make it open more).
	maxForwards = 16
	// fwdConns bounds the ssh processes of one forward at a time; fwdIdle
	// is how long one may sit idle, shorter than the far preview's own
	// idle limit (2 minutes), so this side closes first.
	fwdConns = 16
	fwdIdle  = time.Minute
	// The local server's own bounds, as the far preview's.
	fwdServeConns = 32
	fwdServeIdle  = 2 * time.Minute
)

// farPreviewPort reads u as a preview on the far side's loopback: exactly
// http://127.0.0.1:PORT[/path], PORT 1–65535 and written out. Anything
// else (another host, localhost, IPv6, https, user info) is not one.
func farPreviewPort(raw string) (*url.URL, int, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.User != nil || u.Opaque != "" || u.Hostname() != "127.0.0.1" {
		return nil, 0, false
	}
	if !portRe.MatchString(u.Port()) {
		return nil, 0, false
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil || p < 1 || p > 65535 {
		return nil, 0, false
	}
	return u, p, true
}

var portRe = regexp.MustCompile(`^[1-9][0-9]{0,4}$`)

// previewRelay is the mcp relay's part in previews: it notes which
// requests call sandbox_expose_port and rewrites their answers.
type previewRelay struct {
	ctxName string
	// open gives the local URL for the far side's port (forwards.open).
	open func(farPort int) (localPort int, err error)

	mu    sync.Mutex
	calls map[string]bool // ids of sandbox_expose_port calls unanswered
}

// request notes a client's message bound for the far side.
func (p *previewRelay) request(id json.RawMessage, method string, params json.RawMessage) {
	if method != "tools/call" || len(id) == 0 || string(id) == "null" {
		return
	}
	var call struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(params, &call) != nil || call.Name != exposeTool {
		return
	}
	p.mu.Lock()
	if p.calls == nil {
		p.calls = map[string]bool{}
	}
	p.calls[string(id)] = true
	p.mu.Unlock()
}

// response is the far side's answer line as the client gets it: an
// answer to a sandbox_expose_port call with a far loopback URL has a
// forwarded local one; every other line is passed as it came.
func (p *previewRelay) response(id json.RawMessage, line []byte) []byte {
	p.mu.Lock()
	ours := p.calls[string(id)]
	delete(p.calls, string(id))
	p.mu.Unlock()
	if !ours {
		return line
	}
	if out, ok := rewriteExpose(line, p.ctxName, p.open); ok {
		return out
	}
	return line
}

// rewriteExpose rewrites a tools/call answer of sandbox_expose_port whose
// envelope (structuredContent, or the text for clients without it) holds
// a preview URL on the far side's loopback: open forwards it, and the URL
// becomes the local one, with a note of where it leads, in both the
// structuredContent and the text. When open fails, the URL stays and a
// warning says why. ok is false when line is not such an answer.
func rewriteExpose(line []byte, ctxName string, open func(int) (int, error)) (out []byte, ok bool) {
	var msg map[string]json.RawMessage
	if decodeStrict(line, &msg) != nil || msg["result"] == nil {
		return nil, false
	}
	var res map[string]json.RawMessage
	if decodeStrict(msg["result"], &res) != nil {
		return nil, false
	}
	var isErr bool
	if res["isError"] != nil && (json.Unmarshal(res["isError"], &isErr) != nil || isErr) {
		return nil, false
	}
	var content []map[string]json.RawMessage
	if res["content"] != nil && json.Unmarshal(res["content"], &content) != nil {
		return nil, false
	}
	texts := make([]string, len(content))
	for i, c := range content {
		var typ string
		if json.Unmarshal(c["type"], &typ) == nil && typ == "text" {
			json.Unmarshal(c["text"], &texts[i])
		}
	}
	// The envelope: structuredContent, else the first text that is one.
	var env map[string]any
	if res["structuredContent"] != nil {
		if decodeStrict(res["structuredContent"], &env) != nil {
			return nil, false
		}
	} else {
		for _, t := range texts {
			if t != "" && decodeStrict([]byte(t), &env) == nil {
				break
			}
			env = nil
		}
	}
	result, _ := env["result"].(map[string]any)
	raw, _ := result["url"].(string)
	if env["ok"] != true || result == nil {
		return nil, false
	}
	far, farPort, isFar := farPreviewPort(raw)
	if !isFar {
		return nil, false
	}
	old := clone(env)
	local := ""
	if lp, err := open(farPort); err != nil {
		warnings, _ := env["warnings"].([]any)
		env["warnings"] = append(warnings, fmt.Sprintf("%s is on the machine of context %s, not the user's: forwarding it over SSH failed: %v", raw, ctxName, err))
	} else {
		u := *far
		u.Host = "127.0.0.1:" + strconv.Itoa(lp)
		local = u.String()
		result["url"] = local
		result["forwarded"] = fmt.Sprintf("%s is on the user's machine, forwarded over SSH (context %s) to the preview %s on the sandbox's machine; it works while this MCP session runs", local, ctxName, raw)
	}
	envJSON, err := encodeJSON(env)
	if err != nil {
		return nil, false
	}
	if res["structuredContent"] != nil {
		res["structuredContent"] = envJSON
	}
	for i, c := range content {
		if texts[i] == "" {
			continue
		}
		var t map[string]any
		text := texts[i]
		switch {
		case decodeStrict([]byte(text), &t) == nil && reflect.DeepEqual(t, old):
			text = string(envJSON)
		case local != "":
			text = strings.ReplaceAll(text, raw, local)
		}
		if c["text"], err = encodeJSON(text); err != nil {
			return nil, false
		}
	}
	if content != nil {
		if res["content"], err = encodeJSON(content); err != nil {
			return nil, false
		}
	}
	if msg["result"], err = encodeJSON(res); err != nil {
		return nil, false
	}
	b, err := encodeJSON(msg)
	if err != nil {
		return nil, false
	}
	return append(b, '\n'), true
}

// decodeStrict decodes one JSON value, numbers kept as written, nothing
// after it.
func decodeStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("more after the JSON value")
	}
	return nil
}

// encodeJSON is compact JSON on one line with keys sorted and without
// HTML escaping, as the envelope is written.
func encodeJSON(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// clone copies a decoded JSON object deeply enough for rewriteExpose's
// changes (the result object and the warnings) not to reach it.
func clone(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = clone(sub)
		}
		c[k] = v
	}
	return c
}

// forwards are the relay's local forwards, one per far port, until close.
type forwards struct {
	// argv is the ssh command line of one connection to the far side's
	// 127.0.0.1:port (remotes.Context.ForwardArgv).
	argv    func(port int) []string
	ctxName string

	mu     sync.Mutex
	byPort map[int]*forward
	closed bool
}

// forward serves one far preview on a local port.
type forward struct {
	fs                 *forwards
	farPort, localPort int
	srv                *http.Server
	tr                 *http.Transport

	mu     sync.Mutex
	conns  map[*sshConn]bool // live ssh processes
	closed bool
}

// open returns the local port forwarding to the far side's
// 127.0.0.1:farPort, opening it the first time.
func (fs *forwards) open(farPort int) (int, error) {
	if farPort < 1 || farPort > 65535 {
		return 0, fmt.Errorf("port %d: want 1–65535", farPort)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.closed {
		return 0, errors.New("the relay is ending")
	}
	if f := fs.byPort[farPort]; f != nil {
		return f.localPort, nil
	}
	if len(fs.byPort) >= maxForwards {
		return 0, fmt.Errorf("this session already forwards %d previews, the limit; start a new MCP session for more", maxForwards)
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
// its own) go to the far preview, addressed to its own port there.
func (f *forward) server() *http.Server {
	lp, fp := strconv.Itoa(f.localPort), strconv.Itoa(f.farPort)
	toFar := map[string]string{"127.0.0.1:" + lp: "127.0.0.1:" + fp, "localhost:" + lp: "localhost:" + fp}
	toLocal := map[string]string{"127.0.0.1:" + fp: "127.0.0.1:" + lp, "localhost:" + fp: "localhost:" + lp}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			host := toFar[strings.ToLower(r.In.Host)]
			r.Out.URL.Scheme, r.Out.URL.Host, r.Out.Host = "http", host, host
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
			http.Error(w, fmt.Sprintf("preview forwarded over SSH from context %s (its 127.0.0.1:%d): %v", f.fs.ctxName, f.farPort, err), http.StatusBadGateway)
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
	c, err := startSSHConn(f.fs.argv(f.farPort), fmt.Sprintf("ssh -W 127.0.0.1:%d (context %s)", f.farPort, f.fs.ctxName))
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

// closeAll ends every forward (the relay is ending).
func (fs *forwards) closeAll() {
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
	c.cmd.Stderr = &limitedWriter{w: &c.tail, n: 1024}
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
