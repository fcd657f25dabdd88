//go:build linux

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// TestNetworkPolicy attacks the per-agent network policy on the real
// guest, through the real tool path (MCP → tools → guest agent), with the
// policy changed by the real CLI. Traffic stays on this machine: the
// host's loopback (reached through QEMU's gateway 10.0.2.2: the target
// that must be blocked), addresses inside the VM, and the package mirror
// the guest already uses. What can't be tried without leaving the machine
// (private and metadata ranges) is checked on the rules the kernel holds.
func TestNetworkPolicy(t *testing.T) {
	te := newToolsEnv(t)
	g := te.m.Agent()
	cli := cliRun{t, te.bin, te.home}

	// A server on the host's loopback: stands for the app's own ports and
	// whatever else the user runs locally. The MCP server (te.url) is one
	// too.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "host secret") })}
	go hostSrv.Serve(ln)
	t.Cleanup(func() { hostSrv.Close() })
	hostPort := ln.Addr().(*net.TCPAddr).Port
	mcpPort := strings.Split(strings.TrimPrefix(te.url, "http://127.0.0.1:"), "/")[0]

	// Inside the VM, as root: a web server on an address of the VM's own
	// (192.0.2.10, a documentation address, on lo: nothing leaves the VM),
	// and names for the proxy to resolve (the guest's resolver reads
	// /etc/hosts). loop.osaurus.test resolves to loopback: the proxy must
	// refuse it even when listed.
	if out, errOut, st := sh(t, g, "", `set -e
ip addr add 192.0.2.10/32 dev lo
printf '192.0.2.10 allowed.osaurus.test api.wild.osaurus.test other.osaurus.test\n127.0.0.1 loop.osaurus.test\n' >>/etc/hosts
mkdir -p /srv/www && echo inside-vm >/srv/www/index.html
cd /srv/www && setsid python3 -m http.server --bind 192.0.2.10 80 </dev/null >/tmp/www.log 2>&1 &
for i in $(seq 100); do curl -s -o /dev/null http://192.0.2.10/ && exit 0; sleep 0.1; done; exit 1`); st.Code != 0 {
		t.Fatalf("VM web server: %s %s %+v", out, errOut, st)
	}
	// Root still reaches the host: the policy is the agents'.
	if out, _, st := sh(t, g, "", fmt.Sprintf("curl -sS --max-time 20 http://10.0.2.2:%d/", hostPort)); st.Code != 0 || out != "host secret" {
		t.Fatalf("root to the host: %q %+v", out, st)
	}
	mirror, _, st := sh(t, g, "", `awk '/^deb /{print $2; exit}' /etc/apt/sources.list`)
	mirror = strings.TrimRight(strings.TrimSpace(mirror), "/")
	if st.Code != 0 || !strings.HasPrefix(mirror, "http") {
		t.Fatalf("the guest's package mirror: %q", mirror)
	}

	// The mirror's address as the VM resolves it, so the agents' attempts
	// below fail on the connection itself, not only on DNS.
	mu, err := url.Parse(mirror)
	if err != nil {
		t.Fatal(err)
	}
	mirrorPort := mu.Port()
	if mirrorPort == "" {
		mirrorPort = map[string]string{"http": "80", "https": "443"}[mu.Scheme]
	}
	mirrorIP, _, st := sh(t, g, "", "getent ahostsv4 "+mu.Hostname()+" | awk 'NR==1{print $1}'")
	if mirrorIP = strings.TrimSpace(mirrorIP); st.Code != 0 || mirrorIP == "" {
		t.Fatalf("resolving the mirror in the VM: %+v", st)
	}
	resolved := "--resolve " + mu.Hostname() + ":" + mirrorPort + ":" + mirrorIP + " "

	bg := autonomous(100, true)
	policy := func(setting string) func(*agents.AutonomousExec) {
		return func(ae *agents.AutonomousExec) { bg(ae); ae.Network = agents.NetworkSetting(setting) }
	}
	te.addAgent(t, "Out", bg) // the default: outbound
	te.addAgent(t, "Peer", bg)
	te.addAgent(t, "Off", policy("none"))
	te.addAgent(t, "Lister", policy("allowed.osaurus.test,*.wild.osaurus.test,loop.osaurus.test"))
	out, peer, off, lister := te.http(t, "out"), te.http(t, "peer"), te.http(t, "off"), te.http(t, "lister")

	run := func(s *session, cmd string) (string, int) {
		t.Helper()
		r := s.ok(t, "sandbox_exec", map[string]any{"command": cmd, "timeout": 60})
		return fmt.Sprint(r["stdout"]) + fmt.Sprint(r["stderr"]), num(r["exit_code"])
	}
	// mustFail: the connection is refused at once (the guest's rules
	// reject, and say so), not merely unanswered: a timeout would pass for
	// a refusal while the packets went out.
	mustFail := func(s *session, what, cmd string) {
		t.Helper()
		o, code := run(s, cmd)
		if code == 0 {
			t.Errorf("%s: %s reached it: %q", s.name, what, o)
			return
		}
		if !refused(o) || code == 28 || strings.Contains(o, "timed out") {
			t.Errorf("%s: %s: exit %d %q, want a refusal (connection refused, no route, unreachable)", s.name, what, code, strings.TrimSpace(o))
			return
		}
		t.Logf("%s: %s: refused (exit %d): %s", s.name, what, code, strings.TrimSpace(o))
	}
	curl := "curl -sS --max-time 15 "
	curlF := curl + "--fail-with-body " // a proxy's 403 is a failure, with its reason

	t.Run("outbound", func(t *testing.T) {
		// The package mirror (through the VM's resolver and NAT) works...
		if o, code := run(out, curl+"-o /dev/null -w '%{http_code}' "+mirror+"/dists/bookworm/Release"); code != 0 || o != "200" {
			t.Fatalf("outbound agent to the package mirror: %q exit %d", o, code)
		}
		// ...the host does not: neither a local server nor the app's MCP port.
		mustFail(out, "the host's loopback server via 10.0.2.2", fmt.Sprintf(curl+"http://10.0.2.2:%d/", hostPort))
		mustFail(out, "the app's MCP port via 10.0.2.2", curl+"http://10.0.2.2:"+mcpPort+"/mcp")
		mustFail(out, "a server on the VM's own address", curl+"http://192.0.2.10/")
		mustFail(out, "QEMU's resolver as an HTTP server", curl+"http://10.0.2.3/")
		// Each refusal is in the log, with the agent, destination and port.
		log := waitRefusal(t, cli, refusal{agent: "Out", dest: "10.0.2.2", port: hostPort, by: "firewall", reason: "no agent may reach"})
		waitRefusal(t, cli, refusal{agent: "Out", dest: "10.0.2.2", port: atoi(t, mcpPort), by: "firewall"})
		waitRefusal(t, cli, refusal{agent: "Out", dest: "192.0.2.10", port: 80, by: "firewall", reason: "VM's own services"})
		if log.Time.IsZero() || time.Since(log.Time) > 10*time.Minute || log.Proto != "tcp" || log.User != "agent-out" {
			t.Errorf("log entry %+v: want a recent tcp refusal of agent-out", log)
		}
		// DNS to any server but the VM's resolver (here: the host's port
		// 53 through the gateway, which is never reached).
		mustFail(out, "DNS to the host", `python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("10.0.2.2", 53)); s.send(b"x"); s.settimeout(3); s.recv(1)'`)
		waitRefusal(t, cli, refusal{agent: "Out", dest: "10.0.2.2", port: 53, by: "firewall", reason: "DNS goes only to the VM's resolver"})
		if o, _ := run(out, "cat /etc/resolv.conf; echo; env | grep -i _proxy || true"); strings.Contains(strings.ToLower(o), "_proxy=") {
			t.Errorf("outbound agent got a proxy: %q", o)
		}
	})

	t.Run("other agents' loopback", func(t *testing.T) {
		out.ok(t, "sandbox_exec_background", map[string]any{"command": "exec python3 -m http.server --bind 127.0.0.1 8765"})
		if o, code := run(out, "for i in $(seq 100); do curl -s http://127.0.0.1:8765/ >/dev/null && echo up && exit 0; sleep 0.1; done; exit 1"); code != 0 {
			t.Fatalf("the agent's own loopback server: %q", o)
		}
		mustFail(peer, "another agent's loopback server", curl+"http://127.0.0.1:8765/")
		addr, code := run(out, "ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1")
		addr = strings.TrimSpace(addr)
		if code != 0 || !strings.HasPrefix(addr, "10.213.") {
			t.Fatalf("agent address %q", addr)
		}
		out.ok(t, "sandbox_exec_background", map[string]any{"command": "exec python3 -m http.server --bind 0.0.0.0 8766"})
		if o, code := run(out, "for i in $(seq 100); do curl -s http://127.0.0.1:8766/ >/dev/null && echo up && exit 0; sleep 0.1; done; exit 1"); code != 0 {
			t.Fatalf("the agent's own server: %q", o)
		}
		mustFail(peer, "another agent's namespace address", curl+"http://"+addr+":8766/")
		waitRefusal(t, cli, refusal{agent: "Peer", dest: addr, port: 8766, by: "firewall", reason: "no agent may reach"})
		if _, _, st := sh(t, g, "", curl+"http://127.0.0.1:8765/"); st.Code == 0 {
			t.Error("the agent's loopback server is visible on the VM's own loopback")
		}
	})

	t.Run("none", func(t *testing.T) {
		// lo, and a link whose every packet the guest refuses (and logs).
		if o, _ := run(off, "ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | sort | tr '\\n' ' '"); strings.TrimSpace(o) != "eth0 lo" {
			t.Errorf("agent with network none has interfaces: %q", o)
		}
		mustFail(off, "the host", fmt.Sprintf(curl+"http://10.0.2.2:%d/", hostPort))
		mustFail(off, "the VM", curl+"http://192.0.2.10/")
		mustFail(off, "the package mirror", curl+mirror+"/dists/bookworm/Release")
		mustFail(off, "the package mirror by address", curl+resolved+mirror+"/dists/bookworm/Release")
		waitRefusal(t, cli, refusal{agent: "Off", dest: "10.0.2.2", port: hostPort, by: "firewall", reason: "no agent may reach"})
		mp := atoi(t, mirrorPort)
		waitRefusal(t, cli, refusal{agent: "Off", dest: mirrorIP, port: mp, by: "firewall", reason: "policy is none"})
	})

	t.Run("domain list", func(t *testing.T) {
		if o, code := run(lister, curl+"http://allowed.osaurus.test/"); code != 0 || o != "inside-vm\n" {
			t.Fatalf("listed name through the proxy: %q exit %d", o, code)
		}
		if o, code := run(lister, curl+"http://api.wild.osaurus.test/"); code != 0 || o != "inside-vm\n" {
			t.Fatalf("wildcard name through the proxy: %q exit %d", o, code)
		}
		// CONNECT (what HTTPS uses) to a listed name on port 80.
		if o, code := run(lister, curl+"-p http://allowed.osaurus.test:80/"); code != 0 || o != "inside-vm\n" {
			t.Fatalf("CONNECT to a listed name: %q exit %d", o, code)
		}
		for _, tc := range []struct{ what, cmd, reason string }{
			{"an unlisted name", curlF + "http://other.osaurus.test/", "not in the agent's network policy"},
			{"the wildcard's apex", curlF + "http://wild.osaurus.test/", "not in the agent's network policy"},
			{"an IP literal", curlF + "http://192.0.2.10/", "not in the agent's network policy"},
			{"the host by IP", fmt.Sprintf(curlF+"http://10.0.2.2:%d/", hostPort), "not in the agent's network policy"},
			{"a listed name resolving to loopback", curlF + "http://loop.osaurus.test/", "resolves only to addresses no agent may reach"},
			{"a listed name on another port", curlF + "http://allowed.osaurus.test:8080/", "only ports 80 and 443"},
			{"CONNECT to an unlisted name", curlF + "-p http://other.osaurus.test:80/", "CONNECT"},
		} {
			o, code := run(lister, tc.cmd)
			if code == 0 || !strings.Contains(o, tc.reason) {
				t.Errorf("%s: exit %d %q, want refused (%q)", tc.what, code, o, tc.reason)
			}
		}
		for _, r := range []refusal{
			{agent: "Lister", dest: "other.osaurus.test", port: 80, by: "proxy", reason: "not in the agent's network policy"},
			{agent: "Lister", dest: "192.0.2.10", port: 80, by: "proxy", reason: "not in the agent's network policy"},
			{agent: "Lister", dest: "loop.osaurus.test", port: 80, by: "proxy", reason: "resolves only to addresses"},
			{agent: "Lister", dest: "allowed.osaurus.test", port: 8080, by: "proxy", reason: "only ports 80 and 443"},
		} {
			waitRefusal(t, cli, r)
		}
		// Direct connections, without the proxy, go nowhere.
		mustFail(lister, "the VM's server without the proxy", "env -u HTTP_PROXY -u http_proxy "+curl+"--noproxy '*' http://192.0.2.10/")
		mustFail(lister, "the host without the proxy", fmt.Sprintf("unset HTTP_PROXY http_proxy; "+curl+"--noproxy '*' http://10.0.2.2:%d/", hostPort))
		mustFail(lister, "the mirror without the proxy", "unset HTTP_PROXY http_proxy; "+curl+"--noproxy '*' "+resolved+mirror+"/dists/bookworm/Release")
		waitRefusal(t, cli, refusal{agent: "Lister", dest: "10.0.2.2", port: hostPort, by: "firewall"})
		waitRefusal(t, cli, refusal{agent: "Lister", dest: mirrorIP, port: atoi(t, mirrorPort), by: "firewall", reason: "only through the proxy"})
	})

	t.Run("network log follows, filters and is not the agent's to change", func(t *testing.T) {
		cmd := exec.Command(te.bin, "network", "log", "--follow", "--json", "--agent", "Peer")
		cmd.Env = append(os.Environ(), config.HomeEnv+"="+te.home)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = testLog{t, "network log: "}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		lines := make(chan refusalLine, 64)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var l refusalLine
				if json.Unmarshal(sc.Bytes(), &l) == nil {
					lines <- l
				}
			}
		}()
		// A refusal made after the follower started arrives on its own.
		port := 9000 + hostPort%1000
		mustFail(peer, "the host, while followed", fmt.Sprintf(curl+"http://10.0.2.2:%d/", port))
		deadline := time.After(2 * time.Minute)
		for found := false; !found; {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("network log --follow ended")
				}
				if l.Agent != "Peer" {
					t.Errorf("--agent Peer printed %+v", l)
				}
				found = l.Dest == "10.0.2.2" && l.Port == port
			case <-deadline:
				t.Fatal("the follower never printed the new refusal")
			}
		}
		// The log lives in PID 1's memory, fed by the kernel and the proxy:
		// an agent can't write to it or read the kernel's log group.
		for _, cmd := range []string{
			"python3 -c 'import socket; s=socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12); s.bind((0, 0)); s.sendto(bytes(20), (1, 0))'",
			"ls /proc/1/fd",
		} {
			if o, code := run(peer, cmd); code == 0 {
				t.Errorf("as the agent, %q worked: %q", cmd, o)
			}
		}
	})

	t.Run("the agent can't undo it", func(t *testing.T) {
		for _, cmd := range []string{
			"ip link set eth0 down", "ip addr add 10.213.0.6/30 dev eth0", "ip route replace default dev lo",
			"ip link add dummy0 type dummy", "ip netns add mine",
		} {
			if o, code := run(out, cmd); code == 0 || !strings.Contains(o, "Operation not permitted") && !strings.Contains(o, "ermission denied") {
				t.Errorf("as the agent, %q: exit %d %q, want refused", cmd, code, o)
			}
		}
		// Nor can it make a network namespace of its own, to leave the
		// rules behind: not directly (no CAP_SYS_ADMIN), not through a
		// user namespace (the guest turns them off).
		// Each refusal for its own reason: root can make one (so the
		// kernel has network namespaces, and a refusal is the agent's
		// lack of privilege), and the agent's user namespace is refused
		// by the knob the guest sets (EPERM from Debian's, ENOSPC from
		// the limit of zero elsewhere).
		if o, _, st := sh(t, g, "", "unshare -n true"); st.Code != 0 {
			t.Fatalf("root can't make a network namespace either (the check below would pass for that reason): %q", o)
		}
		if o, code := run(out, "unshare -n true"); code == 0 || !strings.Contains(o, "Operation not permitted") {
			t.Errorf("as the agent, unshare -n: exit %d %q, want refused for lack of privilege", code, o)
		}
		knobs, _, _ := sh(t, g, "", "cat /proc/sys/kernel/unprivileged_userns_clone 2>/dev/null || cat /proc/sys/user/max_user_namespaces")
		if strings.TrimSpace(knobs) != "0" {
			t.Errorf("user namespaces are on for agents (knob %q)", knobs)
		}
		if o, code := run(out, "unshare -rn true"); code == 0 || !strings.Contains(o, "Operation not permitted") && !strings.Contains(o, "No space left on device") {
			t.Errorf("as the agent, unshare -rn: exit %d %q, want refused (user namespaces off)", code, o)
		}
		// The rules can't even be read from the agent's namespace.
		bin := agentBinary(t, g)
		if o, code := run(out, bin+" netrules"); code == 0 {
			t.Errorf("the agent read or reached the rules: %q", o)
		}
	})

	rules := installedRules(t, g)
	t.Run("installed rules", func(t *testing.T) {
		for _, p := range netpolicy.Denied() {
			want := "denied: daddr " + p.String() + ` log group 7 prefix "osaurus:denied" -> reject`
			if !contains(rules, want) {
				t.Errorf("missing %q", want)
			}
		}
		for _, re := range []string{
			`^forward: iif osn\* -> jump agent_forward$`,
			`^input: iif osn\* -> jump agent_input$`,
			`^postrouting: saddr 10\.213\.0\.0/16 oif != osn\* -> masquerade$`,
			`^agent_forward: iif osn\d+ daddr 10\.0\.2\.3/32 l4proto udp dport 53 -> accept$`,
			`^agent_forward: l4proto udp dport 53 log group 7 prefix "osaurus:dns" -> reject$`,
			`^agent_forward: l4proto tcp dport 53 log group 7 prefix "osaurus:dns" -> reject$`,
			`^agent_forward: -> jump denied$`,
			`^agent_forward: log group 7 prefix "osaurus:policy" -> reject$`,
			`^agent_input: iif osn\d+ daddr 10\.213\.\d+\.\d+/32 l4proto tcp dport 3128 -> accept$`,
			`^agent_input: log group 7 prefix "osaurus:vm" -> reject$`,
		} {
			if !matches(rules, re) {
				t.Errorf("no rule matches %s", re)
			}
		}
		// Exactly the outbound agents (Out, Peer) are let out; the order is
		// DNS, the denied ranges, then the per-agent accepts.
		if n := count(rules, `^agent_forward: iif osn\d+ -> accept$`); n != 2 {
			t.Errorf("%d agents let out, want 2 (Out and Peer)", n)
		}
		if n := count(rules, `^agent_input: iif osn\d+ .* -> accept$`); n != 1 {
			t.Errorf("%d agents may reach a proxy, want 1 (Lister)", n)
		}
		if !before(rules, "agent_forward: -> jump denied", `^agent_forward: iif osn\d+ -> accept$`) {
			t.Error("an agent accept comes before the denied ranges")
		}
		t.Logf("installed rules:\n%s", strings.Join(rules, "\n"))
	})

	t.Run("agent show", func(t *testing.T) {
		o := cli.ok("agent", "show", "Lister")
		if !strings.Contains(o, "network in force:     only *.wild.osaurus.test, allowed.osaurus.test, loop.osaurus.test over HTTP and HTTPS") {
			t.Errorf("agent show Lister:\n%s", o)
		}
		if o := cli.ok("agent", "show", "Off"); !strings.Contains(o, "network in force:     none: no network") {
			t.Errorf("agent show Off:\n%s", o)
		}
	})

	t.Run("plugin narrows the agent's policy", func(t *testing.T) {
		te.addAgent(t, "Plugger", bg) // outbound
		recipe := filepath.Join(t.TempDir(), "fetcher.json")
		// Setup and tools run under the plugin's permission: the listed
		// name works, the mirror its agent may reach does not.
		setup := "curl -sS --max-time 15 --fail-with-body http://allowed.osaurus.test/ >setup.txt 2>&1; " +
			"curl -sS --max-time 15 --fail-with-body " + mirror + "/dists/bookworm/Release >>setup.txt 2>&1; true"
		rb, _ := json.Marshal(map[string]any{
			"name": "Fetcher", "description": "Fetches a URL", "setup": setup,
			"permissions": map[string]any{"network": "allowed.osaurus.test"},
			"tools": []any{
				map[string]any{"id": "get", "description": "Fetches a URL", "run": `curl -sS --max-time 15 --fail-with-body "$PARAM_URL"`,
					"parameters": map[string]any{"url": map[string]any{"type": "string"}}},
				map[string]any{"id": "setuplog", "description": "What setup fetched", "run": "cat setup.txt"},
			},
		})
		if err := os.WriteFile(recipe, rb, 0o644); err != nil {
			t.Fatal(err)
		}
		cli.ok("plugin", "import", recipe, "--yes")
		cli.ok("plugin", "install", "fetcher", "--agent", "plugger", "--yes")
		if o := cli.ok("agent", "show", "Plugger"); !strings.Contains(o, "plugin fetcher runs with: only allowed.osaurus.test over HTTP and HTTPS") ||
			!strings.Contains(o, "network in force:     outbound") {
			t.Errorf("agent show Plugger:\n%s", o)
		}
		s := te.http(t, "plugger")
		r := s.ok(t, "fetcher_setuplog", map[string]any{})
		if o := fmt.Sprint(r["stdout"]); !strings.Contains(o, "inside-vm") || !strings.Contains(o, "not in the agent's network policy") {
			t.Errorf("setup's fetches: %q, want the listed name's page and a refusal of the mirror", o)
		}
		get := func(u string) (string, bool) {
			e := s.call(t, "fetcher_get", map[string]any{"url": u})
			b, _ := json.Marshal(e.Result)
			return string(b) + e.Message, e.OK && num(e.Result.(map[string]any)["exit_code"]) == 0
		}
		if o, ok := get("http://allowed.osaurus.test/"); !ok || !strings.Contains(o, "inside-vm") {
			t.Fatalf("the plugin's allowed name: %s", o)
		}
		if o, ok := get(mirror + "/dists/bookworm/Release"); ok || !strings.Contains(o, "not in the agent's network policy") {
			t.Errorf("the plugin reached the package mirror its agent may reach: %s", o)
		}
		if o, ok := get(fmt.Sprintf("http://10.0.2.2:%d/", hostPort)); ok {
			t.Errorf("the plugin reached the host: %s", o)
		}
		e := waitRefusal(t, cli, refusal{agent: "Plugger", dest: mu.Hostname(), port: atoi(t, mirrorPort), by: "proxy", reason: "not in the agent's network policy"})
		if e.Plugin != "fetcher" {
			t.Errorf("refusal of the plugin's command without the plugin: %+v", e)
		}
		// The agent's own commands keep the agent's policy, before and after.
		if o, code := run(s, curl+"-o /dev/null -w '%{http_code}' "+mirror+"/dists/bookworm/Release"); code != 0 || o != "200" {
			t.Fatalf("the agent's own command after its plugin's: %q exit %d", o, code)
		}
	})

	t.Run("root installs reach the package mirror only", func(t *testing.T) {
		inst := func(cmd string) (string, int) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			o, e, st, err := g.Output(ctx, agentproto.ExecRequest{Shell: cmd, Network: agentproto.NetworkPackageMirror})
			if err != nil {
				t.Fatal(err)
			}
			return string(o) + string(e), st.Code
		}
		if o, code := inst(curl + "-o /dev/null -w '%{http_code}' " + mirror + "/dists/bookworm/Release"); code != 0 || o != "200" {
			t.Fatalf("an install's process to the mirror: %q exit %d", o, code)
		}
		for what, cmd := range map[string]string{
			"the host through the proxy": fmt.Sprintf(curlF+"http://10.0.2.2:%d/", hostPort),
			"the host directly":          fmt.Sprintf(curl+"--noproxy '*' http://10.0.2.2:%d/", hostPort),
			"a listed name of the VM":    curlF + "http://allowed.osaurus.test/",
		} {
			if o, code := inst(cmd); code == 0 {
				t.Errorf("an install's process reached %s: %q", what, o)
			}
		}
		waitRefusal(t, cli, refusal{user: "root", dest: "10.0.2.2", port: hostPort, by: "firewall"})
		waitRefusal(t, cli, refusal{user: "root", dest: "allowed.osaurus.test", port: 80, by: "proxy"})
		// And sandbox_install works through it (apt through the proxy).
		r := peer.ok(t, "sandbox_install", map[string]any{"packages": []string{"jq"}})
		if num(r["exit_code"]) != 0 {
			t.Fatalf("sandbox_install: %v", r)
		}
	})

	t.Run("agent set takes effect on the next command", func(t *testing.T) {
		if _, errOut, code := cli.run("agent", "set", "Out", "network", "none"); code != 0 {
			t.Fatalf("agent set: %s", errOut)
		}
		mustFail(out, "the package mirror after network none", curl+"-o /dev/null "+resolved+mirror+"/dists/bookworm/Release")
		if n := count(installedRules(t, g), `^agent_forward: iif osn\d+ -> accept$`); n != 2 {
			t.Errorf("after none: %d agents let out, want 2 (Peer and Plugger)", n)
		}
		if _, errOut, code := cli.run("agent", "set", "Out", "network", "allowed.osaurus.test"); code != 0 {
			t.Fatalf("agent set: %s", errOut)
		}
		if o, code := run(out, curl+"http://allowed.osaurus.test/"); code != 0 || o != "inside-vm\n" {
			t.Fatalf("after switching to a domain list: %q exit %d", o, code)
		}
		_, errOut, code := cli.run("agent", "set", "Out", "network", "10.0.2.2")
		if code == 0 || !strings.Contains(errOut, "network:") || !strings.Contains(errOut, "IP address") {
			t.Errorf("agent set to an address: exit %d %q, want a refusal naming the field", code, errOut)
		}
		if _, errOut, code := cli.run("agent", "set", "Out", "network", "outbound"); code != 0 {
			t.Fatalf("agent set: %s", errOut)
		}
		if o, code := run(out, curl+"-o /dev/null -w '%{http_code}' "+mirror+"/dists/bookworm/Release"); code != 0 || o != "200" {
			t.Fatalf("back to outbound: %q exit %d", o, code)
		}
	})
}

