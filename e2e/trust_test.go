//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diskquota"
	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
)

// ownerPID is the pid of the process owning e's sandbox (`serve`, started
// by the CLI), found by its command line and its OSAURUS_SANDBOX_HOME.
func ownerPID(t testing.TB, e isoEnv) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := []byte(config.HomeEnv + "=" + e.home + "\x00")
	for _, de := range ents {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if args := bytes.Split(cmd, []byte{0}); err != nil || len(args) < 2 || string(args[1]) != "serve" {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && bytes.Contains(append(env, 0), want) {
			return pid
		}
	}
	t.Fatalf("no `serve` process with %s", want)
	return 0
}

// inotifyWatches counts the inotify watches process pid holds, as the
// kernel lists them (the host user's max_user_watches is what they take).
func inotifyWatches(t testing.TB, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); l != "anon_inode:inotify" {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		if err == nil {
			n += bytes.Count(b, []byte("\ninotify wd:"))
		}
	}
	return n
}

// TestHostTrustSurfaces attacks, in the real app (one VM for all), what
// the host keeps for and hands out from an agent:
//   - watches: the host user's inotify budget. An agent making three times
//     MaxWatchesPerAgent directories in its home does not get more watches
//     than the bound, and a file it then writes deep in the unwatched ones
//     still counts toward its quota.
//   - secrets: the data folder's clear-text stores. The agent copies its own
//     secret value into its bridge config and its memory with osaurus-host;
//     neither the config file nor the memory database (with its journal)
//     holds the value.
//   - preview: DNS rebinding. The agent's server, exposed, answers a request
//     to the preview's own address, and a request to the same loopback
//     address naming another host (Host: evil.example:PORT) gets 403.
func TestHostTrustSurfaces(t *testing.T) {
	testkeyring.Start(t) // before the app starts: it inherits the keyring
	e := startIsoEnv(t)
	e.ok("agent", "add", "alice")
	const value = "sk-scrub-98765432"
	cmd := exec.Command(e.bin, "secret", "set", "alice", "DEPLOY_TOKEN")
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+e.home)
	cmd.Stdin = strings.NewReader(value)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("secret set: %v\n%s", err, out)
	}
	e.ok("agent", "set", "alice", "backgroundProcesses", "true")
	alice := e.session(t, "alice")

	t.Run("watches", func(t *testing.T) {
		pid := ownerPID(t, e)
		execOut(t, alice, "true") // the directories a first command makes
		before := inotifyWatches(t, pid)
		const many = 3 * diskquota.MaxWatchesPerAgent
		used := e.show(t, "alice").DiskUsed
		// The directories and a 1 MB file are made in a new directory, w:
		// the round that counts the file walked (and watched what it could
		// of) every directory beside it.
		r := execOut(t, alice, fmt.Sprintf("mkdir ~/w.tmp && cd ~/w.tmp && seq -f 'd%%05g' 1 %d | xargs mkdir && "+
			"head -c 1000000 /dev/urandom > z && cd && mv w.tmp w && ls w | wc -l", many))
		if got := strings.TrimSpace(str(r["stdout"])); got != strconv.Itoa(many+1) {
			t.Fatalf("made %s entries, want %d: %v", got, many+1, r)
		}
		pollTools(t, "the monitor to count alice's new directory", func() bool {
			return e.show(t, "alice").DiskUsed >= used+1e6
		})
		// A few directories others make meanwhile (the app's, the guest's)
		// take watches of their own; without the bound alice's alone took
		// one per directory, over 3,000.
		const others = 16
		if n := inotifyWatches(t, pid); n > before+diskquota.MaxWatchesPerAgent+others {
			t.Fatalf("alice's %d directories took %d inotify watches of the host user's (%d before); the bound is %d (and %d for others' directories)",
				many, n-before, before, diskquota.MaxWatchesPerAgent, others)
		}
		used = e.show(t, "alice").DiskUsed
		execOut(t, alice, fmt.Sprintf("head -c 3000000 /dev/urandom > ~/w/d%05d/blob && sync", many))
		pollTools(t, "alice's write in an unwatched directory to count", func() bool {
			return e.show(t, "alice").DiskUsed >= used+3e6
		})
		t.Logf("%d directories: %d watches held by the app (%d before)", many, inotifyWatches(t, pid), before)
	})

	t.Run("secrets", func(t *testing.T) {
		r := execOut(t, alice, `v=$(osaurus-host secrets get DEPLOY_TOKEN) && [ ${#v} -gt 10 ] && `+
			`osaurus-host config set token "$v" && osaurus-host config set note "use $v for prod" && `+
			`osaurus-host agent memory store "the deploy token is $v" && `+
			`osaurus-host config get note && osaurus-host agent memory query deploy; echo rc=$?`)
		if out := str(r["stdout"]); !strings.Contains(out, "rc=0") || !strings.Contains(out, "[REDACTED:DEPLOY_TOKEN] for prod") {
			t.Fatalf("alice storing her secret: %v", r)
		}
		// What the app stored, read on the host.
		var stores []string
		for _, glob := range []string{filepath.Join(e.p.BridgeConfigDir(), "*"), e.p.MemoryDB() + "*"} {
			m, _ := filepath.Glob(glob)
			stores = append(stores, m...)
		}
		if len(stores) < 2 {
			t.Fatalf("the config file and the memory database are not where expected: %v", stores)
		}
		for _, p := range stores {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), value) || strings.Contains(string(b), value[3:12]) {
				t.Errorf("%s holds alice's secret in clear", p)
			}
		}
	})

	t.Run("preview", func(t *testing.T) {
		alice.ok(t, "sandbox_write_file", map[string]any{"path": "site/.env", "content": "API_KEY=from-the-project\n"})
		alice.ok(t, "sandbox_exec_background", map[string]any{"command": "cd ~/site && exec python3 -m http.server 8000 --bind 127.0.0.1"})
		var url string
		pollTools(t, "alice's server to be exposed", func() bool {
			env := alice.call(t, "sandbox_expose_port", map[string]any{"port": 8000})
			if env.OK {
				url = env.Result.(map[string]any)["url"].(string)
			}
			return env.OK
		})
		addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/")
		_, port, _ := net.SplitHostPort(addr)
		for _, tc := range []struct {
			host string
			want int
		}{
			{addr, 200},
			{"localhost:" + port, 200},
			{"evil.example:" + port, 403},
			{"127.0.0.1", 403},
		} {
			// Always to the preview's loopback address; only Host differs.
			req, err := http.NewRequest("GET", url+".env", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tc.host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want || (tc.want == 403) == strings.Contains(string(body), "from-the-project") {
				t.Errorf("Host %s: %s %q, want %d", tc.host, resp.Status, body, tc.want)
			}
		}
	})
}

