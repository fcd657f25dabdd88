//go:build linux

package exec

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"golang.org/x/sys/unix"
)

// Resource control with cgroup v2. The layout below the mount:
//
//	osaurus/                 every process the agent starts; memory.max caps
//	                         them all below the VM's memory
//	osaurus/user-NAME/       one agent user: pids.max, memory.max,
//	                         memory.high, cpu.weight
//	osaurus/user-NAME/call-N one exec call, killed and removed when it ends
//	osaurus/user-NAME/bg/N   one background process and what it starts
//
// Processes start inside their group (clone3 with CLONE_INTO_CGROUP), so
// nothing runs outside it even for an instant. Every directory and file
// belongs to root and the groups are not delegated: an agent can neither
// change its limits nor move a process out. The agent itself stays in the
// root group, outside every limit.

// CgroupMount is where the cgroup2 file system is mounted.
const CgroupMount = "/sys/fs/cgroup"

// cgControllers are the controllers every agent group uses.
var cgControllers = []string{"pids", "memory", "cpu"}

// cgKillWait bounds the wait for a killed group to empty.
const cgKillWait = 10 * time.Second

// Cgroups manages the agent's part of the cgroup tree.
type Cgroups struct {
	top string // <mount>/osaurus
	seq atomic.Uint64

	mu     sync.Mutex
	limits map[string]agentproto.Limits // in force, per user group
	// spare holds, per user, emptied call groups ready for the next call:
	// making and removing a memory cgroup is a good part of a short
	// call's cost. Limits live on the user's group, so a leaf carries
	// nothing from one call to the next but its event counters, which
	// the next call reads as its baseline.
	spare map[string][]*leaf
}

// maxSpare bounds the spare call groups kept per user.
const maxSpare = 2

// leaf is an empty call group kept for reuse.
type leaf struct {
	dir    string
	fd     int
	events leafEvents // the counters when it was emptied
}

// leafEvents are a leaf's limit counters.
type leafEvents struct{ oomKill, oomGroupKill, pidsMax int64 }

func readLeafEvents(dir string) leafEvents {
	mem := cgKeys(dir, "memory.events", "oom_kill", "oom_group_kill")
	return leafEvents{oomKill: mem[0], oomGroupKill: mem[1], pidsMax: cgKey(dir, "pids.events", "max")}
}

// memReserveMB is kept out of the agents' reach for the kernel and the
// guest agent: at least this much, or an eighth of the VM's memory.
const memReserveMB = 256

