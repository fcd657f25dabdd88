//go:build linux || darwin

package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/provision"
)

const diskSize = 64 << 20

// givesAway says whether files can be given to another owner here: on
// Linux the tests run as root (as CI does); on a Mac a developer runs them
// as themself, and the owner checks are left out.
func givesAway() bool { return runtime.GOOS == "linux" || os.Geteuid() == 0 }

// dataDir lays out a data folder: a sparse root disk with 1 MiB of data,
// two agents' homes, a project view, agents.json.
func dataDir(t *testing.T) Store {
	t.Helper()
	p := config.Paths{Root: t.TempDir()}
	disk := provision.Layout{Dir: p.ContainerDir()}.RootDisk()
	os.MkdirAll(filepath.Dir(disk), 0o755)
	f, err := os.Create(disk)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(diskSize)
	f.WriteAt(make1MiB('r'), 8<<20)
	f.Close()
	for _, d := range []string{"alice/proj", "bob"} {
		os.MkdirAll(filepath.Join(p.AgentHomes(), d), 0o755)
	}
	write(t, filepath.Join(p.AgentHomes(), "alice/notes.txt"), "alice's notes")
	write(t, filepath.Join(p.AgentHomes(), "alice/proj/main.go"), "package main")
	write(t, filepath.Join(p.AgentHomes(), "bob/bob.txt"), "bob's")
	os.Chown(filepath.Join(p.AgentHomes(), "alice/notes.txt"), 2001, 2001)
	os.Symlink("notes.txt", filepath.Join(p.AgentHomes(), "alice/link"))
	syscall.Mkfifo(filepath.Join(p.AgentHomes(), "alice/fifo"), 0o600)
	os.MkdirAll(filepath.Join(p.ProjectViews(), "alice/app"), 0o755)
	write(t, filepath.Join(p.ProjectViews(), "alice/app/README"), "view")
	os.MkdirAll(p.ConfigDir(), 0o755)
	write(t, p.AgentsJSON(), `{"agents":["alice","bob"]}`)
	return Store{Paths: p, RootDisk: provision.Layout{Dir: p.ContainerDir()}.RootDisk()}
}