// TestRootDiskReadOnlyForAgents attacks the root disk outside every
// quota: world-writable directories packages add there (one is made here
// as root, mode 1777, as /var/crash or /var/lib/php/sessions are) must not
// take an agent's writes. In the agent's view the root disk is read-only;
// its own areas stay writable, and root (package installs) still writes
// the root disk.
func TestRootDiskReadOnlyForAgents(t *testing.T) {
	te := newToolsEnvCAs(t, false)
	te.addAgent(t, "alice", autonomous(100, true))
	alice := te.stdio(t, "alice")
	g := te.m.Agent()
	const dir = "/var/osaurus-world-writable"
	if out, errOut, st := sh(t, g, "", "mkdir -p "+dir+" && chmod 1777 "+dir+" && touch "+dir+"/by-root"); st.Code != 0 {
		t.Fatalf("as root: %s %s", out, errOut)
	}
	t.Cleanup(func() { sh(t, g, "", "rm -rf "+dir) })

	// Every directory and file of the root disk alice can write: none
	// (FIFOs and sockets hold no data). (find -xdev
	// still lists the mount points on it, her own areas: their device
	// is another.)
	r := alice.ok(t, "sandbox_exec", map[string]any{"command": "d=$(stat -c %d /); find / -xdev \\( -type d -o -type f \\) -writable -printf '%D %p\\n' 2>/dev/null | " +
		"awk -v d=$d '$1 == d {print $2}' | head -n 20; echo done", "timeout": 300})
	if out := strings.TrimSpace(str(r["stdout"])); out != "done" {
		t.Errorf("alice can write on the root disk:\n%s", out)
	}
	for _, attempt := range []string{
		"echo x > " + dir + "/alice",
		"mkdir " + dir + "/alice-dir",
		"echo x >> " + dir + "/by-root",
	} {
		// The braces take the shell's own message (a redirection that
		// fails) into the output.
		r := alice.ok(t, "sandbox_exec", map[string]any{"command": "{ " + attempt + "; } 2>&1; echo rc=$?"})
		out := str(r["stdout"])
		if strings.Contains(out, "rc=0") || !(strings.Contains(out, "Read-only file system") || strings.Contains(out, "Permission denied")) {
			t.Errorf("%s as alice: %q, want EROFS or EACCES", attempt, out)
		}
	}
	if out, _, _ := sh(t, g, "", "ls -A "+dir); strings.TrimSpace(out) != "by-root" {
		t.Errorf("%s holds %q after alice's attempts, want only by-root", dir, out)
	}
	// Her own areas stay hers.
	r = alice.ok(t, "sandbox_exec", map[string]any{"command": "set -e; for d in ~ /tmp /var/tmp /dev/shm /run/lock; do echo x > $d/w; rm $d/w; done; echo ok"})
	if strings.TrimSpace(str(r["stdout"])) != "ok" {
		t.Errorf("alice's own areas: %v", r)
	}
	// Root's view of the root disk is unchanged: package installs write it.
	if out, errOut, st := sh(t, g, "", "echo y > "+dir+"/root-again && touch /var/lib/osaurus-ro-check && rm /var/lib/osaurus-ro-check"); st.Code != 0 {
		t.Errorf("root writing the root disk: %s %s", out, errOut)
	}
}
