//go:build linux

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
)

// tmpDirs are the temporary directories every program assumes it may
// write; "$TMPDIR" is the agent's own choice of one (unset: /tmp).
var tmpDirs = []string{"/tmp", "/var/tmp", "/dev/shm", "${TMPDIR:-/tmp}"}

// TestPrivateTmp attacks the places agents share in the guest: one
// agent's temporary files must be invisible to another even when it
// makes them world-readable, what an agent creates is its own by default,
// no place an agent can write honours set-uid files or device nodes, an
// agent can't write past its diskGB anywhere (the root disk included),
// and installing a package with a service leaves no root daemon behind.
func TestPrivateTmp(t *testing.T) {
	// apt fetches over plain HTTP with signed indexes: no extra CAs.
	te := newToolsEnvCAs(t, false)
	te.addAgent(t, "Alice", autonomous(100, true))
	bobAgent := te.addAgent(t, "Bob", autonomous(100, true))
	alice := te.stdio(t, "alice")
	bob := te.http(t, "bob")

	t.Run("private", func(t *testing.T) {
		// Written world-readable on purpose: the privacy must not hang on
		// the agent's umask.
		var script strings.Builder
		for i, d := range tmpDirs {
			fmt.Fprintf(&script, "mkdir -p %[1]s/alice-dir && echo alice-secret-%[2]d > %[1]s/alice-secret-%[2]d && chmod 0777 %[1]s/alice-dir && chmod 0666 %[1]s/alice-secret-%[2]d || exit 1\n", d, i)
		}
		if r := alice.ok(t, "sandbox_exec", map[string]any{"command": script.String()}); num(r["exit_code"]) != 0 {
			t.Fatalf("alice writes her temporary files: %v", r)
		}
		for i, d := range tmpDirs {
			steal := fmt.Sprintf("cat %[1]s/alice-secret-%[2]d; ls -la %[1]s/ %[1]s/alice-dir; touch %[1]s/alice-dir/from-bob", d, i)
			r := bob.ok(t, "sandbox_exec", map[string]any{"command": steal})
			if out := str(r["stdout"]); strings.Contains(out, "alice-secret") || strings.Contains(out, "alice-dir") {
				t.Errorf("bob sees alice's files in %s: %v", d, r)
			}
			if num(r["exit_code"]) == 0 {
				t.Errorf("bob wrote into alice's directory in %s: %v", d, r)
			}
		}
		// (The file tools reach only the agent's home and the shared
		// folder: the host refuses /tmp paths before the guest sees them.)
	})

	t.Run("umask", func(t *testing.T) {
		r := alice.ok(t, "sandbox_exec", map[string]any{"command": "umask; rm -f ~/u /tmp/u; touch ~/u /tmp/u; mkdir -p ~/ud; stat -c %a ~/u /tmp/u ~/ud"})
		if got := strings.Fields(str(r["stdout"])); !slices.Equal(got, []string{"0077", "600", "600", "700"}) {
			t.Errorf("umask and modes of new files: %q, want 0077 600 600 700 (%v)", got, r)
		}
		// A background process gets the same.
		r = alice.ok(t, "sandbox_exec_background", map[string]any{"command": "umask > ~/bg-umask"})
		pid := num(r["pid"])
		alice.ok(t, "sandbox_process", map[string]any{"action": "wait", "pid": pid, "timeout": 30})
		if r := alice.ok(t, "sandbox_read_file", map[string]any{"path": "bg-umask"}); strings.TrimSpace(str(r["content"])) != "0077" {
			t.Errorf("background process umask: %v", r)
		}
	})

	t.Run("nosuid nodev", func(t *testing.T) {
		// Every mount in which alice finds a directory she can write.
		const script = `while read -r dev mp fs opts rest; do
  mp=$(printf '%b' "$mp")
  d=$(stat -c %d "$mp" 2>/dev/null) || continue
  # find -xdev still lists the mount points below mp: keep mp's own.
  w=$(find "$mp" -xdev -maxdepth 3 -type d -writable 2>/dev/null | while read -r w; do
    [ "$(stat -c %d "$w")" = "$d" ] && { echo "$w"; break; }; done)
  [ -n "$w" ] && printf '%s %s %s\n' "$mp" "$opts" "$w"
done < /proc/mounts; true`
		r := alice.ok(t, "sandbox_exec", map[string]any{"command": script})
		seen := map[string]bool{}
		for line := range strings.Lines(str(r["stdout"])) {
			f := strings.Fields(line)
			if len(f) < 3 {
				continue
			}
			seen[f[0]] = true
			opts := strings.Split(f[1], ",")
			if !slices.Contains(opts, "nosuid") || !slices.Contains(opts, "nodev") {
				t.Errorf("alice can write %s on %s, mounted %s: want nosuid,nodev", f[2], f[0], f[1])
			}
		}
		for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm", "/workspace"} {
			if !seen[d] {
				t.Errorf("alice can't write %s, or it is no mount of its own (writable mounts: %v)", d, r["stdout"])
			}
		}
		// Nor does the root disk honour set-uid programs (crontab, chfn)
		// for her.
		r = alice.ok(t, "sandbox_exec", map[string]any{"command": `awk '$2 == "/" {print $4}' /proc/mounts`})
		if opts := strings.Split(strings.TrimSpace(str(r["stdout"])), ","); !slices.Contains(opts, "nosuid") || !slices.Contains(opts, "nodev") {
			t.Errorf("the root disk in alice's view is mounted %v: want nosuid,nodev", opts)
		}
	})

	t.Run("quota", func(t *testing.T) {
		const quotaMB = 100
		if _, err := te.reg.Update(bobAgent.ID, func(a *agents.Agent) error { a.DiskGB = quotaMB / 1000.0; return nil }); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"/var/tmp", "/tmp", "/dev/shm"} {
			// Three times the quota, then what landed.
			cmd := fmt.Sprintf("rm -rf /tmp/* /var/tmp/* /dev/shm/* 2>/dev/null; dd if=/dev/zero of=%s/fill bs=1M count=%d 2>&1; echo rc=$?; du -sm %s/fill", d, 3*quotaMB, d)
			r := bob.ok(t, "sandbox_exec", map[string]any{"command": cmd, "timeout": 120})
			out := str(r["stdout"])
			if strings.Contains(out, "rc=0") {
				t.Errorf("bob (diskGB %g) wrote %d MB to %s: %v", quotaMB/1000.0, 3*quotaMB, d, r)
				continue
			}
			if !strings.Contains(out, "No space left on device") && !strings.Contains(out, "Disk quota exceeded") {
				t.Errorf("write past the quota in %s did not fail with ENOSPC or EDQUOT: %v", d, r)
			}
			m := regexp.MustCompile(`(?m)^(\d+)\s+\S*/fill$`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no size of %s/fill: %v", d, r)
			}
			mb, _ := strconv.Atoi(m[1])
			if mb > quotaMB || mb < quotaMB/2 {
				t.Errorf("bob's write to %s stopped at %d MB, want near his %d MB quota", d, mb, quotaMB)
			}
		}
		bob.ok(t, "sandbox_exec", map[string]any{"command": "rm -rf /tmp/* /var/tmp/* /dev/shm/*"})
	})

	t.Run("no root daemon from a package", func(t *testing.T) {
		g := te.m.Agent()
		// The package index first, as root and without the install's
		// two-minute bound: on a loaded test machine apt-get update
		// alone can take longer. The install itself goes through the
		// product.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if out, errOut, st, err := g.Output(ctx, agentproto.ExecRequest{Shell: "apt-get update -q"}); err != nil || st.Code != 0 {
			t.Fatalf("apt-get update: %v %+v %s %s", err, st, out, errOut)
		}
		// Debian's invoke-rc.d starts a service on its own only when it
		// finds an init system (/sbin/init) and the runlevel (runlevel(8)
		// reading utmp): the test guest has neither, an image with
		// sysvinit has both. Look like one of those, at runlevel 2.
		const fakeInit = `set -e
for f in /sbin/init /sbin/runlevel; do
  if [ ! -e $f ]; then printf '#!/bin/sh\necho N 2\n' > $f; chmod 755 $f; echo $f; fi
done`
		out, errOut, st := sh(t, g, "", fakeInit)
		if st.Code != 0 {
			t.Fatalf("fake an init system: %s %s", out, errOut)
		}
		t.Cleanup(func() { sh(t, g, "", "rm -f "+strings.Join(strings.Fields(out), " ")) })
		before := rootProcesses(t, te)
		if r := alice.ok(t, "sandbox_install", map[string]any{"packages": []string{"cron"}}); fmt.Sprint(r["installed"]) != "[cron]" {
			t.Fatalf("install cron: %v", r)
		}
		// What a maintainer script does to start its service, done by
		// root on purpose: refused (invoke-rc.d then exits 0, as a
		// maintainer script needs; what counts is what runs after).
		out, errOut, st = sh(t, g, "", "invoke-rc.d cron start")
		t.Logf("invoke-rc.d cron start as root: exit %d: %s %s", st.Code, out, errOut)
		after := rootProcesses(t, te)
		for pid, comm := range after {
			if _, ok := before[pid]; !ok {
				t.Errorf("a new root process after installing cron: %d %s", pid, comm)
			}
		}
	})
}

