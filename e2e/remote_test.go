//go:build linux

package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
	"github.com/osaurus/osaurus-sandbox/projects"
	"github.com/osaurus/osaurus-sandbox/remotes"
)

const sshdHint = "install the test dependencies with `make deps-test` (scripts/install-deps.sh test: openssh-server, openssh-client)"

// sshBox is an OpenSSH server on loopback, started by the test with a
// throwaway host key, and an ssh client configuration (-F) that uses
// nothing of the machine's: its own key, known_hosts and options.
type sshBox struct {
	dir, config, url string
	sshd             *exec.Cmd
	exited           chan struct{}
}

// extra are more sshd_config lines.
func startSSHBox(t *testing.T, extra ...string) *sshBox {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		sshd = "/usr/sbin/sshd"
	}
	for _, bin := range []string{sshd, "ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not found: %s", bin, sshdHint)
		}
	}
	if os.Geteuid() == 0 {
		// sshd running as root wants its privilege separation folder, which
		// the package's service unit creates at boot.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, k := range []string{"host_key", "user_key"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", k, "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub := func(k string) string {
		b, err := os.ReadFile(filepath.Join(dir, k+".pub"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	port := freePort(t)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("authorized_keys", pub("user_key")+"\n")
	write("known_hosts", fmt.Sprintf("[127.0.0.1]:%d %s\n", port, pub("host_key")))
	sshdConfig := write("sshd_config", fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile %s
AuthorizedKeysFile %s
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
AllowUsers %s
X11Forwarding no
AllowTcpForwarding no
PrintMotd no
LogLevel VERBOSE
%s
`, port, filepath.Join(dir, "host_key"), filepath.Join(dir, "sshd.pid"), filepath.Join(dir, "authorized_keys"), u.Username, strings.Join(extra, "\n")))
	b := &sshBox{dir: dir, url: fmt.Sprintf("ssh://%s@127.0.0.1:%d", u.Username, port), exited: make(chan struct{})}
	b.config = write("ssh_config", fmt.Sprintf(`Host *
  IdentityFile %s
  IdentitiesOnly yes
  IdentityAgent none
  UserKnownHostsFile %s
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  PasswordAuthentication no
  ControlMaster no
  ControlPath none
  ConnectTimeout 10
  LogLevel ERROR
`, filepath.Join(dir, "user_key"), filepath.Join(dir, "known_hosts")))
	// -D: in the foreground, a child of the test; -e: its log to stderr.
	b.sshd = exec.Command(sshd, "-D", "-e", "-f", sshdConfig)
	b.sshd.Stderr = testLog{t, "sshd: "}
	if err := b.sshd.Start(); err != nil {
		t.Fatalf("sshd: %v", err)
	}
	go func() { b.sshd.Wait(); close(b.exited) }()
	t.Cleanup(func() {
		b.sshd.Process.Signal(syscall.SIGTERM)
		<-b.exited
		// Sessions are sshd's children in their own processes: none may
		// outlive it.
		if n := procsNaming(sshdConfig); n != 0 {
			t.Errorf("%d sshd processes left after the test", n)
		}
	})
	waitFor(t, "sshd to listen", 15*time.Second, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return b
}

// sshArgs are `context add`'s flags for the box's client configuration.
func (b *sshBox) sshArgs() []string { return []string{"--ssh-arg=-F", "--ssh-arg=" + b.config} }

// procsNaming counts live processes whose command line contains s.
func procsNaming(s string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == strconv.Itoa(os.Getpid()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			n++
		}
	}
	return n
}

// procsWithHome counts live processes run with OSAURUS_SANDBOX_HOME=root
// (a background owner names its data folder only there).
func procsWithHome(root string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains("\x00"+string(b)+"\x00", "\x00"+config.HomeEnv+"="+root+"\x00") {
			n++
		}
	}
	return n
}

// remoteCommand is the far side's osaurus-sandbox for a context: the test's
// binary, with this test's cache folder and dead keychain bus (sshd gives
// its sessions a fresh environment).
func remoteCommand(bin string) string {
	return fmt.Sprintf("env XDG_CACHE_HOME=%s DBUS_SESSION_BUS_ADDRESS=%s %s",
		remotes.ShellQuote(os.Getenv("XDG_CACHE_HOME")), remotes.ShellQuote(os.Getenv("DBUS_SESSION_BUS_ADDRESS")), remotes.ShellQuote(bin))
}

// TestRemoteContext drives a sandbox in a second data folder through a
// context over a real sshd on loopback, without a VM: context add checks
// the far side, status starts the far side's background owner over
// dial-stdio (nothing starts here), --context and OSAURUS_SANDBOX_CONTEXT
// choose, a wrong host key is refused with ssh's own words, commands that
// can't work remotely yet say so, and stop leaves nothing running on
// either side.
func TestRemoteContext(t *testing.T) {
	box := startSSHBox(t)
	bin := buildCLI(t)
	local := cliRun{t: t, bin: bin, home: t.TempDir()}
	remote := config.Paths{Root: t.TempDir()}
	if err := config.SaveSandbox(remote.SandboxJSON(), testConfig(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		local.run("--context", "box", "stop")
		if n := procsWithHome(remote.Root); n != 0 {
			t.Errorf("%d processes of the remote data folder left after the test", n)
		}
	})

	add := append([]string{"context", "add", "box", box.url, "--data-dir", remote.Root, "--remote-command", remoteCommand(bin)}, box.sshArgs()...)
	out := local.ok(add...)
	if !strings.Contains(out, "on linux/") || !strings.Contains(out, remote.Root) {
		t.Fatalf("context add did not describe the far side:\n%s", out)
	}
	if out := local.ok("context", "list"); !strings.Contains(out, "box") || !strings.Contains(out, "local *") {
		t.Fatalf("context list:\n%s", out)
	}

	// Through the context: the far side's owner starts there, none here.
	var st api.Status
	if err := json.Unmarshal([]byte(local.ok("--context", "box", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Owner != "background" || st.State != control.Stopped && st.State != control.NotProvisioned {
		t.Fatalf("remote status: %+v", st)
	}
	if procsWithHome(remote.Root) == 0 {
		t.Fatal("no background owner runs for the remote data folder")
	}
	if _, err := os.Stat(config.Paths{Root: local.home}.ControlSocket()); err == nil {
		t.Fatal("a local owner started: the command did not go through the context")
	}

	// `context use` and the environment choose; --context wins.
	local.ok("context", "use", "box")
	if err := json.Unmarshal([]byte(local.ok("status", "--json")), &st); err != nil || st.Owner != "background" {
		t.Fatalf("status in the current context box: %+v %v", st, err)
	}
	for _, tt := range []struct {
		env, flag string
		want      string // owner
	}{
		{"OSAURUS_SANDBOX_CONTEXT=local", "", "none"},
		{"OSAURUS_SANDBOX_CONTEXT=local", "box", "background"},
		{"", "local", "none"},
	} {
		args := []string{"status", "--json"}
		if tt.flag != "" {
			args = append([]string{"--context", tt.flag}, args...)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), config.HomeEnv+"="+local.home, tt.env)
		o, err := cmd.Output()
		var s api.Status
		if err != nil || json.Unmarshal(o, &s) != nil || s.Owner != tt.want {
			t.Errorf("env %q, --context %q: owner %q (%v), want %q", tt.env, tt.flag, s.Owner, err, tt.want)
		}
	}

	testConnectThroughContext(t, bin, local, remote)

	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--context", "nope", "status"}, 1, `no such context: "nope"`},
		{[]string{"serve"}, 1, "serve runs the owner of this machine's sandbox, not another's"},
		{[]string{"exec", "-it", "--", "sh"}, 3, "not running"},
		{[]string{"context", "add", "evil", "ssh://-oProxyCommand=touch"}, 1, "the host is missing or has characters"},
		{[]string{"context", "add", "evil", "ssh://-oProxyCommand=sh@box"}, 1, "the user name may have"},
		{[]string{"context", "add", "pw", "ssh://me:secret@box"}, 1, "no password"},
	} {
		_, errOut, code := local.run(tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", tt.args, code, tt.code, tt.want, errOut)
		}
	}

	// The far side's repair, through its owner.
	if out, errOut, code := local.run("agent", "repair"); code != 0 || !strings.Contains(out, "nothing to repair") {
		t.Errorf("agent repair through the context: exit %d\n%s%s", code, out, errOut)
	}

	// A server whose host key isn't the one known is refused by ssh,
	// and the error says so.
	other := filepath.Join(box.dir, "other_known_hosts")
	port := strings.TrimPrefix(box.url[strings.LastIndex(box.url, ":"):], ":")
	if err := os.WriteFile(other, []byte(fmt.Sprintf("[127.0.0.1]:%s %s", port, mustRead(t, filepath.Join(box.dir, "user_key.pub")))), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := local.run(append([]string{"context", "add", "spoofed", box.url, "--data-dir", remote.Root, "--remote-command", remoteCommand(bin)},
		append(box.sshArgs(), "--ssh-arg=-o", "--ssh-arg=UserKnownHostsFile="+other)...)...)
	if code != 3 || !strings.Contains(errOut, "Host key verification failed") {
		t.Errorf("context add with the wrong host key: exit %d:\n%s", code, errOut)
	}
	_, errOut, code = local.run("--context", "spoofed", "status")
	if code != 3 || !strings.Contains(errOut, "Host key verification failed") {
		t.Errorf("status through a context with the wrong host key: exit %d:\n%s", code, errOut)
	}

	testContextInstall(t, bin, local, box, remote)

	// stop: the far side's background owner ends, nothing is left.
	if out := local.ok("stop"); !strings.Contains(out, "stopped") {
		t.Errorf("stop: %s", out)
	}
	if n := procsWithHome(remote.Root); n != 0 {
		t.Errorf("after stop, %d processes of the remote data folder run", n)
	}
	local.ok("context", "use", "local")
	local.ok("context", "remove", "box")
	if _, errOut, code := local.run("--context", "box", "status"); code != 1 || !strings.Contains(errOut, "no such context") {
		t.Errorf("a removed context: exit %d: %s", code, errOut)
	}
}

// testConnectThroughContext: with context box current, agent connect
// finds the agent on the far side's owner (an agent only here is not
// found), writes an entry that names the context, and that entry, run as
// an MCP client runs it after `context use local`, still reaches the far
// side's agent. --context local and the environment choose as for every
// command. The client config files are under a HOME of the test's.
func testConnectThroughContext(t *testing.T, bin string, local cliRun, remote config.Paths) {
	t.Helper()
	far := cliRun{t: t, bin: bin, home: remote.Root}
	far.ok("agent", "add", "alice") // through the far side's running owner
	local.ok("--context", "local", "agent", "add", "bob")
	clientHome := t.TempDir()
	client := func(env string, args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), config.HomeEnv+"="+local.home, "HOME="+clientHome, "XDG_CONFIG_HOME="+filepath.Join(clientHome, ".config"), env)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	type entry struct {
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	}
	entryOf := func(file, server string) (entry, bool) {
		var f struct {
			MCPServers map[string]entry `json:"mcpServers"`
		}
		b, _ := os.ReadFile(filepath.Join(clientHome, file))
		json.Unmarshal(b, &f)
		e, ok := f.MCPServers[server]
		return e, ok
	}
	for _, tt := range []struct {
		name, env string
		args      []string
		code      int
		out       string // in stdout (stderr when code != 0)
		file      string // the client file, "" none
		server    string
		want      []string // its args
	}{
		{"the current context", "", []string{"agent", "connect", "alice", "--client", "cursor", "--yes"}, 0, "Through context box (ssh://",
			".cursor/mcp.json", "osaurus-sandbox-alice", []string{"--context", "box", "mcp", "--agent", "alice"}},
		{"an agent only this machine has", "", []string{"--context", "box", "agent", "connect", "bob", "--client", "claude-code", "--yes"}, 1, "agent not found",
			".claude.json", "osaurus-sandbox-bob", nil},
		{"the environment", remotes.Env + "=box", []string{"agent", "connect", "alice", "--client", "claude-code", "--yes"}, 0, "Through context box",
			".claude.json", "osaurus-sandbox-alice", []string{"--context", "box", "mcp", "--agent", "alice"}},
		{"--context local over the environment", remotes.Env + "=box", []string{"--context", "local", "agent", "connect", "bob", "--client", "claude-code", "--yes"}, 0, "wrote ",
			".claude.json", "osaurus-sandbox-bob", []string{"mcp", "--agent", "bob"}},
		{"an agent the far side lacks, locally", "", []string{"--context", "local", "agent", "connect", "alice", "--client", "vscode", "--dry-run"}, 1, "agent not found", "", "", nil},
		{"the generic snippets", "", []string{"agent", "connect", "alice", "--client", "generic"}, 0, `"--context",`, "", "", nil},
	} {
		out, errOut, code := client(tt.env, tt.args...)
		text := out
		if code != 0 {
			text = errOut
		}
		if code != tt.code || !strings.Contains(text, tt.out) {
			t.Errorf("%s: exit %d, want %d with %q:\nstdout: %s\nstderr: %s", tt.name, code, tt.code, tt.out, out, errOut)
			continue
		}
		if tt.file == "" {
			continue
		}
		e, ok := entryOf(tt.file, tt.server)
		if ok != (tt.want != nil) || ok && (!slices.Equal(e.Args, tt.want) || e.Env[config.HomeEnv] != local.home) {
			t.Errorf("%s: %s's %s: %+v (there: %v), want args %q", tt.name, tt.file, tt.server, e, ok, tt.want)
		}
		if remote := tt.want != nil && tt.want[0] == "--context"; code == 0 && remote != strings.Contains(out, "Through context box") {
			t.Errorf("%s: the summary names the context: %v, want %v:\n%s", tt.name, !remote, remote, out)
		}
	}
	if out, _, _ := client("", "agent", "connect", "alice", "--client", "generic"); strings.Contains(out, "Bearer") {
		t.Errorf("the generic snippets of a remote agent offer HTTP:\n%s", out)
	}

	// The entry as the client runs it, with another context current: the
	// far side's alice answers.
	e, _ := entryOf(".cursor/mcp.json", "osaurus-sandbox-alice")
	local.ok("context", "use", "local")
	cmd := exec.Command(bin, e.Args...) // the binary under test, whatever e.Command names
	cmd.Env = append(os.Environ(), "HOME="+clientHome)
	for k, v := range e.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = testLog{t, "connected mcp: "}
	s := newSession(t, "the connected entry", &mcp.CommandTransport{Command: cmd})
	if tools := s.tools(t); !slices.ContainsFunc(tools, func(n string) bool { return strings.HasPrefix(n, "sandbox_") }) {
		t.Errorf("the connected entry's server lists %q", tools)
	}
	s.cs.Close()
	local.ok("context", "use", "box")

	if out, errOut, code := client("", "agent", "disconnect", "alice", "--client", "cursor", "--yes"); code != 0 || !strings.Contains(out, "Removes osaurus-sandbox-alice") {
		t.Errorf("disconnect through the context: exit %d\n%s%s", code, out, errOut)
	}
	if _, ok := entryOf(".cursor/mcp.json", "osaurus-sandbox-alice"); ok {
		t.Error("disconnect left the entry")
	}
}

// testContextInstall: `context install` copies the binary under test to a
// second loopback sshd whose sessions get a HOME of the test's (so the
// default ~/.local/bin is a throwaway folder; the first box's sessions
// have this user's real HOME, so there --path names a temporary folder),
// refuses a far side whose uname isn't this build's without copying, and
// a context without a remote command then runs the copy.
func testContextInstall(t *testing.T, bin string, local cliRun, box *sshBox, remote config.Paths) {
	t.Helper()
	farHome, fakeBin := t.TempDir(), t.TempDir()
	box2 := startSSHBox(t, fmt.Sprintf("SetEnv HOME=%s PATH=%s:/usr/bin:/bin", farHome, fakeBin))
	// Never on the real HOME: sshd must have given the session the
	// test's.
	argv := remotes.Context{URL: box2.url, SSHArgs: []string{"-F", box2.config}}.ShellArgv(`printf %s "$HOME"`)
	if out, err := exec.Command(argv[0], argv[1:]...).Output(); err != nil || string(out) != farHome {
		t.Fatalf("the second box's sessions have HOME %q (%v), want %s: sshd's SetEnv didn't apply", out, err, farHome)
	}
	installed := filepath.Join(farHome, ".local", "bin", "osaurus-sandbox")
	_, errOut, code := local.run(append([]string{"context", "add", "inst", box2.url, "--data-dir", remote.Root}, box2.sshArgs()...)...)
	if code != 3 || !strings.Contains(errOut, "osaurus-sandbox context install inst") {
		t.Errorf("context add with no osaurus-sandbox there: exit %d:\n%s", code, errOut)
	}
	other := "Linux aarch64"
	if runtime.GOARCH == "arm64" {
		other = "Linux x86_64"
	}
	for _, tt := range []struct{ uname, want string }{
		{"Darwin arm64", "the far side is darwin/arm64 (uname -sm: Darwin arm64)"},
		{other, "the far side is linux/"},
		{"Linux riscv64", "a system no osaurus-sandbox is built for"},
	} {
		if err := os.WriteFile(filepath.Join(fakeBin, "uname"), []byte("#!/bin/sh\necho '"+tt.uname+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := local.run("context", "install", "inst")
		if code != 1 || !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "built for linux/"+runtime.GOARCH+": nothing was copied") {
			t.Errorf("install to %s: exit %d:\n%s", tt.uname, code, errOut)
		}
		if _, err := os.Stat(filepath.Dir(installed)); err == nil {
			t.Errorf("install to %s copied something", tt.uname)
		}
	}
	os.Remove(filepath.Join(fakeBin, "uname"))

	want := mustRead(t, bin)
	for i := range 2 { // the second replaces the first
		out := local.ok("context", "install", "inst")
		if !strings.Contains(out, "installed "+installed+" on inst") || !strings.Contains(out, "inst: osaurus-sandbox ") || (i == 0) != strings.Contains(out, "now runs "+installed) {
			t.Errorf("install %d:\n%s", i, out)
		}
		st, err := os.Stat(installed)
		tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(installed), ".osaurus-sandbox.*"))
		if err != nil || st.Mode().Perm() != 0o755 || mustRead(t, installed) != want || len(tmps) != 0 {
			t.Fatalf("install %d: %v %v, temporaries %q, same bytes %v", i, st, err, tmps, err == nil && mustRead(t, installed) == want)
		}
	}
	var l struct{ Contexts []remotes.Context }
	json.Unmarshal([]byte(local.ok("context", "list", "--json")), &l)
	if i := slices.IndexFunc(l.Contexts, func(c remotes.Context) bool { return c.Name == "inst" }); i < 0 || l.Contexts[i].Command != installed {
		t.Errorf("the context's remote command after install: %+v", l.Contexts)
	}
	local.ok("context", "check", "inst") // the copy answers
	if _, errOut, code := local.run("context", "install", "inst", "--path", "rel/bin"); code != 1 || !strings.Contains(errOut, `--path "rel/bin"`) {
		t.Errorf("install --path rel/bin: exit %d: %s", code, errOut)
	}
	local.ok("context", "remove", "inst")

	// box's sessions have the real HOME: only --path, into a temporary
	// folder; its own remote command stays.
	dir := filepath.Join(t.TempDir(), "bin dir")
	out := local.ok("context", "install", "box", "--path", dir)
	if !strings.Contains(out, "installed "+filepath.Join(dir, "osaurus-sandbox")) || !strings.Contains(out, "note: context box keeps its remote command") || mustRead(t, filepath.Join(dir, "osaurus-sandbox")) != want {
		t.Errorf("install into --path:\n%s", out)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRemoteContextMCP is the sandbox on the far side of a context, with
// its VM: start through the context, exec, an agent's MCP tool calls from
// a local `mcp --agent` process (the path an MCP client takes), the cost
// of the SSH hop (sandbox_exec true through the context against the same
// call on the far side's own `mcp`), then the SSH connection killed in the
// middle of a call: the call fails saying the link was lost, and nothing
// of it is left on either side (the relay, the far side's mcp, the
// command in the VM). A preview of a server the far agent runs opens on
// this machine's loopback. stop ends the far side's owner and VM.
func TestRemoteContextMCP(t *testing.T) {
	// Previews are carried by ssh -W: forwarding to the far side's
	// loopback only.
	box := startSSHBox(t, "Match all", "AllowTcpForwarding local", "PermitOpen 127.0.0.1:*")
	remote, rp := ownerSetup(t, false) // the far side's data folder and binary
	local := cliRun{t: t, bin: remote.bin, home: t.TempDir()}
	t.Cleanup(func() {
		local.run("--context", "box", "stop")
		if n := procsWithHome(rp.Root); n != 0 {
			t.Errorf("%d processes of the remote data folder left after the test", n)
		}
	})
	remote.ok("agent", "add", "alice") // on the far side, as its user would
	remote.ok("agent", "set", "alice", "enabled", "true")
	remote.ok("agent", "set", "alice", "maxCommandsPerTurn", "100") // the measurement makes 80 calls in a turn
	local.ok(append([]string{"context", "add", "box", box.url, "--data-dir", rp.Root, "--remote-command", remoteCommand(remote.bin)}, box.sshArgs()...)...)

	if out := local.ok("--context", "box", "start"); !strings.Contains(out, "running") {
		t.Fatalf("start through the context: %s", out)
	}
	if countQEMU(rp) == 0 {
		t.Fatal("no QEMU runs for the remote data folder")
	}
	if out := local.ok("--context", "box", "exec", "--", "echo", "hello from the far side"); out != "hello from the far side\n" {
		t.Fatalf("exec through the context: %q", out)
	}

	// A terminal through the context: the far side's agent shell, its
	// size following this window's, its exit code the client's.
	tm := newTmux(t)
	tm.window("far", "env "+config.HomeEnv+"="+local.home+" "+local.bin+" --context box shell alice")
	tm.typeLine("far", "echo me=$(whoami)")
	tm.waitLine("far", "me=agent-alice", 3*time.Minute)
	tm.run("resize-window", "-t", "e2e:far", "-x", "121", "-y", "37")
	tm.typeLine("far", "echo size: $(stty size)")
	tm.waitLine("far", "size: 37 121", time.Minute)
	tm.typeLine("far", "exit 5")
	tm.waitLine("far", "client-exit=5", time.Minute)

	// The far owner keeps no secrets: this machine's store (a private
	// test keyring) holds them, set through the context.
	testkeyring.Start(t)
	remote.ok("config", "set", "secretStore", "client")
	const token = "tok-from-this-machine-4711"
	setCmd := exec.Command(local.bin, "--context", "box", "secret", "set", "alice", "TOKEN")
	setCmd.Env = append(os.Environ(), config.HomeEnv+"="+local.home)
	setCmd.Stdin = strings.NewReader(token)
	if out, err := setCmd.CombinedOutput(); err != nil {
		t.Fatalf("secret set through the context: %v\n%s", err, out)
	}

	mcpVia := func(args ...string) *session {
		cmd := exec.Command(remote.bin, args...)
		cmd.Env = append(os.Environ(), config.HomeEnv+"="+local.home)
		cmd.Stderr = testLog{t, "mcp: "}
		return newSession(t, strings.Join(args, " "), &mcp.CommandTransport{Command: cmd})
	}
	far := mcpVia("--context", "box", "mcp", "--agent", "alice")
	if got := strings.TrimSpace(str(far.ok(t, "sandbox_exec", map[string]any{"command": "whoami"})["stdout"])); got != "agent-alice" {
		t.Fatalf("the tool call through the context ran as %q", got)
	}
	// The same call by the far side's own stdio server: the SSH hop's
	// cost is the difference.
	cmd := exec.Command(remote.bin, "mcp", "--agent", "alice")
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+rp.Root)
	cmd.Stderr = testLog{t, "far mcp: "}
	near := newSession(t, "far side's mcp", &mcp.CommandTransport{Command: cmd})
	near.ok(t, "sandbox_exec", map[string]any{"command": "true"})
	// Interleaved, call by call, so the machine's load swings hit both
	// paths alike.
	const n = 40
	rd, ld := make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		for _, p := range []struct {
			s *session
			d []time.Duration
		}{{far, rd}, {near, ld}} {
			start := time.Now()
			p.s.ok(t, "sandbox_exec", map[string]any{"command": "true"})
			p.d[i] = time.Since(start)
		}
	}
	slices.Sort(rd)
	slices.Sort(ld)
	ms := func(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }
	t.Logf("MCP sandbox_exec true, %d calls each, interleaved: through the remote context (ssh on loopback) median %s p90 %s; on the far side's own mcp median %s p90 %s; the hop: %s",
		n, ms(rd[n/2]), ms(rd[n*9/10]), ms(ld[n/2]), ms(ld[n*9/10]), ms(rd[n/2]-ld[n/2]))
	// tools/list never leaves the far side's mcp process: its difference
	// is the relay and ssh alone, without the VM's noise.
	for i := range n {
		for _, p := range []struct {
			s *session
			d []time.Duration
		}{{far, rd}, {near, ld}} {
			start := time.Now()
			p.s.tools(t)
			p.d[i] = time.Since(start)
		}
	}
	slices.Sort(rd)
	slices.Sort(ld)
	t.Logf("MCP tools/list, %d each, interleaved: through the remote context median %s p90 %s; on the far side's own mcp median %s p90 %s; the hop: %s",
		n, ms(rd[n/2]), ms(rd[n*9/10]), ms(ld[n/2]), ms(ld[n*9/10]), ms(rd[n/2]-ld[n/2]))
	near.cs.Close()

	// While the relay runs, the far agent reads this machine's secret,
	// and its output is redacted there.
	sum := sha256.Sum256([]byte(token + "\n"))
	if got := str(far.ok(t, "sandbox_exec", map[string]any{"command": "osaurus-host secrets get TOKEN | sha256sum"})["stdout"]); !strings.HasPrefix(got, hex.EncodeToString(sum[:])) {
		t.Errorf("the far agent's hash of this machine's secret: %q, want %x", got, sum)
	}
	if got := str(far.ok(t, "sandbox_exec", map[string]any{"command": "osaurus-host secrets get TOKEN"})["stdout"]); got != "[REDACTED:TOKEN]\n" {
		t.Errorf("the far tool result shows %q, want it redacted", got)
	}
	// The agent's secret tools reach it too (run by the far owner, which
	// the relay offers them to).
	if r := far.ok(t, "sandbox_secret_check", map[string]any{"key": "TOKEN"}); r["exists"] != true {
		t.Errorf("sandbox_secret_check through the context: %v", r)
	}
	if _, err := os.Stat(filepath.Join(rp.Root, "secrets", "secrets.json")); err == nil {
		t.Error("the far side wrote a secrets file")
	}

	// A folder of this machine, reviewed and applied across the link.
	repo := t.TempDir()
	write(t, filepath.Join(repo, "README.md"), "# far\n")
	write(t, filepath.Join(repo, "keep.txt"), "mine\n")
	local.ok("--context", "box", "project", "add", repo, "--name", "web")
	local.ok("--context", "box", "agent", "set", "alice", "projects", "web")
	view := projects.GuestDir("web")
	far.ok(t, "sandbox_exec", map[string]any{"command": "cd " + view + " && echo '# far, edited' > README.md && echo new > NEW.txt"})
	if out := local.ok("--context", "box", "changes", "alice", "web"); !strings.Contains(out, "README.md") || !strings.Contains(out, "NEW.txt") || !strings.Contains(out, "+# far, edited") {
		t.Fatalf("changes through the context:\n%s", out)
	}
	local.ok("--context", "box", "apply", "alice", "web", "--yes")
	for name, want := range map[string]string{"README.md": "# far, edited\n", "NEW.txt": "new\n", "keep.txt": "mine\n"} {
		if b, err := os.ReadFile(filepath.Join(repo, name)); err != nil || string(b) != want {
			t.Errorf("after apply through the context, %s here: %q %v, want %q", name, b, err, want)
		}
	}

	// A preview of the far agent's server, opened on this machine's
	// loopback through the context's ssh.
	far.ok(t, "sandbox_write_file", map[string]any{"path": "site/index.html", "content": "<h1>far preview</h1>\n"})
	far.ok(t, "sandbox_exec_background", map[string]any{"command": "cd ~/site && exec python3 -m http.server 8000 --bind 127.0.0.1"})
	var exposed map[string]any
	waitFor(t, "the far server to listen", time.Minute, func() bool {
		e := far.call(t, "sandbox_expose_port", map[string]any{"port": 8000})
		if e.OK {
			exposed = e.Result.(map[string]any)
		}
		return e.OK
	})
	url := str(exposed["url"])
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.Contains(str(exposed["forwarded"]), "context box") {
		t.Fatalf("the preview through the context: %v", exposed)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(page) != "<h1>far preview</h1>\n" {
		t.Fatalf("GET %s: %s %q", url, resp.Status, page)
	}

	// The SSH connection dies in the middle of a call.
	const marker = "sleep 597"
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		res, err := far.cs.CallTool(ctx, &mcp.CallToolParams{Name: "sandbox_exec", Arguments: map[string]any{"command": marker, "timeout": 290}})
		done <- result{res, err}
	}()
	inVM := func() bool {
		_, _, code := remote.run("exec", "--", "pgrep", "-f", marker)
		return code == 0
	}
	waitFor(t, "the call to run in the VM", time.Minute, inVM)
	sshPid := 0
	for _, pid := range pidsNaming(box.config) {
		if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline")); strings.HasPrefix(string(b), "ssh\x00") && strings.Contains(string(b), "mcp") {
			sshPid = pid
		}
	}
	if sshPid == 0 {
		t.Fatal("no ssh process of the relay found")
	}
	syscall.Kill(sshPid, syscall.SIGKILL)
	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the call did not end when its SSH connection died")
	}
	if r.err == nil || !strings.Contains(r.err.Error(), "connection to the remote sandbox was lost") {
		t.Fatalf("the call cut off: %+v, %v; want an error saying the connection was lost", r.res, r.err)
	}
	t.Logf("the call cut off: %v", r.err)
	defer func() {
		if t.Failed() { // which one stayed, and in what state
			for _, pid := range pidsNaming("mcp\x00--agent\x00alice") {
				cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
				t.Logf("left: pid %d %q\n%s", pid, cl, st)
			}
		}
	}()
	// Generous: the far side's mcp ends once its cut-off call is
	// cancelled, which takes long on a loaded machine.
	waitFor(t, "the relay and the far side's mcp to end", 90*time.Second, func() bool {
		return procsNaming("mcp\x00--agent\x00alice") == 0
	})
	waitFor(t, "the cut-off command to end in the VM", time.Minute, func() bool { return !inVM() })

	// No relay offers this machine's secrets any more: the far agent's
	// read fails saying how to connect.
	cmd = exec.Command(remote.bin, "mcp", "--agent", "alice")
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+rp.Root)
	cmd.Stderr = testLog{t, "far mcp: "}
	alone := newSession(t, "far side's mcp, no relay", &mcp.CommandTransport{Command: cmd})
	if r := alone.ok(t, "sandbox_exec", map[string]any{"command": "osaurus-host secrets get TOKEN"}); num(r["exit_code"]) == 0 || !strings.Contains(str(r["stderr"]), "--context NAME") {
		t.Errorf("a secret read with no machine connected: %v, want a failure saying to connect", r)
	}
	alone.cs.Close()

	// A control call (exec) whose SSH connection dies: exit 3, the lost
	// link named; the far side's dial-stdio and the command end.
	const marker2 = "sleep 598"
	ex := exec.Command(local.bin, "--context", "box", "exec", "--", "sh", "-c", "echo started; "+marker2)
	ex.Env = append(os.Environ(), config.HomeEnv+"="+local.home)
	var exErr strings.Builder
	ex.Stderr = &exErr
	exOut, err := ex.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(exOut).ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("exec through the context: %q %v", line, err)
	}
	sshPid = 0
	for _, pid := range pidsNaming(box.config) {
		if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline")); strings.HasPrefix(string(b), "ssh\x00") && strings.Contains(string(b), "dial-stdio") {
			sshPid = pid
		}
	}
	if sshPid == 0 {
		t.Fatal("no ssh process of the exec found")
	}
	syscall.Kill(sshPid, syscall.SIGKILL)
	err = ex.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || !strings.Contains(exErr.String(), "connection to the remote sandbox was lost") {
		t.Fatalf("exec cut off: %v:\n%s", err, exErr.String())
	}
	t.Logf("exec cut off: %s", strings.TrimSpace(exErr.String()))
	waitFor(t, "the far side's dial-stdio to end", 30*time.Second, func() bool { return procsNaming("dial-stdio") == 0 })
	waitFor(t, "the cut-off exec to end in the VM", time.Minute, func() bool {
		_, _, code := remote.run("exec", "--", "pgrep", "-f", marker2)
		return code != 0
	})

	if out := local.ok("--context", "box", "stop"); !strings.Contains(out, "stopped") {
		t.Errorf("stop through the context: %s", out)
	}
	noneLeft(t, rp, "stop through the context")
	if n := procsWithHome(rp.Root); n != 0 {
		t.Errorf("after stop, %d processes of the remote data folder run", n)
	}
}

// TestRemoteContextPreview: `mcp --agent` through a context over the
// real sshd, the far side's mcp a script (no VM): its answer to
// sandbox_expose_port names a preview on its loopback, and the client
// gets a URL on this machine that reaches it through the context's ssh;
// a port the far sshd won't forward to fails with ssh's words and the
// fix; when the client leaves, nothing of the forwards is left.
func TestRemoteContextPreview(t *testing.T) {
	// The far preview: like the owner's, it answers only requests
	// addressed to its own 127.0.0.1:PORT.
	preview := func() (string, *httptest.Server) {
		var srv *httptest.Server
		srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Host != srv.Listener.Addr().String() {
				http.Error(w, "refused Host "+r.Host, http.StatusForbidden)
				return
			}
			fmt.Fprint(w, "hello from the far preview")
		}))
		t.Cleanup(srv.Close)
		return "http://" + srv.Listener.Addr().String() + "/", srv
	}
	allowed, a := preview()
	refused, _ := preview()
	// Forwarding allowed to the one preview only.
	box := startSSHBox(t, "Match all", "AllowTcpForwarding local", "PermitOpen "+a.Listener.Addr().String())
	bin := buildCLI(t)
	local := cliRun{t: t, bin: bin, home: t.TempDir()}

	answer := func(id int, url string) string {
		env := fmt.Sprintf(`{"ok":true,"result":{"port":3000,"url":%q},"tool":"sandbox_expose_port"}`, url)
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{
			"content": []any{map[string]any{"type": "text", "text": env}}, "structuredContent": json.RawMessage(env)}})
		return string(b)
	}
	far := filepath.Join(box.dir, "far-mcp")
	script := fmt.Sprintf("#!/bin/sh\nread -r call\nprintf '%%s\\n' %s\nread -r call\nprintf '%%s\\n' %s\nexec cat >/dev/null\n",
		remotes.ShellQuote(answer(1, allowed)), remotes.ShellQuote(answer(2, refused)))
	if err := os.WriteFile(far, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// Its check fails: the script is no osaurus-sandbox. The context is
	// added all the same.
	local.run(append([]string{"context", "add", "box", box.url, "--remote-command", far}, box.sshArgs()...)...)

	relay := exec.Command(bin, "--context", "box", "mcp", "--agent", "alice")
	relay.Env = append(os.Environ(), config.HomeEnv+"="+local.home)
	relay.Stderr = testLog{t, "relay: "}
	in, err := relay.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := relay.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	// A test failing midway still ends the relay as its client would,
	// before sshd's cleanup waits for its sessions.
	ended := false
	t.Cleanup(func() {
		if !ended {
			in.Close()
			relay.Wait()
		}
	})
	answers := bufio.NewReader(out)
	expose := func(id int) string {
		t.Helper()
		fmt.Fprintf(in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"sandbox_expose_port","arguments":{"port":3000}}}`+"\n", id)
		line, err := answers.ReadString('\n')
		var m struct {
			Result struct {
				Structured struct {
					Result struct{ URL, Forwarded string }
				} `json:"structuredContent"`
			}
		}
		if err != nil || json.Unmarshal([]byte(line), &m) != nil {
			t.Fatalf("the answer to %d: %q %v", id, line, err)
		}
		r := m.Result.Structured.Result
		if !strings.HasPrefix(r.URL, "http://127.0.0.1:") || !strings.Contains(r.Forwarded, "over SSH (context box)") {
			t.Fatalf("the answer to %d: %s", id, line)
		}
		return r.URL
	}
	getURL := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	u := expose(1)
	if u == allowed {
		t.Fatalf("the far URL %s was not forwarded", u)
	}
	if code, body := getURL(u); code != 200 || body != "hello from the far preview" {
		t.Fatalf("GET %s through the context: %d %q", u, code, body)
	}
	if n := procsNaming("-W\x00127.0.0.1:" + strconv.Itoa(a.Listener.Addr().(*net.TCPAddr).Port)); n == 0 {
		t.Error("no ssh -W carried the request")
	}
	u2 := expose(2)
	code, body := getURL(u2)
	if code != http.StatusBadGateway || !strings.Contains(body, "stdio forwarding failed") || !strings.Contains(body, "AllowTcpForwarding") {
		t.Fatalf("GET %s, a port the far sshd won't forward to: %d %q", u2, code, body)
	}
	t.Logf("a refused forward: %s", strings.TrimSpace(body))

	in.Close()
	err = relay.Wait()
	ended = true
	if err != nil {
		t.Fatalf("the relay: %v", err)
	}
	if n := procsNaming(box.config); n != 0 {
		t.Fatalf("%d ssh processes of the context left after the relay ended", n)
	}
	if _, err := http.Get(u); err == nil {
		t.Fatal("the forward still answers after the relay ended")
	}
}

// pidsNaming lists live processes whose command line contains s.
func pidsNaming(s string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(b), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}
