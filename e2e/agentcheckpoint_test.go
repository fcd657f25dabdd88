//go:build linux

package e2e

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/checkpoint"
)

// TestAgentCheckpointAndFork: alice checkpoints herself (sandbox_checkpoint)
// and the user checkpoints her; she deletes a file of her home and adds
// one; the user restores her checkpoint: her home is back as it was,
// bob's files untouched, and the state before is kept. A fork of alice
// has her files under its own uid, and neither can read the other's
// home.
func TestAgentCheckpointAndFork(t *testing.T) {
	e := startIsoEnv(t)
	e.ok("agent", "add", "alice")
	e.ok("agent", "add", "bob")
	alice, bob := e.session(t, "alice"), e.session(t, "bob")
	execOut(t, alice, "echo mine > ~/keep.txt && mkdir -p ~/src && echo 'package main' > ~/src/main.go")
	execOut(t, bob, "echo bobs > ~/bob.txt")

	if r := alice.ok(t, "sandbox_checkpoint", map[string]any{"label": "self"}); r["label"] != "self" {
		t.Fatalf("sandbox_checkpoint: %v", r)
	}
	start := time.Now()
	out := e.ok("agent", "checkpoint", "alice", "good")
	t.Logf("%s (%s)", strings.TrimSpace(out), time.Since(start).Round(time.Millisecond))

	execOut(t, alice, "rm ~/keep.txt && rm -r ~/src && echo junk > ~/junk.txt")
	execOut(t, bob, "echo after > ~/bob.txt")
	if _, _, code := e.run("agent", "restore", "alice", "good"); code != 5 {
		t.Fatalf("restore without an answer: exit %d, want 5 (declined)", code)
	}
	start = time.Now()
	out = e.ok("agent", "restore", "--yes", "alice", "good")
	t.Logf("%s (%s)", strings.TrimSpace(out), time.Since(start).Round(time.Millisecond))
	if r := execOut(t, alice, "cat ~/keep.txt ~/src/main.go; test -e ~/junk.txt && echo junk-left || echo no-junk"); str(r["stdout"]) != "mine\npackage main\nno-junk\n" {
		t.Errorf("alice's home after the restore: %v", r)
	}
	if r := execOut(t, bob, "cat ~/bob.txt"); str(r["stdout"]) != "after\n" {
		t.Errorf("bob's file after alice's restore: %v", r)
	}
	var l []checkpoint.AgentMeta
	if err := json.Unmarshal([]byte(e.ok("agent", "checkpoints", "alice", "--json")), &l); err != nil {
		t.Fatal(err)
	}
	if len(l) != 3 || l[0].Reason != checkpoint.ReasonAgent || l[1].Label != "good" || l[2].Reason != "before restoring good" {
		t.Fatalf("alice's checkpoints: %+v", l)
	}

	// A home worth timing: 500 files, 5 MB (a small project and its
	// build output).
	execOut(t, alice, "mkdir -p ~/big && head -c 5000000 /dev/urandom | split -a 3 -b 10000 - ~/big/f")
	start = time.Now()
	out = e.ok("agent", "fork", "alice", "alice2")
	wall := time.Since(start)
	m := regexp.MustCompile(`copied in ([0-9.]+)s`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("fork: %s", out)
	}
	secs, _ := strconv.ParseFloat(m[1], 64)
	t.Logf("agent fork: %.3fs in the owner (VM held still, copy, chown), %s for the command: %s", secs, wall.Round(time.Millisecond), strings.TrimSpace(out))
	if secs > 1 {
		t.Errorf("agent fork took %.2fs in the owner, want ≤ 1 s", secs)
	}
	fork := e.session(t, "alice2")
	r := execOut(t, fork, "cat ~/keep.txt ~/src/main.go; stat -c %u ~/keep.txt ~/src; id -u")
	if f := strings.Fields(str(r["stdout"])); len(f) != 6 || f[0] != "mine" || f[3] != f[5] || f[4] != f[5] {
		t.Fatalf("the fork's home (its files, their owner, its uid): %v", r)
	}
	if r := execOut(t, fork, "ls ~/big | wc -l; du -sk ~/big | cut -f1"); strings.Fields(str(r["stdout"]))[0] != "500" {
		t.Fatalf("the fork's copy of ~/big: %v", r)
	}
	if uidOf(t, fork) == uidOf(t, alice) {
		t.Fatal("the fork runs under the original's uid")
	}
	for _, c := range []struct {
		s    *session
		path string
	}{{fork, "/workspace/agents/alice/keep.txt"}, {alice, "/workspace/agents/alice2/keep.txt"}} {
		r := c.s.ok(t, "sandbox_exec", map[string]any{"command": "cat " + c.path})
		if strings.Contains(str(r["stdout"]), "mine") || !strings.Contains(str(r["stderr"]), "Permission denied") {
			t.Errorf("%s read %s: %v", c.s.name, c.path, r)
		}
	}
}
