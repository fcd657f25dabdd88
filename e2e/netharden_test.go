//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
)

// nhPy is the agents' side of TestNetHarden: Python in the guest, run as
// an agent. Every connection goes to the agent's egress proxy (its
// gateway, from HTTPS_PROXY) or to the bridge socket; the names it asks
// for resolve (the guest's /etc/hosts) to an address on the VM's own
// loopback.
const nhPy = `import os, socket, ssl, sys, threading, time, json
from urllib.parse import urlparse

u = urlparse(os.environ.get("HTTPS_PROXY", "http://0.0.0.0:1"))
PROXY = (u.hostname, u.port)
BRIDGE = "/run/osaurus-bridge.sock"

def proxy():
    return socket.create_connection(PROXY, timeout=60)

def bridge():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(BRIDGE)
    return s

def head(s):
    data = b""
    while b"\r\n\r\n" not in data:
        c = s.recv(4096)
        if not c:
            break
        data += c
    return data

def response(s):
    """A whole response with a Content-Length body."""
    data = head(s)
    h, _, body = data.partition(b"\r\n\r\n")
    n = 0
    for line in h.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(body) < n:
        c = s.recv(65536)
        if not c:
            break
        body += c
    return h.split(b"\r\n")[0].decode(), body.decode(errors="replace")

def rest(s):
    data = b""
    while True:
        try:
            c = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not c:
            break
        data += c
    return data

def hello(name):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx.wrap_bio(inc, out, server_hostname=name)
    try:
        o.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()

def connect(s, target):
    s.sendall(b"CONNECT " + target.encode() + b" HTTP/1.1\r\nHost: " + target.encode() + b"\r\n\r\n")
    return head(s).split(b"\r\n")[0].decode()

def sni(name):
    s = proxy()
    st = connect(s, "nh-allowed.osaurus.test:443")
    if not st.startswith("HTTP/1.1 200"):
        return "connect: " + st
    s.sendall(hello(name))
    data = rest(s)
    if b"UPSTREAM-GOT" in data:
        return "upstream"
    if data[:1] == b"\x15":
        return "alert"
    return "other %r" % data[:80]

def tunnel_host(host):
    s = proxy()
    st = connect(s, "nh-allowed.osaurus.test:80")
    if not st.startswith("HTTP/1.1 200"):
        return "connect: " + st
    s.sendall(b"GET / HTTP/1.1\r\nHost: " + host.encode() + b"\r\nConnection: close\r\n\r\n")
    return response(s)[0]

def big(sock, req):
    s = sock()
    t = threading.Thread(target=lambda: _send(s, req))
    t.start()
    st = response(s)[0]
    t.join()
    return st

def _send(s, b):
    try:
        s.sendall(b)
    except OSError:
        pass

def wait_closed(s, limit=300):
    s.settimeout(limit)
    try:
        while True:
            c = s.recv(65536)
            if not c:
                return "closed"
    except socket.timeout:
        return "open"
    except ConnectionResetError:
        return "closed"

def hold(kind, n, tag, home):
    """Opens n connections, records how each was answered, and keeps the
    granted ones open until the test says done."""
    conns, answers = [], {}
    for i in range(n):
        try:
            if kind == "proxy":
                s = proxy()
                s.sendall(b"CONNECT nh-allowed.osaurus.test:443 HTTP/1.1\r\n\r\n")
            else:
                s = bridge()
                s.sendall(b"GET /api/ping HTTP/1.1\r\nHost: bridge\r\n\r\n")
        except OSError as e:
            answers["connect error " + type(e).__name__] = answers.get("connect error " + type(e).__name__, 0) + 1
            continue
        conns.append(s)
    for s in conns:
        try:
            if kind == "proxy":
                data = head(s)
                st = data.split(b"\r\n")[0].decode()
                body = ""
                if not st.startswith("HTTP/1.1 200"):
                    # The proxy closes after a refusal's body.
                    body = (data + rest(s)).partition(b"\r\n\r\n")[2].decode(errors="replace")
            else:
                st, body = response(s)
        except OSError as e:
            st, body = "error " + type(e).__name__, ""
        key = st.split(" ")[1] if st.startswith("HTTP/") else st
        if "limit per agent" in body:
            key += " limit"
        answers[key] = answers.get(key, 0) + 1
    with open(home + "/" + tag + ".json.tmp", "w") as f:
        json.dump(answers, f)
    os.rename(home + "/" + tag + ".json.tmp", home + "/" + tag + ".json")
    for _ in range(3000):
        if os.path.exists(home + "/done"):
            break
        time.sleep(0.1)

if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "sni":
        print(sni(sys.argv[2]))
    elif cmd == "tunnel_host":
        print(tunnel_host(sys.argv[2]))
    elif cmd == "big_proxy":
        print(big(proxy, b"GET http://nh-allowed.osaurus.test/ HTTP/1.1\r\nHost: nh-allowed.osaurus.test\r\nX-Pad: " + b"a" * 40000 + b"\r\n\r\n"))
    elif cmd == "big_bridge":
        print(big(bridge, b"GET /api/ping HTTP/1.1\r\nHost: bridge\r\nX-Pad: " + b"a" * 200000 + b"\r\n\r\n"))
    elif cmd == "slow_proxy":
        s = proxy()
        s.sendall(b"GET http://nh-allowed.osaurus.test/ HTTP/1.1\r\nX-Slow: ")
        print(wait_closed(s))
    elif cmd == "silent_tunnel":
        s = proxy()
        st = connect(s, "nh-allowed.osaurus.test:443")
        print(st.split(" ")[1] if st else "none", wait_closed(s))
    elif cmd == "idle_bridge":
        s = bridge()
        s.sendall(b"GET /api/ping HTTP/1.1\r\nHost: bridge\r\n\r\n")
        st, body = response(s)
        print(st.split(" ")[1], wait_closed(s))
    elif cmd == "hold":
        hold(sys.argv[2], int(sys.argv[3]), sys.argv[4], os.environ["HOME"])
    elif cmd == "vsock":
        try:
            socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close()
            print("created")
        except OSError as e:
            print("errno", e.errno)
`

