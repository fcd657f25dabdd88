//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
)

func (e isoEnv) checkpoints(t testing.TB) []checkpoint.Meta {
	t.Helper()
	var l []checkpoint.Meta
	if err := json.Unmarshal([]byte(e.ok("checkpoint", "list", "--json")), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestCheckpointRestore: a checkpoint of the running sandbox with two
// agents; alice then deletes a file of her home and something is
// installed on the root disk; the user restores: both are back as they
// were, bob's files are as they were, the VM runs again, and the state
// before the restore was kept as an automatic checkpoint.
func TestCheckpointRestore(t *testing.T) {
	e := startIsoEnv(t)
	e.ok("agent", "add", "alice")
	e.ok("agent", "add", "bob")
	alice, bob := e.session(t, "alice"), e.session(t, "bob")
	execOut(t, alice, "echo mine > /workspace/agents/alice/keep.txt")
	execOut(t, bob, "echo bobs > /workspace/agents/bob/bob.txt")

	out := e.ok("checkpoint", "create", "before")
	t.Logf("%s", strings.TrimSpace(out))
	l := e.checkpoints(t)
	if len(l) != 1 || l[0].Name != "before" || l[0].VM != "running" || l[0].Reason != "user" {
		t.Fatalf("list: %+v", l)
	}
	if st := e.status(); st.State != control.Running || st.SleepingSince != nil {
		t.Fatalf("after the checkpoint the VM is %s (sleeping %v), want running", st.State, st.SleepingSince)
	}

	execOut(t, alice, "rm /workspace/agents/alice/keep.txt")
	e.ok("exec", "--", "sh", "-c", "echo v1 > /usr/local/bin/installed-tool && sync")
	execOut(t, bob, "echo after > /workspace/agents/bob/bob.txt")

	// restore asks first.
	if _, _, code := e.run("checkpoint", "restore", "before"); code != 5 {
		t.Fatalf("restore without an answer: exit %d, want 5 (declined)", code)
	}
	start := time.Now()
	out = e.ok("checkpoint", "restore", "--yes", "before")
	t.Logf("%s (%s)", strings.TrimSpace(out), time.Since(start).Round(time.Millisecond))
	if st := e.status(); st.State != control.Running {
		t.Fatalf("after restoring, the VM is %s; it was running", st.State)
	}
	if r := execOut(t, alice, "cat /workspace/agents/alice/keep.txt"); str(r["stdout"]) != "mine\n" {
		t.Errorf("alice's deleted file after the restore: %v", r)
	}
	if out := e.ok("exec", "--", "sh", "-c", "test -e /usr/local/bin/installed-tool && echo present || echo absent"); out != "absent\n" {
		t.Errorf("the root disk's change survived the restore: %q", out)
	}
	if r := execOut(t, bob, "cat /workspace/agents/bob/bob.txt; id -un"); str(r["stdout"]) != "bobs\nagent-bob\n" {
		t.Errorf("bob after the restore: %v", r)
	}
	l = e.checkpoints(t)
	if len(l) != 2 || l[1].Reason != "before restoring before" || !strings.HasPrefix(l[1].Name, "auto-") {
		t.Fatalf("list after the restore: %+v, want the automatic checkpoint of the state before", l)
	}
	e.ok("checkpoint", "remove", l[1].Name)
	if l = e.checkpoints(t); len(l) != 1 {
		t.Fatalf("after remove: %+v", l)
	}
}

// TestCheckpointWhileWriting: a checkpoint taken while an agent writes
// files (each written, then renamed into its name) is a moment of the
// sandbox: after restoring it, every file is whole and they are numbered
// without a gap.
func TestCheckpointWhileWriting(t *testing.T) {
	e := startIsoEnv(t)
	e.ok("agent", "add", "alice")
	execOut(t, e.session(t, "alice"), "true") // her Linux user and home exist
	const n = 3000
	dir := filepath.Join(e.p.AgentHomes(), "alice", "w")
	done := make(chan string, 1)
	go func() {
		// Ends with an error when the restore stops the VM under it.
		out, errOut, code := e.run("exec", "--user", "agent-alice", "--", "sh", "-c",
			"mkdir -p /workspace/agents/alice/w && cd /workspace/agents/alice/w && i=0; while [ $i -lt "+strconv.Itoa(n)+" ]; do head -c 65536 /dev/zero > .t && mv .t $i; i=$((i+1)); done")
		done <- fmt.Sprintf("exit %d: %s %s", code, out, errOut)
	}()
	testwait.Eventually(t, "alice's writes", 2*time.Minute, 50*time.Millisecond, func() bool {
		select {
		case r := <-done:
			t.Fatalf("the writer ended before writing 5 files: %s", r)
		default:
		}
		_, err := os.Stat(filepath.Join(dir, "5"))
		return err == nil
	})
	e.ok("checkpoint", "create", "during")
	e.ok("checkpoint", "restore", "--yes", "during")
	t.Logf("writer: %s", <-done)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, en := range ents {
		if en.Name() == ".t" {
			continue // the file being written: not yet under its name
		}
		i, err := strconv.Atoi(en.Name())
		if err != nil {
			t.Fatalf("unexpected %s", en.Name())
		}
		fi, _ := en.Info()
		if fi.Size() != 65536 {
			t.Errorf("file %d has %d bytes, want 65536 (whole)", i, fi.Size())
		}
		count++
	}
	for i := range count {
		if _, err := os.Stat(filepath.Join(dir, strconv.Itoa(i))); err != nil {
			t.Errorf("file %d of %d is missing: %v", i, count, err)
		}
	}
	t.Logf("the checkpoint holds %d whole files of %d being written", count, n)
	if count < 5 || count >= n {
		t.Errorf("%d files: the checkpoint was not taken while alice wrote", count)
	}
}

// BenchmarkCheckpoint: a checkpoint of the provisioned test guest with two
// agents, running (synced and paused for the copy): how long it takes,
// what it adds on disk against the root disk's allocated size; a restore
// to the first exec after it.
func BenchmarkCheckpoint(b *testing.B) {
	e := startIsoEnv(b)
	e.ok("agent", "add", "alice")
	e.ok("agent", "add", "bob")
	disk := filepath.Join(e.p.ContainerDir(), "rootfs.ext4")
	var allocated int64
	var took, restore time.Duration
	var extra, fsUsed int64
	var method string
	b.ResetTimer()
	for i := range b.N {
		name := "bench-" + strconv.Itoa(i)
		free0 := freeBytes(b, e.p.Root)
		t0 := time.Now()
		e.ok("checkpoint", "create", name)
		took += time.Since(t0)
		// The file system's own count, beside the checkpoint's: a clone
		// must cost it next to nothing.
		fsUsed += free0 - freeBytes(b, e.p.Root)
		l := e.checkpoints(b)
		extra += l[len(l)-1].DiskBytes
		method = l[len(l)-1].Method
		t0 = time.Now()
		e.ok("checkpoint", "restore", "--yes", name)
		e.ok("exec", "--", "true")
		restore += time.Since(t0)
	}
	b.StopTimer()
	allocated = allocatedBytes(disk)
	b.ReportMetric(took.Seconds()/float64(b.N), "create-s")
	b.ReportMetric(restore.Seconds()/float64(b.N), "restore-to-exec-s")
	b.ReportMetric(float64(extra/int64(b.N))/(1<<20), "extra-disk-MiB")
	b.ReportMetric(float64(allocated)/(1<<20), "rootfs-allocated-MiB")
	b.ReportMetric(float64(extra/int64(b.N))/float64(allocated)*100, "extra-disk-%-of-allocated")
	b.ReportMetric(float64(fsUsed/int64(b.N))/(1<<20), "fs-used-MiB")
	b.Logf("checkpoint method: %s (TMPDIR's file system decides: clones on btrfs and XFS)", method)
}

// freeBytes is the space free in the file system holding dir.
func freeBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bfree) * st.Bsize
}

// allocatedBytes is what a file takes on disk (its blocks).
func allocatedBytes(path string) int64 {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return 0
	}
	return st.Blocks * 512
}