// rootProcesses lists the guest's user-space processes that run as root
// (pid → command name), leaving out the listing's own shell and its
// children.
func rootProcesses(t *testing.T, te *toolsEnv) map[int]string {
	t.Helper()
	const script = `for d in /proc/[0-9]*; do
  p=${d#/proc/}
  [ "$p" = $$ ] && continue
  [ -s "$d/cmdline" ] || [ "$(head -c 1 "$d/cmdline" 2>/dev/null | wc -c)" -gt 0 ] || continue
  set -- $(awk '/^PPid:/{pp=$2} /^Uid:/{u=$2} END{print pp, u}' "$d/status" 2>/dev/null)
  [ "$1" = $$ ] && continue
  [ "$2" = 0 ] && echo "$p $(cat "$d/comm" 2>/dev/null)"
done; true`
	out, errOut, st := sh(t, te.m.Agent(), "", script)
	if st.Code != 0 {
		t.Fatalf("list root processes: %s %s", out, errOut)
	}
	procs := map[int]string{}
	for line := range strings.Lines(out) {
		pid, comm, _ := strings.Cut(strings.TrimSpace(line), " ")
		if n, err := strconv.Atoi(pid); err == nil {
			procs[n] = comm
		}
	}
	if _, ok := procs[1]; !ok {
		t.Fatalf("the listing missed PID 1: %q %s", out, errOut)
	}
	return procs
}