// nhUpstream runs as root in the guest: the sites the domain-list agent
// asks for, on an address of the VM's own loopback (192.0.2.11, a
// documentation address; nothing leaves the VM). Port 80 is a web
// server; port 443 answers whatever arrives with UPSTREAM-GOT, so a
// ClientHello that got through shows without a certificate.
const nhUpstream = `import socketserver, http.server, threading
class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        if self.request.recv(65536):
            self.request.sendall(b"UPSTREAM-GOT\n")
class TS(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024
class Web(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = ("site " + self.headers.get("Host", "")).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
class HS(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
threading.Thread(target=TS(("192.0.2.11", 443), Echo).serve_forever, daemon=True).start()
HS(("192.0.2.11", 80), Web).serve_forever()
`

// TestNetHarden attacks PID 1's servers (the egress proxy, the bridge
// relay and, behind it, the host's bridge server) and the network
// policy's edges as an agent would, on the real guest: oversized heads,
// idle and half-sent connections, hundreds of connections from several
// processes, a listed name tunnelling to another site on the same
// address, vsock sockets, and namespaces left behind by plugins and
// removed agents. Traffic stays in the VM (and on this machine's
// loopback); ranges that can't be tried are checked on the installed
// rules.
func TestNetHarden(t *testing.T) {
	// An address of this machine outside every private range, as a host
	// with a public address has: the guest must deny it like the host's
	// loopback, since user-mode NAT reaches the host's listeners on any
	// of its addresses. The hello that tells the guest is sent at boot.
	const hostAddr = "198.51.100.77"
	if out, err := exec.Command("ip", "addr", "add", hostAddr+"/32", "dev", "lo").CombinedOutput(); err == nil {
		t.Cleanup(func() { exec.Command("ip", "addr", "del", hostAddr+"/32", "dev", "lo").Run() })
	} else if have, _ := exec.Command("ip", "-o", "addr", "show", "dev", "lo").Output(); !strings.Contains(string(have), " "+hostAddr+"/32 ") {
		// (Another run of this test may hold it: then it is there.)
		t.Fatalf("adding %s to this machine's lo (needs root and iproute2): %v %s", hostAddr, err, out)
	}

	m := boot(t, bootOpts{})
	g := m.Agent()
	ctx := context.Background()
	br := bridge.New(bridge.Options{Rate: limit.NewRateLimiter(limit.RateOptions{Limits: map[string]int{"bridge": 1 << 20}})})
	t.Cleanup(func() { br.Close() })
	br.Attach(ctx, g)

	const lister, other = "agent-nha", "agent-nhb"
	for _, u := range []string{lister, other} {
		if err := g.UserDel(ctx, agentproto.UserDelRequest{Name: u, RemoveHome: true}); err != nil && !errors.Is(err, agentproto.ErrNoSuchUser) {
			t.Fatal(err)
		}
		if _, err := g.UserAdd(ctx, agentproto.UserAddRequest{Name: u, Home: "/home/" + u}); err != nil {
			t.Fatalf("adding %s: %v", u, err)
		}
	}
	const policy = "nh-allowed.osaurus.test,nh-hostaddr.osaurus.test"
	if _, err := g.WriteFile(ctx, agentproto.WriteFileRequest{Path: "/usr/local/lib/nh/nh.py", Data: []byte(nhPy), MakeParents: true, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteFile(ctx, agentproto.WriteFileRequest{Path: "/usr/local/lib/nh/up.py", Data: []byte(nhUpstream), MakeParents: true, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if out, errOut, st := sh(t, g, "", `set -e
chmod 755 /usr/local/lib/nh
ip addr add 192.0.2.11/32 dev lo 2>/dev/null || true
grep -q nh-allowed.osaurus.test /etc/hosts || printf '192.0.2.11 nh-allowed.osaurus.test nh-other.osaurus.test\n`+hostAddr+` nh-hostaddr.osaurus.test\n' >>/etc/hosts
setsid python3 /usr/local/lib/nh/up.py </dev/null >/tmp/nh-up.log 2>&1 &
for i in $(seq 200); do curl -s -o /dev/null http://192.0.2.11/ && exit 0; sleep 0.1; done; cat /tmp/nh-up.log; exit 1`); st.Code != 0 {
		t.Fatalf("upstream servers in the VM: %s %s %+v", out, errOut, st)
	}

	// as runs a script as user under network setting (scope: a plugin's).
	as := func(t *testing.T, user, network, scope, script string) (string, agentproto.ExitStatus) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
		defer cancel()
		out, errOut, st, err := g.Output(cctx, agentproto.ExecRequest{Identity: agentproto.Identity{User: user}, Network: network, NetScope: scope, Shell: script})
		if err != nil {
			t.Fatalf("exec as %s: %v", user, err)
		}
		return strings.TrimSpace(string(out) + string(errOut)), st
	}
	py := func(t *testing.T, args string) string {
		t.Helper()
		out, st := as(t, lister, policy, "", "python3 /usr/local/lib/nh/nh.py "+args)
		if st.Code != 0 {
			t.Fatalf("nh.py %s: exit %d: %s", args, st.Code, out)
		}
		return out
	}
	rootOut := func(t *testing.T, script string) string {
		t.Helper()
		out, errOut, st := sh(t, g, "", script)
		if st.Code != 0 {
			t.Fatalf("%s: %s %s", script, out, errOut)
		}
		return strings.TrimSpace(out)
	}
	pid1FDs := func(t *testing.T) int {
		t.Helper()
		n, err := strconv.Atoi(rootOut(t, "ls /proc/1/fd | wc -l"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// pollPID1FDs waits until PID 1 holds at most max descriptors.
	pollPID1FDs := func(t *testing.T, max int, what string) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		n := pid1FDs(t)
		for n > max {
			if time.Now().After(deadline) {
				t.Errorf("%s: PID 1 holds %d descriptors, want at most %d", what, n, max)
				return
			}
			n = pid1FDs(t)
		}
		t.Logf("%s: PID 1 holds %d descriptors (bound %d)", what, n, max)
	}

	t.Run("denied ranges and the host's addresses are in the rules", func(t *testing.T) {
		as(t, lister, policy, "", "true") // the rules are installed with the first policy
		rules := installedRules(t, g)
		for _, p := range []string{"64:ff9b::/96", "2002::/16", "2001::/32", hostAddr + "/32", "10.0.2.2/32"} {
			if !matches(rules, `^denied: daddr `+regexp.QuoteMeta(p)+` .*-> reject$`) {
				t.Errorf("no rule rejecting %s in the denied chain", p)
			}
		}
		// And the proxy won't dial a listed name that resolves to the
		// host's address (it refuses before connecting).
		out, _ := as(t, lister, policy, "", "curl -sS --max-time 20 http://nh-hostaddr.osaurus.test/")
		if !strings.Contains(out, "no agent may reach") {
			t.Errorf("a listed name resolving to the host's address: %q, want the proxy's refusal", out)
		}
		if t.Failed() {
			t.Logf("rules:\n%s", strings.Join(rules, "\n"))
		}
	})

	t.Run("TLS server name must be on the list", func(t *testing.T) {
		if got := py(t, "sni nh-allowed.osaurus.test"); got != "upstream" {
			t.Errorf("listed SNI through a listed CONNECT: %q, want it to reach the upstream", got)
		}
		if got := py(t, "sni nh-other.osaurus.test"); got != "alert" {
			t.Errorf("CONNECT nh-allowed.osaurus.test:443 with SNI nh-other.osaurus.test: %q, want a refusal (TLS alert), not the upstream", got)
		}
		// curl the way an agent would: --connect-to sends the CONNECT for
		// the listed name and the ClientHello for the other.
		out, st := as(t, lister, policy, "", "curl -sS -k --max-time 20 --connect-to nh-other.osaurus.test:443:nh-allowed.osaurus.test:443 https://nh-other.osaurus.test/")
		if st.Code == 0 || strings.Contains(out, "UPSTREAM-GOT") {
			t.Errorf("curl --connect-to with another SNI: exit %d %q, want a TLS failure", st.Code, out)
		}
	})

	t.Run("Host header must be on the list", func(t *testing.T) {
		out, _ := as(t, lister, policy, "", "curl -sS --max-time 20 -w '\n%{http_code}' -H 'Host: nh-other.osaurus.test' http://nh-allowed.osaurus.test/")
		if !strings.HasSuffix(out, "403") || strings.Contains(out, "site nh-other") {
			t.Errorf("absolute URL with another Host: %q, want 403", out)
		}
		out, _ = as(t, lister, policy, "", "curl -sS --max-time 20 http://nh-allowed.osaurus.test/")
		if out != "site nh-allowed.osaurus.test" {
			t.Errorf("listed name over plain HTTP: %q", out)
		}
		if got := py(t, "tunnel_host nh-other.osaurus.test"); !strings.Contains(got, " 403 ") {
			t.Errorf("CONNECT nh-allowed.osaurus.test:80 then Host nh-other.osaurus.test: %q, want 403", got)
		}
		if got := py(t, "tunnel_host nh-allowed.osaurus.test"); !strings.Contains(got, " 200 ") {
			t.Errorf("CONNECT nh-allowed.osaurus.test:80 with its own Host: %q, want 200", got)
		}
	})

	t.Run("oversized heads are refused", func(t *testing.T) {
		if got := py(t, "big_proxy"); !strings.Contains(got, " 431 ") {
			t.Errorf("40 KB head to the proxy: %q, want 431", got)
		}
		if got := py(t, "big_bridge"); !strings.Contains(got, " 431 ") {
			t.Errorf("200 KB head to the bridge: %q, want 431", got)
		}
	})

	t.Run("idle and half-sent connections are closed by the server", func(t *testing.T) {
		// Each waits (in the guest) up to 300 s for the server to close.
		if got := py(t, "silent_tunnel"); got != "200 closed" {
			t.Errorf("a CONNECT tunnel that never sends: %q, want it closed by the proxy", got)
		}
		if got := py(t, "slow_proxy"); got != "closed" {
			t.Errorf("a half-sent request head to the proxy: %q, want it closed", got)
		}
		if got := py(t, "idle_bridge"); got != "200 closed" {
			t.Errorf("an idle kept-alive bridge connection: %q, want it closed by the server", got)
		}
	})

	t.Run("connections per agent are capped and PID 1's descriptors stay bounded", func(t *testing.T) {
		base := pid1FDs(t)
		// Two processes of the same agent, 150 connections each, to the
		// proxy and to the bridge, held open until the test is done.
		done := make(chan struct{})
		go func() {
			defer close(done)
			cctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
			defer cancel()
			g.Output(cctx, agentproto.ExecRequest{Identity: agentproto.Identity{User: lister}, Network: policy, Shell: `cd; rm -f done *.json
P=/usr/local/lib/nh/nh.py
python3 $P hold proxy 150 p1 & python3 $P hold proxy 150 p2 & python3 $P hold bridge 150 b1 & python3 $P hold bridge 150 b2 & wait`})
		}()
		t.Cleanup(func() {
			sh(t, g, "", "touch /home/"+lister+"/done")
			<-done
		})
		read := func(tag string) string {
			deadline := time.Now().Add(4 * time.Minute)
			for {
				out, _, st := sh(t, g, "", "cat /home/"+lister+"/"+tag+".json 2>/dev/null")
				if st.Code == 0 && out != "" {
					return out
				}
				if time.Now().After(deadline) {
					t.Fatalf("no answers from %s", tag)
				}
			}
		}
		limited := func(answers string) int {
			m := regexp.MustCompile(`"(\d+) limit": (\d+)`).FindAllStringSubmatch(answers, -1)
			n := 0
			for _, x := range m {
				k, _ := strconv.Atoi(x[2])
				n += k
			}
			return n
		}
		p := read("p1") + read("p2")
		b := read("b1") + read("b2")
		t.Logf("proxy answers %s; bridge answers %s", p, b)
		// A granted tunnel that sends nothing is closed after 20 s, which
		// frees its place for a later one: at least 300-2*64 refused.
		if n := limited(p); n < 300-2*64 {
			t.Errorf("proxy: %d of 300 connections refused naming the per-agent limit, want at least %d", n, 300-2*64)
		}
		if !strings.Contains(p, `"429 limit"`) {
			t.Errorf("proxy: no 429 naming the limit in %s", p)
		}
		if n := limited(b); n < 300-2*32 {
			t.Errorf("bridge: %d of 300 connections refused naming the per-agent limit, want at least %d", n, 300-2*32)
		}
		// The granted connections still open hold at most 2 descriptors
		// each in the proxy (client and upstream) and 1 in the relay.
		pollPID1FDs(t, base+64*2+32+16, "300 proxy and 300 bridge connections held by one agent")
	})

	t.Run("vsock sockets are refused by the agents' filter", func(t *testing.T) {
		agent, st := as(t, other, "none", "", "python3 /usr/local/lib/nh/nh.py vsock; grep '^Seccomp:' /proc/self/status")
		root := rootOut(t, "python3 /usr/local/lib/nh/nh.py vsock; grep '^Seccomp:' /proc/self/status")
		t.Logf("agent: %q; root (no filter): %q", agent, root)
		if st.Code != 0 || !strings.HasPrefix(agent, "errno 1\n") || !strings.Contains(agent, "Seccomp:\t2") {
			t.Errorf("an agent's AF_VSOCK socket: %q, want EPERM (errno 1) under a seccomp filter (Seccomp: 2)", agent)
		}
		if strings.HasPrefix(root, "errno 1\n") || !strings.Contains(root, "Seccomp:\t0") {
			t.Errorf("root's AF_VSOCK socket: %q: the same EPERM without the filter would prove nothing", root)
		}
	})

	t.Run("namespaces are capped per agent and freed on uninstall and removal", func(t *testing.T) {
		netns := func() int {
			n, _ := strconv.Atoi(rootOut(t, `ls -l /proc/1/fd | grep -c 'net:\[' || true`))
			return n
		}
		veths := func() int {
			n, _ := strconv.Atoi(rootOut(t, `ls /sys/class/net | grep -c '^osn' || true`))
			return n
		}
		before, vbefore := netns(), veths()
		// A plugin's processes get a namespace of their own: 45 plugins'
		// worth, each run once.
		for i := range 45 {
			if out, st := as(t, other, "none", fmt.Sprintf("nh-plugin-%d", i), "true"); st.Code != 0 {
				t.Fatalf("plugin %d: %s %+v", i, out, st)
			}
		}
		if n := netns() - before; n > 32 {
			t.Errorf("one agent's 45 plugins hold %d namespaces in PID 1, want at most the cap of 32", n)
		}
		// A plugin with a process still running keeps its namespace;
		// uninstalling the plugin frees it.
		go g.Output(ctx, agentproto.ExecRequest{Identity: agentproto.Identity{User: other}, Network: "none", NetScope: "nh-kept", Shell: "exec sleep 600"})
		deadline := time.Now().Add(time.Minute)
		running := `for p in /proc/[0-9]*; do tr '\0' ' ' <$p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 600' || true`
		for rootOut(t, running) != "1" {
			if time.Now().After(deadline) {
				t.Fatal("the plugin's process did not start")
			}
		}
		mid, vmid := netns(), veths()
		if err := g.NetRelease(ctx, agentproto.NetReleaseRequest{User: other, Scope: "nh-kept"}); err != nil {
			t.Fatalf("net_release (plugin uninstall): %v", err)
		}
		if n, v := netns(), veths(); n != mid-1 || v != vmid-1 {
			t.Errorf("after the plugin's uninstall PID 1 holds %d namespaces and %d veths, want %d and %d", n, v, mid-1, vmid-1)
		}
		// Removing the agent frees every namespace it had.
		if err := g.UserDel(ctx, agentproto.UserDelRequest{Name: other, RemoveHome: true}); err != nil {
			t.Fatal(err)
		}
		if n, v := netns(), veths(); n > before || v > vbefore {
			t.Errorf("after removing the agent PID 1 holds %d namespaces and %d veths, want at most %d and %d as before it ran anything", n, v, before, vbefore)
		}
	})
}
