package account

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

func TestValidUserName(t *testing.T) {
	for name, want := range map[string]bool{
		"agent":                             true,
		"_svc":                              true,
		"a-b_c9":                            true,
		"":                                  false,
		"Agent":                             false,
		"9lives":                            false,
		"-dash":                             false,
		"has space":                         false,
		"colon:x":                           false,
		"a23456789012345678901234567890ab":  true,  // 32 characters
		"a234567890123456789012345678901ab": false, // 33
	} {
		if got := ValidUserName(name); got != want {
			t.Errorf("ValidUserName(%q) = %v, want %v", name, got, want)
		}
	}
}

// FuzzValidUserName checks the hand-written check against the pattern it
// stands for.
func FuzzValidUserName(f *testing.F) {
	re := regexp.MustCompile(UserNamePattern)
	for _, s := range []string{"agent", "_", "a-", "9", "A", "a\n", "a\x00", "é", "a23456789012345678901234567890ab"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := ValidUserName(name), re.MatchString(name); got != want {
			t.Fatalf("ValidUserName(%q) = %v, the pattern says %v", name, got, want)
		}
	})
}

func TestLookup(t *testing.T) {
	dir := t.TempDir()
	db := UserDB{Passwd: filepath.Join(dir, "passwd"), Group: filepath.Join(dir, "group")}
	os.WriteFile(db.Passwd, []byte("root:x:0:0::/root:/bin/ash\n+nis\n# x:x:1:1::/:/bin/sh\nagent:x:2001:2002:Agent:/home/agent:\nbroken:x:abc:1::/:/bin/sh\n"), 0o644)
	os.WriteFile(db.Group, []byte("root:x:0:\nagent:x:2002:\nwheel:x:10:root,agent\ndocker:x:999:other,agent\nempty:x:5:\n"), 0o644)
	a, err := db.Lookup("agent")
	if err != nil {
		t.Fatal(err)
	}
	want := Account{Name: "agent", UID: 2001, GID: 2002, Home: "/home/agent", Shell: "/bin/sh", Groups: []int{2002, 10, 999}}
	if a.Name != want.Name || a.UID != want.UID || a.GID != want.GID || a.Home != want.Home || a.Shell != want.Shell || !slices.Equal(a.Groups, want.Groups) {
		t.Fatalf("Lookup = %+v, want %+v", a, want)
	}
	if r, err := db.Lookup(""); err != nil || r.UID != 0 || r.Shell != "/bin/ash" {
		t.Fatalf("Lookup(\"\") = %+v, %v; want root", r, err)
	}
	for _, name := range []string{"nobody", "x", "+nis"} {
		if _, err := db.Lookup(name); !errors.Is(err, agentproto.ErrNoSuchUser) {
			t.Errorf("Lookup(%q): err = %v, want ErrNoSuchUser", name, err)
		}
	}
	if _, err := db.Lookup("broken"); !errors.Is(err, agentproto.ErrInvalid) {
		t.Errorf("broken entry: err = %v, want ErrInvalid", err)
	}
	// A root disk without a passwd file still has root.
	empty := UserDB{Passwd: filepath.Join(dir, "none"), Group: filepath.Join(dir, "none")}
	if r, err := empty.Lookup(""); err != nil || r.UID != 0 || r.Home != "/root" {
		t.Fatalf("Lookup root without passwd = %+v, %v", r, err)
	}
}

func TestAccountFileEditsKeepOtherLines(t *testing.T) {
	in := "# header\nroot:x:0:\n\ndevs:x:3000:alice,bob,carol\nbob:x:2346:\n"
	f := parseAccountFile([]byte(in))
	f.Add("new", "x", "2000", "")
	if !f.Remove("bob") || f.Remove("bob") {
		t.Fatal("remove should report exactly one removal")
	}
	f.DropMember("bob", 3)
	want := "# header\nroot:x:0:\n\ndevs:x:3000:alice,carol\nnew:x:2000:\n"
	if got := string(f.Bytes()); got != want {
		t.Fatalf("edited file:\n%s\nwant:\n%s", got, want)
	}
	if ids := f.IDs(); ids[3000] != "devs" || ids[2000] != "new" || len(ids) != 3 {
		t.Fatalf("ids = %v", ids)
	}
}

// Lookups are remembered, but never past a change of the files: a user
// removed (the file replaced by rename, as the agent writes it) no longer
// resolves, and a group added in place is seen.
func TestLookupSeesChangedFiles(t *testing.T) {
	dir := t.TempDir()
	db := UserDB{Passwd: filepath.Join(dir, "passwd"), Group: filepath.Join(dir, "group")}
	write := func(path, data string) {
		t.Helper()
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(db.Passwd, "root:x:0:0::/root:/bin/sh\nagent:x:2001:2001::/home/agent:/bin/sh\n")
	write(db.Group, "agent:x:2001:\n")
	for range 2 { // the second from memory
		a, err := db.Lookup("agent")
		if err != nil || a.UID != 2001 || !slices.Equal(a.Groups, []int{2001}) {
			t.Fatalf("Lookup = %+v, %v", a, err)
		}
		a.Groups[0] = 0 // a caller's change stays its own
	}
	// A member added in place (same file, new size).
	f, err := os.OpenFile(db.Group, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("wheel:x:10:agent\n")
	f.Close()
	if a, err := db.Lookup("agent"); err != nil || !slices.Equal(a.Groups, []int{2001, 10}) {
		t.Fatalf("after the group's change: Lookup = %+v, %v; want groups [2001 10]", a, err)
	}
	// The same size, by rename: the user is gone.
	write(db.Passwd, "root:x:0:0::/root:/bin/sh\nagenx:x:2001:2001::/home/agent:/bin/sh\n")
	if a, err := db.Lookup("agent"); !errors.Is(err, agentproto.ErrNoSuchUser) {
		t.Fatalf("after the user's removal: Lookup = %+v, %v; want ErrNoSuchUser", a, err)
	}
}
