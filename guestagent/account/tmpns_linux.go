//go:build linux

package account

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/osthread"
)

// Private temporary directories.
//
// Every agent's processes (and PID 1's file operations on its behalf) run
// in a mount namespace of the agent's own, where /tmp, /var/tmp, /dev/shm
// and /run/lock are directories of one tmpfs that belongs to the agent:
// mode 0700, owned by it, nosuid and nodev, and as big as its disk quota
// (diskGB, at most half its memory). The shared directories of the root
// namespace are not there for the agent to reach, so nothing one agent
// writes to a temporary directory is visible to another, and nothing an
// agent writes lands on the root disk.
//
// The root disk itself is read-only in the agent's namespace (a
// per-mount flag: the root namespace, where root installs packages,
// keeps it writable). Packages add world-writable directories to it
// (/var/crash, /var/lib/php/sessions, /var/mail...) that no quota
// counts and every agent would share; the agent writes only its own
// areas, each a mount of its own: its home, /workspace, /output and the
// temporary directories.
//
// A namespace, not per-agent TMPDIR: programs that hard-code /tmp (most
// do) stay private, and the agent can't undo it. Leaving or changing a
// mount namespace needs CAP_SYS_ADMIN, which agents never hold; in a user
// namespace of its own (when the kernel allows those) the mounts it
// inherits are locked together, so it can't unmount one to uncover what
// lies beneath.
//
// tmpfs, not the root disk: the size limit is enforced by the kernel at
// the write (ENOSPC), which ext4 can only do with quota support our root
// disks are not built with, and its pages are charged to the memory
// cgroup of the agent that writes them, so an agent's temporary files
// take neither the root disk nor other agents' memory.

// privateTmpRoot holds, in the root namespace, one tmpfs per agent
// (privateTmpRoot/<user>). It is itself a small root-only tmpfs, detached
// in every agent's namespace.
const privateTmpRoot = "/run/osaurus-tmp"

// privateTmpDirs are the agent's temporary directories: a directory of
// its tmpfs (sub) mounted on target.
var privateTmpDirs = []struct{ sub, target string }{
	{"tmp", "/tmp"},
	{"var-tmp", "/var/tmp"},
	{"shm", "/dev/shm"},
	{"lock", "/run/lock"},
}

// agentUmask is every agent process's umask: what it creates is its own
// unless it says otherwise.
const agentUmask = 0o077

// minTmpBytes is the smallest temporary area.
const minTmpBytes = 1 << 20

// tmpNS is one agent's namespace.
type tmpNS struct {
	fd   int // the namespace; it lives as long as this is open
	uid  int
	full int64 // the size its limits give it
	size int64 // the size in force: full, or less under a cap
}

// tmpTable holds the agents' namespaces.
type tmpTable struct {
	mu sync.Mutex
	ns map[string]*tmpNS
	// caps are the host's caps on agents' areas (user → bytes): what
	// the agent's disk quota leaves after its files on the host, so its
	// home and its temporary files together stay within one quota.
	caps map[string]int64
}

// privateTmps is the table in force; nil (unit tests, a Service not
// running as the VM's init) runs agents in the root namespace.
var privateTmps struct {
	mu sync.Mutex
	t  *tmpTable
}

func ActiveTmps() *tmpTable {
	privateTmps.mu.Lock()
	defer privateTmps.mu.Unlock()
	return privateTmps.t
}

// enablePrivateTmp turns private temporary directories on for every
// agent process started from now on.
func EnablePrivateTmp() error {
	if err := os.MkdirAll(privateTmpRoot, 0o700); err != nil {
		return err
	}
	if !isMountPoint(privateTmpRoot) {
		if err := unix.Mount("osaurus-tmp", privateTmpRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=1m,mode=0700"); err != nil {
			return fmt.Errorf("mount %s: %w", privateTmpRoot, err)
		}
	}
	privateTmps.mu.Lock()
	privateTmps.t = &tmpTable{ns: map[string]*tmpNS{}, caps: map[string]int64{}}
	privateTmps.mu.Unlock()
	return nil
}