// agentBinary puts the guest agent binary where every user of the guest
// can run it (`sandbox-agent netrules` reads the rules back), and returns
// its path in the guest.
func agentBinary(t *testing.T, g *agentproto.Client) string {
	t.Helper()
	b, err := assets.GuestAgent("amd64")
	if err != nil {
		t.Fatal(err)
	}
	const dst = "/usr/local/libexec/osaurus-e2e/sandbox-agent"
	if _, err := g.WriteFile(context.Background(), agentproto.WriteFileRequest{Path: dst, Data: b, Mode: 0o755, MakeParents: true}); err != nil {
		t.Fatal(err)
	}
	return dst
}

// installedRules reads the policy back from the guest kernel, as root.
func installedRules(t *testing.T, g *agentproto.Client) []string {
	t.Helper()
	o, errOut, st := sh(t, g, "", agentBinary(t, g)+" netrules")
	if st.Code != 0 {
		t.Fatalf("netrules: %s %s", o, errOut)
	}
	return strings.Split(strings.TrimSpace(o), "\n")
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

func count(lines []string, re string) int {
	r := regexp.MustCompile(re)
	n := 0
	for _, l := range lines {
		if r.MatchString(l) {
			n++
		}
	}
	return n
}

func matches(lines []string, re string) bool { return count(lines, re) > 0 }

// before reports whether line first comes before every line matching re.
func before(lines []string, first, re string) bool {
	r := regexp.MustCompile(re)
	seen := false
	for _, l := range lines {
		if l == first {
			seen = true
		}
		if r.MatchString(l) && !seen {
			return false
		}
	}
	return seen
}

// refusal is what a test expects of a `network log` entry; zero fields
// match anything.
type refusal struct {
	agent, user, dest, by, reason string
	port                          int
}

// refusalLine is one line of `network log --json`.
type refusalLine struct {
	agentproto.NetRefusal
	Agent string `json:"agent"`
}

// waitRefusal follows `network log --follow --json` until an entry
// matches want (the firewall's entries arrive from the kernel a moment
// after the refusal itself) and returns it; it fails after a minute.
func waitRefusal(t *testing.T, cli cliRun, want refusal) refusalLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli.bin, "network", "log", "--follow", "--json")
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+cli.home)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	var seen []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var l refusalLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			t.Fatalf("network log --json printed %q", sc.Text())
		}
		seen = append(seen, sc.Text())
		if (want.agent == "" || l.Agent == want.agent) && (want.user == "" || l.User == want.user) &&
			(want.dest == "" || l.Dest == want.dest) && (want.port == 0 || l.Port == want.port) &&
			(want.by == "" || l.By == want.by) && strings.Contains(l.Reason, want.reason) {
			return l
		}
	}
	t.Fatalf("no refusal %+v in network log (stderr %q):\n%s", want, errOut.String(), strings.Join(seen, "\n"))
	return refusalLine{}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return n
}

// refused says whether a failed command's output shows the connection
// refused outright: what curl, the resolver and Python print for a reset
// or an ICMP "administratively prohibited".
func refused(out string) bool {
	for _, m := range []string{"Connection refused", "No route to host", "Network is unreachable", "Could not resolve host", "Failed to connect"} {
		if strings.Contains(out, m) {
			return true
		}
	}
	return false
}