// SetupCgroups mounts cgroup2 at mount when it is not mounted yet, enables
// the controllers and makes the agent's subtree. memTotal (bytes; 0:
// unknown) caps all agents together below the VM's memory, so a hog meets
// its own limit long before the kernel runs short.
func SetupCgroups(mount string, memTotal uint64) (*Cgroups, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(mount, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		if err := os.MkdirAll(mount, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup2: %w", err)
		}
		if err := unix.Mount("cgroup2", mount, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return nil, fmt.Errorf("mount cgroup2 on %s: %w (the kernel needs CONFIG_CGROUPS)", mount, err)
		}
	}
	have, err := os.ReadFile(filepath.Join(mount, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("cgroup2: %w", err)
	}
	var missing []string
	for _, c := range cgControllers {
		if !slicesContains(strings.Fields(string(have)), c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("cgroup2 controllers %s missing from this kernel (has %q): agents' process, memory and CPU limits can't be enforced",
			strings.Join(missing, ", "), strings.TrimSpace(string(have)))
	}
	if err := enableControllers(mount); err != nil {
		return nil, err
	}
	c := &Cgroups{top: filepath.Join(mount, "osaurus"), limits: map[string]agentproto.Limits{}, spare: map[string][]*leaf{}}
	if err := mkGroup(c.top, true); err != nil {
		return nil, err
	}
	if memTotal > 0 {
		total := memTotal >> 20
		reserve := max(uint64(memReserveMB), total/8)
		if total > 2*reserve {
			if err := cgWrite(c.top, "memory.max", strconv.FormatUint((total-reserve)<<20, 10)); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

func slicesContains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func enableControllers(dir string) error {
	var b strings.Builder
	for _, c := range cgControllers {
		b.WriteString(" +" + c)
	}
	return cgWrite(dir, "cgroup.subtree_control", strings.TrimSpace(b.String()))
}

// mkGroup makes a group only root may enter (0700: other agents must not
// even list its processes) and, for an inner group, enables the
// controllers for its children. An existing group is fine.
func mkGroup(dir string, inner bool) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	if inner {
		return enableControllers(dir)
	}
	return nil
}

func cgWrite(dir, file, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cgroup: write %q to %s: %w", value, filepath.Join(dir, file), err)
	}
	return nil
}

// cgKey reads "key value" files (memory.events, cpu.stat, pids.events); a
// missing key or file reads 0.
func cgKey(dir, file, key string) int64 { return cgKeys(dir, file, key)[0] }

// cgKeys reads several keys of one such file in one read.
func cgKeys(dir, file string, keys ...string) []int64 {
	out := make([]int64, len(keys))
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for i, key := range keys {
			if k == key {
				out[i], _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	return out
}

// cgValue reads a one-number file (memory.current, pids.current); "max"
// and errors read -1.
func cgValue(dir, file string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// validGroupUser rejects a user name that could name a path.
func validGroupUser(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 64 {
		return fmt.Errorf("%w: user %q can't name a cgroup", agentproto.ErrInvalid, name)
	}
	return nil
}

// userGroup returns the user's group, made on first use, with lim (nil:
// the defaults, or the limits last set) in force. Root has none: its
// processes are the host's own.
func (c *Cgroups) userGroup(a *account.Account, lim *agentproto.Limits) (string, error) {
	if a.UID == 0 {
		return "", fmt.Errorf("%w: root's processes run outside the agents' cgroups", agentproto.ErrInternal)
	}
	if err := validGroupUser(a.Name); err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	dir := filepath.Join(c.top, "user-"+a.Name)
	cur, known := c.limits[a.Name]
	want := cur
	switch {
	case lim != nil:
		want = lim.WithDefaults()
	case !known:
		want = agentproto.DefaultLimits()
	}
	if err := want.Validate(); err != nil {
		return "", err
	}
	if !known {
		if err := mkGroup(dir, true); err != nil {
			return "", err
		}
		if err := mkGroup(filepath.Join(dir, "bg"), true); err != nil {
			return "", err
		}
	}
	if known && want == cur {
		return dir, nil
	}
	mem := int64(want.MemoryMB) << 20
	// memory.high first throttles and reclaims, so a program growing
	// towards the limit slows down before it is killed at memory.max.
	high := mem - mem/10
	for _, w := range []struct{ file, value string }{
		{"pids.max", strconv.Itoa(want.MaxProcesses)},
		{"memory.max", strconv.FormatInt(mem, 10)},
		{"memory.high", strconv.FormatInt(high, 10)},
		{"cpu.weight", strconv.Itoa(want.CPUWeight)},
	} {
		if err := cgWrite(dir, w.file, w.value); err != nil {
			delete(c.limits, a.Name) // unknown state: write all again next time
			return "", err
		}
	}
	c.limits[a.Name] = want
	return dir, nil
}

// cgroup is a leaf group holding one call or one background process.
type cgroup struct {
	dir    string
	parent string // the user's group
	fd     int    // the directory, for CLONE_INTO_CGROUP
	// pidsMax0 is the user group's pids.events max at the start, to tell
	// whether this call ran into the limit on kernels that count the event
	// in the group whose limit was hit.
	pidsMax0 int64
	// events0 are the group's own counters at the start (zero for a new
	// group, what the last call left for a reused one).
	events0 leafEvents
	// pool, when set, takes the group back emptied at the end instead of
	// removing it; user names its spare list.
	pool *Cgroups
	user string

	once sync.Once
}

// newGroup makes a leaf group for one call ("call") or background process
// ("bg") of a, with the user's limits lim.
func (c *Cgroups) newGroup(a *account.Account, lim *agentproto.Limits, kind string) (*cgroup, error) {
	user, err := c.userGroup(a, lim)
	if err != nil {
		return nil, err
	}
	if kind == "call" {
		if l := c.takeSpare(a.Name); l != nil {
			return &cgroup{dir: l.dir, parent: user, fd: l.fd, pidsMax0: cgKey(user, "pids.events", "max"), events0: l.events, pool: c, user: a.Name}, nil
		}
	}
	parent := user
	name := "call-" + strconv.FormatUint(c.seq.Add(1), 10)
	if kind == "bg" {
		parent = filepath.Join(user, "bg")
		name = strconv.FormatUint(c.seq.Add(1), 10)
	}
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	// When the user's memory runs out, the OOM killer ends the whole call
	// (or background process) that held the most, never a part of it.
	if err := cgWrite(dir, "memory.oom.group", "1"); err != nil {
		unix.Rmdir(dir)
		return nil, err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Rmdir(dir)
		return nil, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	g := &cgroup{dir: dir, parent: user, fd: fd, pidsMax0: cgKey(user, "pids.events", "max")}
	if kind == "call" {
		g.pool, g.user = c, a.Name
	}
	return g, nil
}

func (c *Cgroups) takeSpare(user string) *leaf {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.spare[user]
	if len(list) == 0 {
		return nil
	}
	l := list[len(list)-1]
	c.spare[user] = list[:len(list)-1]
	return l
}

// putSpare keeps an emptied call group of user for reuse; false when the
// user has enough spares or its group went (RemoveUser) meanwhile.
func (c *Cgroups) putSpare(user string, l *leaf) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.spare[user]) >= maxSpare {
		return false
	}
	if _, err := os.Stat(l.dir); err != nil {
		return false
	}
	c.spare[user] = append(c.spare[user], l)
	return true
}

// dropSpares forgets user's spare groups; c.mu is held.
func (c *Cgroups) dropSpares(user string) {
	for _, l := range c.spare[user] {
		unix.Close(l.fd)
	}
	delete(c.spare, user)
}

// kill sends SIGKILL to every process in the group, however it detached
// (setsid, nohup, double fork).
func (g *cgroup) kill() error {
	return cgWrite(g.dir, "cgroup.kill", "1")
}

// signal sends sig to every process in the group that the user a may
// signal (killAs makes kill(2)'s check).
func (g *cgroup) signal(a *account.Account, sig unix.Signal) error {
	if sig == unix.SIGKILL {
		return g.kill()
	}
	pids, err := g.procs()
	if err != nil {
		return err
	}
	for _, pid := range pids {
		account.KillAs(a, pid, sig) // one that just exited is no error
	}
	return nil
}

func (g *cgroup) procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(g.dir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var pids []int
	for f := range strings.FieldsSeq(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids, nil
}

// limitHit names the limit the group ran into, or "".
func (g *cgroup) limitHit() string { return g.limitFrom(readLeafEvents(g.dir)) }

func (g *cgroup) limitFrom(ev leafEvents) string {
	switch {
	case ev.oomKill > g.events0.oomKill || ev.oomGroupKill > g.events0.oomGroupKill:
		return agentproto.LimitMemory
	case ev.pidsMax > g.events0.pidsMax || cgKey(g.parent, "pids.events", "max") > g.pidsMax0:
		return agentproto.LimitProcesses
	}
	return ""
}

// finish ends the group and names the limit it ran into ("" for none).
// A reused call group is emptied first and its counters read once, for
// the limit and as the next call's baseline: the kill raises neither
// event.
func (g *cgroup) finish() (limit string, err error) {
	if g.pool == nil {
		limit = g.limitHit()
		return limit, g.end()
	}
	g.once.Do(func() {
		emptied := g.empty() == nil
		ev := readLeafEvents(g.dir)
		limit = g.limitFrom(ev)
		if emptied && g.pool.putSpare(g.user, &leaf{dir: g.dir, fd: g.fd, events: ev}) {
			return
		}
		defer unix.Close(g.fd)
		err = removeGroup(g.dir)
	})
	return limit, err
}

// empty kills what is in the group, if anything, and waits until it is
// gone.
func (g *cgroup) empty() error {
	populated, err := cgPopulated(g.dir)
	if err != nil || !populated {
		return err
	}
	if err := cgWrite(g.dir, "cgroup.kill", "1"); err != nil {
		return err
	}
	return waitEmpty(g.dir, cgKillWait)
}

// end kills what is left in the group, waits for it to empty and removes
// it. Safe to call more than once.
func (g *cgroup) end() error {
	var err error
	g.once.Do(func() {
		if g.pool != nil && g.recycle() {
			return
		}
		defer unix.Close(g.fd)
		err = removeGroup(g.dir)
	})
	return err
}

// recycle empties the group and hands it to the pool; false when it
// can't (then it is removed as usual).
func (g *cgroup) recycle() bool {
	if g.empty() != nil {
		return false
	}
	// Empty, and only root can put a process in it again.
	return g.pool.putSpare(g.user, &leaf{dir: g.dir, fd: g.fd, events: readLeafEvents(g.dir)})
}

// cgPopulated reads whether a group has processes.
func cgPopulated(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false, fmt.Errorf("cgroup: %w", err)
	}
	return !bytes.Contains(b, []byte("populated 0")), nil
}

// removeGroup kills everything in dir and below, waits until it is empty
// and removes the directories, deepest first.
func removeGroup(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := cgWrite(dir, "cgroup.kill", "1"); err != nil {
		return err
	}
	if err := waitEmpty(dir, cgKillWait); err != nil {
		return err
	}
	var dirs []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := unix.Rmdir(dirs[i]); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("cgroup: remove %s: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}

// waitEmpty waits until cgroup.events says the group has no processes.
// The kernel signals a change of the file with POLLPRI.
func waitEmpty(dir string, limit time.Duration) error {
	f, err := os.Open(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	defer f.Close()
	deadline := time.Now().Add(limit)
	buf := make([]byte, 256)
	for {
		n, err := f.ReadAt(buf, 0)
		if n == 0 && err != nil {
			return fmt.Errorf("cgroup: read %s/cgroup.events: %w", dir, err)
		}
		if bytes.Contains(buf[:n], []byte("populated 0")) {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("cgroup %s: processes still there %v after the kill", dir, limit)
		}
		// The timeout is only a backstop for a missed notification.
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
		unix.Poll(fds, int(min(left, 50*time.Millisecond)/time.Millisecond)+1)
	}
}

// RemoveUser kills every process of user in any group and removes its
// groups.
func (c *Cgroups) RemoveUser(user string) error {
	if validGroupUser(user) != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.limits, user)
	c.dropSpares(user)
	return removeGroup(filepath.Join(c.top, "user-"+user))
}

// usage reads one user's group.
func (c *Cgroups) usage(user string) (agentproto.UserUsage, bool) {
	if validGroupUser(user) != nil {
		return agentproto.UserUsage{}, false
	}
	dir := filepath.Join(c.top, "user-"+user)
	if _, err := os.Stat(dir); err != nil {
		return agentproto.UserUsage{}, false
	}
	c.mu.Lock()
	lim, ok := c.limits[user]
	c.mu.Unlock()
	if !ok {
		lim = agentproto.DefaultLimits()
	}
	u := agentproto.UserUsage{
		User:        user,
		CPUMicros:   cgKey(dir, "cpu.stat", "usage_usec"),
		MemoryBytes: max(cgValue(dir, "memory.current"), 0),
		MemoryPeak:  max(cgValue(dir, "memory.peak"), 0),
		Processes:   int(max(cgValue(dir, "pids.current"), 0)),
		Limits:      lim,
		OOMKills:    cgKey(dir, "memory.events", "oom_kill"),
	}
	return u, true
}

// users lists the users that have a group.
func (c *Cgroups) users() []string {
	ents, err := os.ReadDir(c.top)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if name, ok := strings.CutPrefix(e.Name(), "user-"); ok && e.IsDir() {
			out = append(out, name)
		}
	}
	return out
}

// Usage reports the resource use of the named users (every user with a
// group when none are named). A user without a group has run nothing
// since the VM started and is left out. A nil c is an agent without
// cgroups.
func (c *Cgroups) Usage(ctx context.Context, req *agentproto.UsageRequest) (*agentproto.UsageResponse, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: this agent runs without cgroups", agentproto.ErrUnsupported)
	}
	if len(req.Users) > maxUsageUsers {
		return nil, fmt.Errorf("%w: %d users, at most %d", agentproto.ErrInvalid, len(req.Users), maxUsageUsers)
	}
	users := req.Users
	if len(users) == 0 {
		users = c.users()
	}
	resp := &agentproto.UsageResponse{Users: []agentproto.UserUsage{}}
	for _, u := range users {
		if st, ok := c.usage(u); ok {
			if t := account.ActiveTmps(); t != nil {
				st.TmpBytes = t.Used(u)
			}
			resp.Users = append(resp.Users, st)
		}
	}
	return resp, nil
}

// maxUsageUsers bounds a usage request.
const maxUsageUsers = 1000