func isMountPoint(p string) bool {
	var st, parent unix.Stat_t
	if unix.Lstat(p, &st) != nil || unix.Lstat(filepath.Dir(p), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// tmpSize is the size in bytes of an agent's temporary area: its disk
// quota (decimal MB, as diskGB is), at most half its memory (the pages
// are charged to its memory cgroup; the other half stays for its
// processes).
func tmpSize(lim *agentproto.Limits) int64 {
	l := agentproto.DefaultLimits()
	if lim != nil {
		l = lim.WithDefaults()
	}
	size := int64(l.MemoryMB) << 20 / 2
	if disk := int64(l.DiskMB) * 1e6; disk > 0 && disk < size {
		size = disk
	}
	return max(size, minTmpBytes)
}

// capped is full under cap (0: none), in whole pages rounded down (the
// kernel rounds a tmpfs size up, which would let the area pass the
// quota by a page), never under the floor.
func capped(full, cap int64) int64 {
	if cap > 0 && cap < full {
		full = cap
	}
	page := int64(os.Getpagesize())
	return max(full/page*page, minTmpBytes)
}

// ensure makes a's namespace, or brings its size to lim's. A nil lim
// keeps an existing namespace's size.
func (t *tmpTable) Ensure(a *Account, lim *agentproto.Limits) error {
	full := tmpSize(lim)
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.ns[a.Name]
	if n != nil && n.uid != a.UID {
		t.dropLocked(a.Name)
		n = nil
	}
	area := filepath.Join(privateTmpRoot, a.Name)
	if n != nil {
		if lim != nil {
			n.full = full
		}
		t.resizeLocked(a.Name, n)
		return nil
	}
	size := capped(full, t.caps[a.Name])
	fd, err := makeTmpNS(a, area, size)
	if err != nil {
		return fmt.Errorf("%w: private temporary directories for %s: %v", agentproto.ErrInternal, a.Name, err)
	}
	t.ns[a.Name] = &tmpNS{fd: fd, uid: a.UID, full: full, size: size}
	return nil
}

// resizeLocked brings n's area to its full size under the cap. One
// superblock in both namespaces: the new size applies to the agent's
// view at once. Never under what the area holds (the kernel refuses
// that): an area the cap shrank under its contents stays as full as it
// is, and the host counts it against the agent's quota.
func (t *tmpTable) resizeLocked(name string, n *tmpNS) {
	area := filepath.Join(privateTmpRoot, name)
	size := capped(n.full, t.caps[name])
	if used := areaUsed(area); used > size {
		size = used
	}
	if size == n.size {
		return
	}
	if unix.Mount("", area, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(size, 10)) == nil {
		n.size = size
	}
}

// SetCap caps name's area at capBytes (0: no cap), at once when it has
// one and when it is made otherwise.
func (t *tmpTable) SetCap(name string, capBytes int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if capBytes <= 0 {
		delete(t.caps, name)
	} else {
		t.caps[name] = capBytes
	}
	if n := t.ns[name]; n != nil {
		t.resizeLocked(name, n)
	}
}

// Used is what name's temporary files take, in bytes (0 without an area).
func (t *tmpTable) Used(name string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ns[name] == nil {
		return 0
	}
	return areaUsed(filepath.Join(privateTmpRoot, name))
}

// areaUsed is the bytes in use on the tmpfs at area, rounded to pages.
func areaUsed(area string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(area, &st) != nil || st.Type != unix.TMPFS_MAGIC {
		return 0
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize
}

// makeTmpNS mounts a's tmpfs on area and makes the namespace.
func makeTmpNS(a *Account, area string, size int64) (int, error) {
	if isMountPoint(area) {
		unix.Unmount(area, unix.MNT_DETACH) // a previous user of the name
	}
	if err := os.MkdirAll(area, 0o700); err != nil {
		return -1, err
	}
	opts := fmt.Sprintf("size=%d,mode=0700,uid=%d,gid=%d", size, a.UID, a.GID)
	if err := unix.Mount("osaurus-tmp-"+a.Name, area, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return -1, fmt.Errorf("mount tmpfs on %s: %w", area, err)
	}
	for _, d := range privateTmpDirs {
		p := filepath.Join(area, d.sub)
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return -1, err
		}
		if err := os.Lchown(p, a.UID, a.GID); err != nil {
			return -1, err
		}
	}
	// The thread leaves the root namespace for good: a throwaway one.
	return osthread.Throwaway(func() (int, error) { return buildTmpNS(area, agentAreas(a)) })
}

// agentAreas are the places a's namespace keeps writable, as far as its
// permissions allow, when the root disk is made read-only there.
func agentAreas(a *Account) []string {
	return []string{a.Home, "/workspace", "/output"}
}

// buildTmpNS runs on a thread of its own: it moves the thread into a new
// mount namespace, lays out the agent's view and returns the namespace.
func buildTmpNS(area string, writable []string) (int, error) {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return -1, fmt.Errorf("unshare: %w", err)
	}
	// Mounts made in the agent's namespace never reach the root one.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return -1, fmt.Errorf("make / a slave: %w", err)
	}
	// No set-uid or set-gid program (crontab, chfn, passwd) and no file
	// capability raises an agent's rights, and no device node on the root
	// disk opens: the agent has no business with either.
	if err := unix.Mount("", "/", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return -1, fmt.Errorf("remount / nosuid,nodev: %w", err)
	}
	for _, d := range privateTmpDirs {
		if err := os.MkdirAll(d.target, 0o755); err != nil {
			return -1, err
		}
		src := filepath.Join(area, d.sub)
		if err := unix.Mount(src, d.target, "", unix.MS_BIND, ""); err != nil {
			return -1, fmt.Errorf("bind %s on %s: %w", src, d.target, err)
		}
		if err := unix.Mount("", d.target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return -1, fmt.Errorf("remount %s nosuid,nodev: %w", d.target, err)
		}
	}
	// Best effort: without it the agent sees no views, not another's.
	bindProjects(filepath.Base(area))
	// Nothing on the root disk is the agent's to write: the world-writable
	// directories packages add there would hold its files outside its
	// quota, shared with every other agent.
	if err := readOnlyRoot("/", writable); err != nil {
		return -1, err
	}
	// Every agent's area (its own included) leaves the agent's view; it
	// keeps only the directories above.
	if err := unix.Unmount(privateTmpRoot, unix.MNT_DETACH); err != nil {
		return -1, fmt.Errorf("detach %s: %w", privateTmpRoot, err)
	}
	fd, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the namespace: %w", err)
	}
	return fd, nil
}