func make1MiB(c byte) []byte {
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = c
	}
	return b
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A checkpoint puts back what an agent deleted and undoes what it added,
// on the root disk and in its home, keeps owners and links, and costs the
// disk's data, not its size.
func TestCreateRestoreRemove(t *testing.T) {
	s := dataDir(t)
	p := s.Paths
	ctx := context.Background()
	m, err := s.Create(ctx, "before", "user", "stopped")
	if err != nil {
		t.Fatal(err)
	}
	if m.Bytes < diskSize || m.DiskBytes > 4<<20 {
		t.Errorf("sizes: %d bytes, %d on disk; want ≥ %d and a sparse copy of ~1 MiB", m.Bytes, m.DiskBytes, diskSize)
	}
	// What it added on disk: a clone (btrfs, XFS: TMPDIR's file system
	// decides) shares the disk's 1 MiB of data, a sparse copy holds it.
	if cloned := m.Method == "clone"; cloned && m.DiskBytes >= 1<<20 || !cloned && m.DiskBytes < 1<<20 {
		t.Errorf("%s: %d bytes on disk counted for a disk with 1 MiB of data", m.Method, m.DiskBytes)
	}
	// The agent's damage.
	os.Remove(filepath.Join(p.AgentHomes(), "alice/notes.txt"))
	write(t, filepath.Join(p.AgentHomes(), "alice/new.txt"), "new")
	disk := provision.Layout{Dir: p.ContainerDir()}.RootDisk()
	f, _ := os.OpenFile(disk, os.O_WRONLY, 0)
	f.WriteAt(make1MiB('x'), 8<<20)
	f.Close()
	write(t, p.AgentsJSON(), `{"agents":["alice"]}`)

	if err := s.Restore(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(p.AgentHomes(), "alice/notes.txt")); got != "alice's notes" {
		t.Errorf("deleted file back as %q", got)
	}
	var st syscall.Stat_t
	syscall.Stat(filepath.Join(p.AgentHomes(), "alice/notes.txt"), &st)
	if givesAway() && st.Uid != 2001 {
		t.Errorf("restored file owned by %d, want 2001", st.Uid)
	}
	if _, err := os.Lstat(filepath.Join(p.AgentHomes(), "alice/new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file made after the checkpoint survived the restore: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(p.AgentHomes(), "alice/link")); err != nil || l != "notes.txt" {
		t.Errorf("symlink: %q %v", l, err)
	}
	if got := read(t, filepath.Join(p.AgentHomes(), "bob/bob.txt")); got != "bob's" {
		t.Errorf("bob's file: %q", got)
	}
	if got := read(t, filepath.Join(p.ProjectViews(), "alice/app/README")); got != "view" {
		t.Errorf("view: %q", got)
	}
	if got := read(t, p.AgentsJSON()); got != `{"agents":["alice","bob"]}` {
		t.Errorf("agents.json: %q", got)
	}
	b := make([]byte, 1)
	f, _ = os.Open(disk)
	f.ReadAt(b, 8<<20)
	fi, _ := f.Stat()
	f.Close()
	if b[0] != 'r' || fi.Size() != diskSize {
		t.Errorf("root disk after restore: %q, size %d", b, fi.Size())
	}
	if fi.Sys().(*syscall.Stat_t).Blocks*512 > 4<<20 {
		t.Errorf("restored root disk is not sparse: %d bytes allocated", fi.Sys().(*syscall.Stat_t).Blocks*512)
	}
	// Nothing staged is left beside the live folders.
	if left, _ := filepath.Glob(filepath.Join(p.Workspace(), ".*restore-*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}

	list, err := s.List()
	if err != nil || len(list) != 1 || list[0].Name != "before" || list[0].Reason != "user" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := s.Create(ctx, "before", "user", "stopped"); !errors.Is(err, ErrExists) {
		t.Errorf("second checkpoint of the same name: %v", err)
	}
	if err := s.Remove("before"); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.List(); len(list) != 0 {
		t.Errorf("after remove: %+v", list)
	}
	if err := s.Restore(ctx, "before"); !errors.Is(err, ErrNotFound) {
		t.Errorf("restore of a removed checkpoint: %v", err)
	}
}

// An agent's symlink to a host file is kept as a link: the checkpoint
// never holds the file's content, and a restore never writes through a
// link an agent left where a folder was.
func TestSymlinksAreNotFollowed(t *testing.T) {
	s := dataDir(t)
	p := s.Paths
	secret := filepath.Join(t.TempDir(), "secret")
	write(t, secret, "host secret")
	os.Symlink(secret, filepath.Join(p.AgentHomes(), "alice/steal"))
	victim := t.TempDir()
	os.Symlink(victim, filepath.Join(p.AgentHomes(), "alice/victimdir"))
	ctx := context.Background()
	if _, err := s.Create(ctx, "c1", "user", "stopped"); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(s.Dir(), "c1", "data", "homes", "alice")
	if fi, err := os.Lstat(filepath.Join(saved, "steal")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was followed into the checkpoint: %v %v", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(saved, "fifo")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a fifo was copied: %v", err)
	}
	// The agent replaces its home's folder with a link to the victim.
	os.RemoveAll(filepath.Join(p.AgentHomes(), "alice/proj"))
	os.Symlink(victim, filepath.Join(p.AgentHomes(), "alice/proj"))
	// And the whole homes folder with a link (as root could).
	os.Rename(p.AgentHomes(), p.AgentHomes()+".real")
	os.Symlink(victim, p.AgentHomes())
	if err := s.Restore(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(victim); len(ents) != 0 {
		t.Errorf("the restore wrote through a link into %s: %v", victim, ents)
	}
	if got := read(t, filepath.Join(p.AgentHomes(), "alice/proj/main.go")); got != "package main" {
		t.Errorf("restored file: %q", got)
	}
	if got := read(t, secret); got != "host secret" {
		t.Errorf("host file changed: %q", got)
	}
}

func TestNames(t *testing.T) {
	s := dataDir(t)
	for _, n := range []string{"", "../x", ".hidden", "a/b", "-x", string(make([]byte, 65))} {
		if _, err := s.Create(context.Background(), n, "user", "stopped"); !errors.Is(err, ErrName) {
			t.Errorf("name %q: %v, want ErrName", n, err)
		}
	}
	if err := CheckName("before-upgrade_2.1"); err != nil {
		t.Error(err)
	}
}

// Prune keeps the newest automatic checkpoints and every user one.
func TestPrune(t *testing.T) {
	s := dataDir(t)
	ctx := context.Background()
	for _, c := range []struct{ name, reason string }{{"u1", ReasonUser}, {"a1", "before reset"}, {"a2", "before reset"}, {"u2", ReasonUser}, {"a3", "before restoring u1"}} {
		if _, err := s.Create(ctx, c.name, c.reason, "stopped"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Prune(2); err != nil {
		t.Fatal(err)
	}
	l, _ := s.List()
	var names []string
	for _, m := range l {
		names = append(names, m.Name)
	}
	if got := strings.Join(names, ","); got != "u1,a2,u2,a3" {
		t.Errorf("after Prune(2): %s, want u1,a2,u2,a3", got)
	}
}

// diskByte is the byte of the root disk file at path where dataDir put
// its data.
func diskByte(t *testing.T, path string) byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, 8<<20); err != nil {
		t.Fatal(err)
	}
	return b[0]
}

func writeDisk(t *testing.T, path string, c byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make1MiB(c), 8<<20); err != nil {
		t.Fatal(err)
	}
}

// RestoreSaving keeps the state it replaces as a checkpoint without
// copying the root disk, and afterwards the live disk and both
// checkpoints are three separate files: writing the live disk changes
// neither checkpoint, and restoring the saved one brings the replaced
// state back.
func TestRestoreSavingLinksAndParts(t *testing.T) {
	s := dataDir(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, "good", "user", "stopped"); err != nil {
		t.Fatal(err)
	}
	writeDisk(t, s.RootDisk, 'x') // the state to replace
	write(t, filepath.Join(s.Paths.AgentHomes(), "alice/notes.txt"), "changed")
	replaced, err := os.Stat(s.RootDisk)
	if err != nil {
		t.Fatal(err)
	}

	saved, err := s.RestoreSaving(ctx, "good", "auto-1", "before restoring good", "stopped")
	if err != nil {
		t.Fatal(err)
	}
	if saved.Name != "auto-1" || !strings.HasPrefix(saved.Method, "files linked") || saved.Bytes < diskSize {
		t.Fatalf("saved: %+v", saved)
	}
	if got := diskByte(t, s.RootDisk); got != 'r' {
		t.Fatalf("live disk after the restore holds %q, want the checkpoint's 'r'", got)
	}
	savedDisk := filepath.Join(s.Dir(), "auto-1", "data", "rootfs.ext4")
	goodDisk := filepath.Join(s.Dir(), "good", "data", "rootfs.ext4")
	// Not copied: the saved checkpoint holds the replaced disk itself.
	if fi, err := os.Stat(savedDisk); err != nil || !os.SameFile(replaced, fi) {
		t.Fatalf("the saved checkpoint's disk is not the replaced one (%v): it was copied", err)
	}
	live, _ := os.Stat(s.RootDisk)
	for _, other := range []string{savedDisk, goodDisk} {
		if fi, err := os.Stat(other); err != nil || os.SameFile(live, fi) {
			t.Fatalf("the live disk shares its inode with %s (%v)", other, err)
		}
	}
	// The VM writes the live disk: no checkpoint changes with it.
	writeDisk(t, s.RootDisk, 'y')
	if diskByte(t, savedDisk) != 'x' || diskByte(t, goodDisk) != 'r' {
		t.Fatalf("a write to the live disk reached a checkpoint: saved %q, good %q", diskByte(t, savedDisk), diskByte(t, goodDisk))
	}
	// The saved state comes back whole.
	if _, err := s.RestoreSaving(ctx, "auto-1", "auto-2", "before restoring auto-1", "stopped"); err != nil {
		t.Fatal(err)
	}
	if got := diskByte(t, s.RootDisk); got != 'x' {
		t.Errorf("restoring the saved state: disk %q, want 'x'", got)
	}
	if got := read(t, filepath.Join(s.Paths.AgentHomes(), "alice/notes.txt")); got != "changed" {
		t.Errorf("restoring the saved state: alice's notes %q", got)
	}
}

// A restore cut short after the live files were linked into the saved
// checkpoint leaves the live disk sharing its inode; Unshare parts them,
// keeping the content, so the VM's next writes stay out of the checkpoint.
// RestoreSaving does it itself when the restore fails.
func TestUnshareAfterACutShortRestore(t *testing.T) {
	t.Run("crash between link and rename", func(t *testing.T) {
		s := dataDir(t)
		if _, err := s.create(context.Background(), "auto-1", "before restoring x", "stopped", true); err != nil {
			t.Fatal(err)
		}
		held := filepath.Join(s.Dir(), "auto-1", "data", "rootfs.ext4")
		a, _ := os.Stat(s.RootDisk)
		if b, _ := os.Stat(held); !os.SameFile(a, b) {
			t.Fatal("the fixture did not link the disk")
		}
		if err := s.Unshare(); err != nil {
			t.Fatal(err)
		}
		a, _ = os.Stat(s.RootDisk)
		if b, _ := os.Stat(held); os.SameFile(a, b) || a.Size() != diskSize {
			t.Fatalf("after Unshare: same inode %v, size %d", os.SameFile(a, b), a.Size())
		}
		writeDisk(t, s.RootDisk, 'z')
		if diskByte(t, held) != 'r' {
			t.Fatal("a write to the live disk reached the checkpoint")
		}
		// Nothing left shared: a second Unshare copies nothing.
		before, _ := os.Stat(s.RootDisk)
		if err := s.Unshare(); err != nil {
			t.Fatal(err)
		}
		if after, _ := os.Stat(s.RootDisk); !os.SameFile(before, after) {
			t.Error("Unshare copied a disk that shared nothing")
		}
	})
	t.Run("the restore fails", func(t *testing.T) {
		s := dataDir(t)
		ctx := context.Background()
		if _, err := s.Create(ctx, "good", "user", "stopped"); err != nil {
			t.Fatal(err)
		}
		// The checkpoint's disk is gone: its restore fails at the first
		// part, after the live state was saved by link.
		os.Remove(filepath.Join(s.Dir(), "good", "data", "rootfs.ext4"))
		writeDisk(t, s.RootDisk, 'x')
		saved, err := s.RestoreSaving(ctx, "good", "auto-1", "before restoring good", "stopped")
		if err == nil || saved.Name != "auto-1" {
			t.Fatalf("restore of a broken checkpoint: %+v, %v", saved, err)
		}
		held := filepath.Join(s.Dir(), "auto-1", "data", "rootfs.ext4")
		a, _ := os.Stat(s.RootDisk)
		if b, _ := os.Stat(held); os.SameFile(a, b) {
			t.Fatal("after a failed restore the live disk still shares the saved checkpoint's inode")
		}
		writeDisk(t, s.RootDisk, 'y')
		if diskByte(t, held) != 'x' {
			t.Fatal("a write to the live disk reached the saved checkpoint")
		}
	})
}
