package account

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// UserDB names the account files. The agent reads and edits them itself,
// in pure Go, because the guest root may be Alpine (busybox) or Debian
// (shadow-utils) and neither tool set can be relied on. Empty fields mean
// the system files under /etc.
type UserDB struct {
	Passwd  string
	Group   string
	Shadow  string // edited only when the file exists
	GShadow string // edited only when the file exists
}

func (db UserDB) WithDefaults() UserDB {
	if db.Passwd == "" {
		db.Passwd = "/etc/passwd"
	}
	if db.Group == "" {
		db.Group = "/etc/group"
	}
	if db.Shadow == "" {
		db.Shadow = "/etc/shadow"
	}
	if db.GShadow == "" {
		db.GShadow = "/etc/gshadow"
	}
	return db
}

// Account is a user as the agent runs things for it.
type Account struct {
	Name   string
	UID    int
	GID    int
	Home   string
	Shell  string
	Groups []int // supplementary groups, the primary group first
}

// UserNamePattern is what ValidUserName accepts, for error messages.
const UserNamePattern = `^[a-z_][a-z0-9_-]{0,31}$`

// ValidUserName reports whether name is acceptable for UserAdd: short,
// lower case and safe in every account file and shell. It matches
// UserNamePattern, checked by hand: a regular expression compiled at the
// agent's start costs the guest's boot about 10 ms under emulation.
func ValidUserName(name string) bool {
	if len(name) == 0 || len(name) > 32 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Lookup finds a user and its groups. The empty name is root; a root-less
// passwd file still yields uid 0 so a broken image stays manageable.
//
// Every call reads what the files say now, but a lookup whose files are
// the same as at the last one (the same file, size and modification
// time: the agent replaces them by rename, which makes a new file) answers
// from memory: under emulation reading and parsing them was a good part
// of a short call's cost.
func (db UserDB) Lookup(name string) (Account, error) {
	db = db.WithDefaults()
	if name == "" {
		name = "root"
	}
	key := lookupKey{db.Passwd, db.Group, name}
	pwSt, pwErr := os.Stat(db.Passwd)
	grSt, grErr := os.Stat(db.Group)
	if pwErr == nil && grErr == nil {
		if a, ok := lookups.get(key, pwSt, grSt); ok {
			return a, nil
		}
	}
	a, err := db.lookup(name)
	if err == nil && pwErr == nil && grErr == nil {
		lookups.put(key, pwSt, grSt, a)
	}
	return a, err
}

// lookups remembers the accounts found, with the files they were found in.
var lookups = lookupCache{m: map[lookupKey]cachedAccount{}}

type lookupKey struct{ passwd, group, name string }

type cachedAccount struct {
	a           Account
	passwd, grp fs.FileInfo
}

type lookupCache struct {
	mu sync.Mutex
	m  map[lookupKey]cachedAccount
}

// maxLookups bounds the cache: a name that was never a user is not kept
// (lookups of unknown names fail and are not cached), so this only
// bounds the users that came and went.
const maxLookups = 1024

func sameFile(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

func (c *lookupCache) get(k lookupKey, pw, gr fs.FileInfo) (Account, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !sameFile(e.passwd, pw) || !sameFile(e.grp, gr) {
		return Account{}, false
	}
	a := e.a
	a.Groups = slices.Clone(a.Groups)
	return a, true
}

func (c *lookupCache) put(k lookupKey, pw, gr fs.FileInfo, a Account) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxLookups {
		clear(c.m)
	}
	a.Groups = slices.Clone(a.Groups)
	c.m[k] = cachedAccount{a: a, passwd: pw, grp: gr}
}

// lookup reads the files.
func (db UserDB) lookup(name string) (Account, error) {
	pw, err := ReadAccountFile(db.Passwd)
	if err != nil {
		return Account{}, err
	}
	fields := pw.Find(name)
	if fields == nil {
		if name == "root" {
			return Account{Name: "root", Home: "/root", Shell: "/bin/sh", Groups: []int{0}}, nil
		}
		return Account{}, fmt.Errorf("%w: %q", agentproto.ErrNoSuchUser, name)
	}
	a, err := AccountFromPasswd(fields)
	if err != nil {
		return Account{}, err
	}
	gr, err := ReadAccountFile(db.Group)
	if err != nil {
		return Account{}, err
	}
	a.Groups = []int{a.GID}
	gr.each(func(f []string) {
		if len(f) < 4 {
			return
		}
		gid, err := strconv.Atoi(f[2])
		if err != nil || slices.Contains(a.Groups, gid) {
			return
		}
		if slices.Contains(strings.Split(f[3], ","), a.Name) {
			a.Groups = append(a.Groups, gid)
		}
	})
	return a, nil
}

func AccountFromPasswd(f []string) (Account, error) {
	if len(f) < 7 {
		return Account{}, fmt.Errorf("passwd entry %q: %w: want 7 fields", f[0], agentproto.ErrInvalid)
	}
	uid, err1 := strconv.Atoi(f[2])
	gid, err2 := strconv.Atoi(f[3])
	if err := errors.Join(err1, err2); err != nil {
		return Account{}, fmt.Errorf("passwd entry %q: %w: %v", f[0], agentproto.ErrInvalid, err)
	}
	shell := f[6]
	if shell == "" {
		shell = "/bin/sh"
	}
	return Account{Name: f[0], UID: uid, GID: gid, Home: f[5], Shell: shell}, nil
}

// accountFile is a colon-separated account file (passwd, group, shadow,
// gshadow) kept line by line, so an edit leaves every other line,
// comments included, exactly as it was.
type AccountFile struct {
	lines []string
}

// readAccountFile reads path; a missing file is empty.
func ReadAccountFile(path string) (*AccountFile, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &AccountFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return parseAccountFile(data), nil
}

func parseAccountFile(data []byte) *AccountFile {
	if len(data) == 0 {
		return &AccountFile{}
	}
	return &AccountFile{lines: strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")}
}

// entry splits line into fields, or returns nil for comments, blank lines
// and NIS compat entries ("+", "-"), which are never matched.
func entry(line string) []string {
	if line == "" || line[0] == '#' || line[0] == '+' || line[0] == '-' {
		return nil
	}
	return strings.Split(line, ":")
}

func (f *AccountFile) each(fn func(fields []string)) {
	for _, l := range f.lines {
		if e := entry(l); e != nil {
			fn(e)
		}
	}
}

// find returns the fields of the entry called name, or nil.
func (f *AccountFile) Find(name string) []string {
	for _, l := range f.lines {
		if e := entry(l); e != nil && e[0] == name {
			return e
		}
	}
	return nil
}

// ids returns the numeric third field of every entry: uids in passwd,
// gids in group.
func (f *AccountFile) IDs() map[int]string {
	m := map[int]string{}
	f.each(func(e []string) {
		if len(e) > 2 {
			if id, err := strconv.Atoi(e[2]); err == nil {
				m[id] = e[0]
			}
		}
	})
	return m
}

func (f *AccountFile) Add(fields ...string) {
	f.lines = append(f.lines, strings.Join(fields, ":"))
}

// remove drops the entry called name and reports whether there was one.
func (f *AccountFile) Remove(name string) bool {
	n := len(f.lines)
	f.lines = slices.DeleteFunc(f.lines, func(l string) bool {
		e := entry(l)
		return e != nil && e[0] == name
	})
	return len(f.lines) != n
}

// dropMember removes user from the comma-separated member lists in the
// given fields of every entry (group: 3; gshadow: 2 admins, 3 members).
func (f *AccountFile) DropMember(user string, fieldIdx ...int) {
	for i, l := range f.lines {
		e := entry(l)
		if e == nil {
			continue
		}
		changed := false
		for _, fi := range fieldIdx {
			if fi >= len(e) || e[fi] == "" {
				continue
			}
			members := strings.Split(e[fi], ",")
			kept := slices.DeleteFunc(slices.Clone(members), func(m string) bool { return m == user })
			if len(kept) != len(members) {
				e[fi] = strings.Join(kept, ",")
				changed = true
			}
		}
		if changed {
			f.lines[i] = strings.Join(e, ":")
		}
	}
}

func (f *AccountFile) Bytes() []byte {
	var b bytes.Buffer
	for _, l := range f.lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