// readOnlyRoot makes the mount at root read-only (nosuid, nodev) in the
// calling thread's mount namespace, which must be one of its own. The
// areas in writable that lie on that mount itself (a home outside
// /workspace, a VM without shares) first become mounts of their own,
// which the remount leaves writable; missing ones and links are skipped.
// An area inside another writable area, or on another mount (a home on
// the /workspace share), is left as it is: a bind of its own there would
// split one file system in two, and a rename between them (a home file
// moved to /workspace/shared) would fail with EXDEV.
func readOnlyRoot(root string, writable []string) error {
	var rootSt unix.Stat_t
	if err := unix.Stat(root, &rootSt); err != nil {
		return fmt.Errorf("stat %s: %w", root, err)
	}
	areas := slices.Clone(writable)
	slices.SortFunc(areas, func(a, b string) int { return len(a) - len(b) }) // parents first
	var kept []string
	inside := func(d string) bool {
		for _, k := range kept {
			if d == k || strings.HasPrefix(d, strings.TrimSuffix(k, "/")+"/") {
				return true
			}
		}
		return false
	}
	for _, d := range areas {
		if d == "" || inside(d) {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(d, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		kept = append(kept, d)
		if st.Dev != rootSt.Dev || isMountPoint(d) {
			continue // not on the root mount: the remount leaves it alone
		}
		if err := unix.Mount(d, d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s on itself: %w", d, err)
		}
		if err := unix.Mount("", d, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return fmt.Errorf("remount %s nosuid,nodev: %w", d, err)
		}
	}
	if err := unix.Mount("", root, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("remount %s read-only,nosuid,nodev: %w", root, err)
	}
	return nil
}

// drop forgets name's namespace and frees its tmpfs (once the agent's
// processes are gone, which UserDel sees to).
func (t *tmpTable) Drop(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropLocked(name)
}

func (t *tmpTable) dropLocked(name string) {
	// The threads that start its processes hold the namespace (and with
	// it the area's memory): they go with it.
	retireForkers(name)
	if n := t.ns[name]; n != nil {
		unix.Close(n.fd)
		delete(t.ns, name)
	}
	// The cap stays: the host sets it by name, and only when it changes.
	area := filepath.Join(privateTmpRoot, name)
	if isMountPoint(area) {
		unix.Unmount(area, unix.MNT_DETACH)
	}
	os.Remove(area)
}

// enterAgent moves the calling thread, locked and never reused, into the
// state every process and file operation of a runs in: a file-system
// context of its own with umask 077, and a's mount namespace. It must run
// while the thread is still root (joining a namespace needs
// CAP_SYS_ADMIN). Root's threads are left alone.
func enterAgent(a *Account) error {
	if a.UID == 0 {
		return nil
	}
	// Umask, root and working directory are shared by all the process's
	// threads until this.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("%w: unshare the file-system context: %v", agentproto.ErrInternal, err)
	}
	unix.Umask(agentUmask)
	t := ActiveTmps()
	if t == nil {
		return nil
	}
	if err := t.Ensure(a, nil); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.ns[a.Name]
	if n == nil {
		return fmt.Errorf("%w: %s has no private temporary directories", agentproto.ErrInternal, a.Name)
	}
	if err := unix.Setns(n.fd, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("%w: join %s's mount namespace: %v", agentproto.ErrInternal, a.Name, err)
	}
	return nil
}
