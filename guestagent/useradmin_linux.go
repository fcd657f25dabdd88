//go:build linux

package guestagent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"github.com/osaurus/osaurus-sandbox/guestagent/files"
	"github.com/osaurus/osaurus-sandbox/guestagent/oserr"
	"golang.org/x/sys/unix"
)

const (
	// firstUID is where sandbox users start, clear of distribution users
	// (1000 and up on Debian) and system ranges.
	firstUID = 2000
	lastUID  = 59999
	// minReusedUID is the smallest home owner UserAdd adopts as the uid.
	minReusedUID = 1000
	nobodyUID    = 65534
)

// lockAccounts serialises account file edits: a mutex within the agent,
// and an OFD lock on .pwd.lock beside the passwd file, the lock file
// shadow-utils' lckpwdf takes, so a concurrent useradd run by a package
// install waits for us and we for it.
func (s *Service) lockAccounts(ctx context.Context) (unlock func(), err error) {
	s.usersMu.Lock()
	defer func() {
		if err != nil {
			s.usersMu.Unlock()
		}
	}()
	path := filepath.Join(filepath.Dir(s.users.Passwd), ".pwd.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock account files: %w", err)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	deadline := time.Now().Add(15 * time.Second)
	for {
		err = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
		if err == nil {
			break
		}
		if (err != unix.EAGAIN && err != unix.EACCES && err != unix.EINTR) || time.Now().After(deadline) || ctx.Err() != nil {
			f.Close()
			return nil, fmt.Errorf("%w: lock %s: %v", agentproto.ErrTimeout, path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return func() {
		f.Close() // releases the OFD lock
		s.usersMu.Unlock()
	}, nil
}

// writeAccountFile replaces path atomically, keeping the mode and owner of
// the file it replaces (shadow is root:shadow 0640 on Debian).
func writeAccountFile(path string, af *account.AccountFile) error {
	return WriteFileAtomic(path, af.Bytes())
}

// accountFiles are the four files as read under the lock.
type accountFiles struct {
	passwd, group, shadow, gshadow *account.AccountFile
	hasShadow, hasGShadow          bool
}

func (s *Service) readAccounts() (*accountFiles, error) {
	var af accountFiles
	var err error
	if af.passwd, err = account.ReadAccountFile(s.users.Passwd); err != nil {
		return nil, err
	}
	if af.group, err = account.ReadAccountFile(s.users.Group); err != nil {
		return nil, err
	}
	af.hasShadow = fileExists(s.users.Shadow)
	if af.shadow, err = account.ReadAccountFile(s.users.Shadow); err != nil {
		return nil, err
	}
	af.hasGShadow = fileExists(s.users.GShadow)
	if af.gshadow, err = account.ReadAccountFile(s.users.GShadow); err != nil {
		return nil, err
	}
	return &af, nil
}

// write stores the files, passwd last: an interrupted edit then leaves at
// worst a stray group or shadow line, which a retry tolerates.
func (s *Service) writeAccounts(af *accountFiles) error {
	if af.hasGShadow {
		if err := writeAccountFile(s.users.GShadow, af.gshadow); err != nil {
			return err
		}
	}
	if af.hasShadow {
		if err := writeAccountFile(s.users.Shadow, af.shadow); err != nil {
			return err
		}
	}
	if err := writeAccountFile(s.users.Group, af.group); err != nil {
		return err
	}
	return writeAccountFile(s.users.Passwd, af.passwd)
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// UserAdd creates a user, its private group and its home. An existing
// user with the same home is success (Created false).
func (s *Service) UserAdd(ctx context.Context, req *agentproto.UserAddRequest) (*agentproto.UserAddResponse, error) {
	if !account.ValidUserName(req.Name) {
		return nil, fmt.Errorf("%w: user name %q must match %s", agentproto.ErrInvalid, req.Name, account.UserNamePattern)
	}
	home := filepath.Clean(req.Home)
	if !filepath.IsAbs(req.Home) || home == "/" {
		return nil, fmt.Errorf("%w: home %q must be an absolute path below /", agentproto.ErrInvalid, req.Home)
	}
	if req.HomeMode&^0o7777 != 0 {
		return nil, fmt.Errorf("%w: home mode %o", agentproto.ErrInvalid, req.HomeMode)
	}
	mode := files.FileMode(0o700)
	if req.HomeMode != 0 {
		mode = files.FileMode(req.HomeMode)
	}
	shell := req.Shell
	if shell == "" {
		shell = "/bin/sh"
	}
	if strings.ContainsAny(shell, ":\n") || strings.ContainsAny(home, ":\n") {
		return nil, fmt.Errorf("%w: ':' or newline in home or shell", agentproto.ErrInvalid)
	}

	unlock, err := s.lockAccounts(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	af, err := s.readAccounts()
	if err != nil {
		return nil, err
	}
	if req.UID != 0 && (req.UID < firstUID || req.UID > lastUID) {
		return nil, fmt.Errorf("%w: uid %d outside %d-%d", agentproto.ErrInvalid, req.UID, firstUID, lastUID)
	}
	if e := af.passwd.Find(req.Name); e != nil {
		a, err := account.AccountFromPasswd(e)
		if err != nil {
			return nil, err
		}
		if req.UID == 0 || a.UID == req.UID {
			if filepath.Clean(a.Home) != home {
				return nil, fmt.Errorf("%w: user %s exists with home %s", agentproto.ErrExists, a.Name, a.Home)
			}
			if _, err := os.Lstat(home); errors.Is(err, fs.ErrNotExist) {
				if err := setupHome(home, a.UID, a.GID, mode, -1); err != nil {
					return nil, err
				}
			}
			return &agentproto.UserAddResponse{UID: a.UID, GID: a.GID, Home: a.Home}, nil
		}
		// The host's registry gives this user another uid (an account
		// made before uids were fixed): the registry wins.
		if a.UID < minReusedUID || a.UID == nobodyUID {
			return nil, fmt.Errorf("%w: %s (uid %d) is a system account", agentproto.ErrPermission, a.Name, a.UID)
		}
		if err := killUser(ctx, s.cfg.ProcDir, a.UID); err != nil {
			return nil, err
		}
		af.passwd.Remove(a.Name)
		af.shadow.Remove(a.Name)
		if g := af.group.Find(a.Name); len(g) > 3 && g[2] == strconv.Itoa(a.GID) && strings.Trim(g[3], ",") == "" {
			af.group.Remove(a.Name)
			af.gshadow.Remove(a.Name)
		}
	}

	uids, gids := af.passwd.IDs(), af.group.IDs()
	grp := af.group.Find(req.Name)
	uid, adopt := -1, -1
	if req.UID != 0 {
		uid = req.UID
		if adopt, err = s.checkFixedUID(req, home, uids); err != nil {
			return nil, err
		}
	} else if fi, err := os.Lstat(home); err == nil && fi.IsDir() {
		// A home that outlived the root disk (it lives on a share) keeps
		// its files owned by its old uid: take that uid again when it is
		// free.
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			owner := int(st.Uid)
			_, uidUsed := uids[owner]
			gidOwner, gidUsed := gids[owner]
			if owner >= minReusedUID && owner != nobodyUID && !uidUsed {
				// Nobody owns these files any more: they are this
				// user's from a previous root disk.
				adopt = owner
				if !gidUsed || gidOwner == req.Name {
					uid = owner
				}
			}
		}
	}
	if uid < 0 {
		// Never a uid that owns a home beside this one: its user would
		// read a removed agent's kept files.
		owned := siblingOwners(home)
		for id := firstUID; id <= lastUID; id++ {
			_, uidUsed := uids[id]
			_, gidUsed := gids[id]
			if !uidUsed && !gidUsed && !owned[id] {
				uid = id
				break
			}
		}
		if uid < 0 {
			return nil, fmt.Errorf("%w: no free uid in %d-%d", agentproto.ErrInternal, firstUID, lastUID)
		}
	}
	gid := uid
	if len(grp) > 2 {
		g, err := strconv.Atoi(grp[2])
		if err != nil {
			return nil, fmt.Errorf("%w: group %s has gid %q", agentproto.ErrInvalid, req.Name, grp[2])
		}
		gid = g
	} else if _, used := gids[gid]; used {
		for id := firstUID; id <= lastUID; id++ {
			if _, used := gids[id]; !used {
				gid = id
				break
			}
		}
	}

	af.passwd.Add(req.Name, "x", strconv.Itoa(uid), strconv.Itoa(gid), "", home, shell)
	if grp == nil {
		af.group.Add(req.Name, "x", strconv.Itoa(gid), "")
	}
	if af.hasShadow && af.shadow.Find(req.Name) == nil {
		days := strconv.FormatInt(time.Now().Unix()/86400, 10)
		af.shadow.Add(req.Name, "!", days, "0", "99999", "7", "", "", "")
	}
	if af.hasGShadow && af.gshadow.Find(req.Name) == nil {
		af.gshadow.Add(req.Name, "!", "", "")
	}
	if err := s.writeAccounts(af); err != nil {
		return nil, err
	}
	if err := setupHome(home, uid, gid, mode, adopt); err != nil {
		return nil, err
	}
	s.log.Printf("user %s added (uid %d, home %s)", req.Name, uid, home)
	return &agentproto.UserAddResponse{UID: uid, GID: gid, Home: home, Created: true}, nil
}

// checkFixedUID vets a uid the host chose for req.Name: no other user has
// it, it owns no other home beside home (a removed agent's kept home
// would otherwise be readable by the new user), and an existing home is
// the user's already or is adopted on request. It returns the uid whose
// files in home are handed over, or -1.
func (s *Service) checkFixedUID(req *agentproto.UserAddRequest, home string, uids map[int]string) (int, error) {
	if other, used := uids[req.UID]; used && other != req.Name {
		return -1, fmt.Errorf("%w: uid %d belongs to user %s", agentproto.ErrExists, req.UID, other)
	}
	parent := filepath.Dir(home)
	ents, err := os.ReadDir(parent)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return -1, fmt.Errorf("list %s: %w", parent, err)
	}
	for _, e := range ents {
		p := filepath.Join(parent, e.Name())
		if p == home {
			continue
		}
		if owner, ok := uidOwning(p); ok && owner == req.UID {
			return -1, fmt.Errorf("%w: uid %d owns %s, another agent's home; the host must give %s another uid",
				agentproto.ErrExists, req.UID, p, req.Name)
		}
	}
	owner, ok := uidOwning(home)
	if !ok || owner == req.UID {
		return -1, nil
	}
	if !req.AdoptHome {
		return -1, fmt.Errorf("%w: home %s exists and belongs to uid %d, not %d: it was left by another agent; "+
			"add the agent with --adopt-home to take it over or --purge-home to start with an empty home",
			agentproto.ErrExists, home, owner, req.UID)
	}
	if name, live := uids[owner]; live || owner < minReusedUID || owner == nobodyUID {
		return -1, fmt.Errorf("%w: home %s belongs to uid %d (%s), a live or system account; it can't be adopted",
			agentproto.ErrPermission, home, owner, name)
	}
	return owner, nil
}

// siblingOwners returns the uids owning the entries beside home.
func siblingOwners(home string) map[int]bool {
	out := map[int]bool{}
	parent := filepath.Dir(home)
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if p := filepath.Join(parent, e.Name()); p != home {
			if owner, ok := uidOwning(p); ok {
				out[owner] = true
			}
		}
	}
	return out
}

// uidOwning is the uid owning p (not following a symlink).
func uidOwning(p string) (int, bool) {
	fi, err := os.Lstat(p)
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// setupHome creates home (root-owned 0755 parents) or takes over an
// existing one. adoptUID, when not -1, is an orphaned uid whose files in
// the home are handed to the user, so it can still use them.
func setupHome(home string, uid, gid int, mode os.FileMode, adoptUID int) error {
	if err := os.MkdirAll(filepath.Dir(home), 0o755); err != nil {
		return fmt.Errorf("home parent: %w", err)
	}
	fi, err := os.Lstat(home)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(home, 0o700); err != nil {
			return fmt.Errorf("home: %w", err)
		}
	case err != nil:
		return fmt.Errorf("home: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("%w: home %s exists and is not a directory", agentproto.ErrExists, home)
	case adoptUID >= 0 && adoptUID != uid:
		if err := chownTree(home, adoptUID, uid, gid); err != nil {
			return fmt.Errorf("adopt home %s: %w", home, err)
		}
	}
	if err := os.Lchown(home, uid, gid); err != nil {
		return fmt.Errorf("home: %w", err)
	}
	if err := os.Chmod(home, mode); err != nil {
		return fmt.Errorf("home: %w", err)
	}
	return nil
}

// chownTree gives everything under dir owned by oldUID to uid:gid,
// without following symlinks.
func chownTree(dir string, oldUID, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable corners stay as they are
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == oldUID {
			return os.Lchown(p, uid, gid)
		}
		return nil
	})
}

// UserDel kills the user's processes, removes its account entries and,
// when asked, its home.
func (s *Service) UserDel(ctx context.Context, req *agentproto.UserDelRequest) (*agentproto.Empty, error) {
	if !account.ValidUserName(req.Name) {
		return nil, fmt.Errorf("%w: %q", agentproto.ErrNoSuchUser, req.Name)
	}
	unlock, err := s.lockAccounts(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	af, err := s.readAccounts()
	if err != nil {
		return nil, err
	}
	e := af.passwd.Find(req.Name)
	if e == nil {
		return nil, fmt.Errorf("%w: %q", agentproto.ErrNoSuchUser, req.Name)
	}
	a, err := account.AccountFromPasswd(e)
	if err != nil {
		return nil, err
	}
	if a.UID < minReusedUID || a.UID == nobodyUID {
		return nil, fmt.Errorf("%w: %s (uid %d) is a system account", agentproto.ErrPermission, a.Name, a.UID)
	}
	if s.cfg.Cgroups != nil {
		// Its groups go first: the kill reaches every process in them,
		// whatever uid it runs as by now.
		if err := s.cfg.Cgroups.RemoveUser(a.Name); err != nil {
			s.log.Printf("user %s: %v", a.Name, err)
		}
	}
	if err := killUser(ctx, s.cfg.ProcDir, a.UID); err != nil {
		return nil, err
	}
	if s.cfg.NetPolicy != nil {
		// Its namespaces (its own and its plugins') go with it.
		if err := s.cfg.NetPolicy.Release(a.Name, "", true); err != nil {
			s.log.Printf("user %s: %v", a.Name, err)
		}
	}
	if t := account.ActiveTmps(); t != nil {
		t.Drop(a.Name) // its temporary files go with it
	}
	af.passwd.Remove(a.Name)
	af.shadow.Remove(a.Name)
	// The private group goes with the user unless others still use it.
	if g := af.group.Find(a.Name); len(g) > 3 && g[2] == strconv.Itoa(a.GID) && strings.Trim(g[3], ",") == "" {
		af.group.Remove(a.Name)
		af.gshadow.Remove(a.Name)
	}
	af.group.DropMember(a.Name, 3)
	af.gshadow.DropMember(a.Name, 2, 3)
	if err := s.writeAccounts(af); err != nil {
		return nil, err
	}
	if req.RemoveHome {
		home := filepath.Clean(a.Home)
		if !filepath.IsAbs(home) || home == "/" {
			return nil, fmt.Errorf("%w: refusing to remove home %q", agentproto.ErrInvalid, a.Home)
		}
		if err := os.RemoveAll(home); err != nil {
			return nil, oserr.Map(fmt.Errorf("remove home: %w", err))
		}
	}
	s.log.Printf("user %s deleted", a.Name)
	return &agentproto.Empty{}, nil
}

// killUser SIGKILLs every process that has uid as a real, effective, saved
// or file-system uid, until none is left (a dying process may fork).
func killUser(ctx context.Context, procDir string, uid int) error {
	self := os.Getpid()
	for round := 1; round <= 100; round++ {
		pids, err := processesOf(procDir, uid)
		if err != nil {
			return err
		}
		alive := 0
		for _, pid := range pids {
			if pid != self && pid > 1 {
				unix.Kill(pid, unix.SIGKILL)
				alive++
			}
		}
		if alive == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(min(round, 10)) * 10 * time.Millisecond):
		}
	}
	return fmt.Errorf("%w: processes of uid %d survive SIGKILL", agentproto.ErrInternal, uid)
}

// processesOf lists the live (non-zombie) processes running as uid.
func processesOf(procDir string, uid int) ([]int, error) {
	ents, err := os.ReadDir(procDir)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if runsAs(filepath.Join(procDir, e.Name(), "status"), uid) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

func runsAs(statusPath string, uid int) bool {
	f, err := os.Open(statusPath)
	if err != nil {
		return false // exited meanwhile
	}
	defer f.Close()
	want := strconv.Itoa(uid)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "State:"); ok && strings.HasPrefix(strings.TrimSpace(v), "Z") {
			return false
		}
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			for _, id := range strings.Fields(v) {
				if id == want {
					return true
				}
			}
			return false
		}
	}
	return false
}
