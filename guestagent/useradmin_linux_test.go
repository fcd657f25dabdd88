//go:build linux

package guestagent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestUserAddCreatesAccountAndHome(t *testing.T) {
	e := newTestEnv(t)
	home := filepath.Join(e.base, "shares", "agents", "agent1")
	r, err := e.svc.UserAdd(bg, &agentproto.UserAddRequest{Name: "agent1", Home: home})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Created || r.UID != firstUID || r.GID != firstUID || r.Home != home {
		t.Fatalf("UserAdd = %+v", r)
	}
	for file, line := range map[string]string{
		e.db.Passwd:  "agent1:x:2000:2000::" + home + ":/bin/sh\n",
		e.db.Group:   "agent1:x:2000:\n",
		e.db.GShadow: "agent1:!::\n",
	} {
		if !strings.HasSuffix(readString(t, file), line) {
			t.Errorf("%s lacks %q:\n%s", file, line, readString(t, file))
		}
	}
	if sh := readString(t, e.db.Shadow); !strings.Contains(sh, "\nagent1:!:") {
		t.Errorf("shadow has no locked entry:\n%s", sh)
	}
	if !strings.Contains(readString(t, e.db.Passwd), "# a comment that must survive edits") {
		t.Error("comment lost")
	}
	if fi, _ := os.Stat(e.db.Shadow); fi.Mode().Perm() != 0o640 {
		t.Errorf("shadow mode changed to %v", fi.Mode())
	}
	fi, err := os.Stat(home)
	if err != nil || fi.Mode().Perm() != 0o700 || ownerOf(t, home) != firstUID {
		t.Fatalf("home %v owner %d, %v", fi.Mode(), ownerOf(t, home), err)
	}
	if parent := filepath.Dir(home); ownerOf(t, parent) != 0 {
		t.Errorf("home parent owned by %d, want root", ownerOf(t, parent))
	}
	// The new user works right away.
	if _, out, _ := e.run(t, agentproto.ExecRequest{Identity: agentproto.Identity{User: "agent1"}, Shell: "id -u; pwd"}); out != "2000\n"+home+"\n" {
		t.Fatalf("exec as new user: %q", out)
	}

	// Idempotent.
	again, err := e.svc.UserAdd(bg, &agentproto.UserAddRequest{Name: "agent1", Home: home})
	if err != nil || again.Created || again.UID != firstUID {
		t.Fatalf("second UserAdd = %+v, %v", again, err)
	}
	if n := strings.Count(readString(t, e.db.Passwd), "\nagent1:"); n != 1 {
		t.Fatalf("passwd has %d agent1 entries", n)
	}
	// The next user gets the next uid, and its own home mode and shell.
	r2, err := e.svc.UserAdd(bg, &agentproto.UserAddRequest{Name: "agent2", Home: filepath.Join(e.base, "agent2"), HomeMode: 0o750, Shell: "/bin/bash"})
	if err != nil || r2.UID != firstUID+1 {
		t.Fatalf("UserAdd agent2 = %+v, %v", r2, err)
	}
	if fi, _ := os.Stat(r2.Home); fi.Mode().Perm() != 0o750 {
		t.Errorf("home mode %v, want 0750", fi.Mode())
	}

	for _, tc := range []struct {
		req  agentproto.UserAddRequest
		want error
	}{
		{agentproto.UserAddRequest{Name: "agent1", Home: filepath.Join(e.base, "elsewhere")}, agentproto.ErrExists},
		{agentproto.UserAddRequest{Name: "Bad:Name", Home: home}, agentproto.ErrInvalid},
		{agentproto.UserAddRequest{Name: "agent3", Home: "relative"}, agentproto.ErrInvalid},
		{agentproto.UserAddRequest{Name: "agent3", Home: "/"}, agentproto.ErrInvalid},
		{agentproto.UserAddRequest{Name: "agent3", Home: e.db.Passwd}, agentproto.ErrExists},
	} {
		if _, err := e.svc.UserAdd(bg, &tc.req); !errors.Is(err, tc.want) {
			t.Errorf("UserAdd %+v: err = %v, want %v", tc.req, err, tc.want)
		}
	}
}

// A home that outlived the root disk keeps its owner's uid, so its files
// stay the user's after a reset.
func TestUserAddReusesHomeOwner(t *testing.T) {
	e := newTestEnv(t)
	home := filepath.Join(e.base, "home", "back")
	mustMkdir(t, home, 0o755, 3456)
	writeFile(t, filepath.Join(home, "work.txt"), "x", 0o644)
	os.Chown(filepath.Join(home, "work.txt"), 3456, 3456)
	r, err := e.svc.UserAdd(bg, &agentproto.UserAddRequest{Name: "back", Home: home})
	if err != nil || r.UID != 3456 || r.GID != 3456 || !r.Created {
		t.Fatalf("UserAdd = %+v, %v; want uid 3456", r, err)
	}
	if fi, _ := os.Stat(home); fi.Mode().Perm() != 0o700 {
		t.Errorf("home mode %v", fi.Mode())
	}

	// The owner's uid is taken by alice: the user gets a fresh uid, and
	// only files of an orphaned uid would be handed over, never alice's.
	taken := filepath.Join(e.base, "home", "taken")
	mustMkdir(t, taken, 0o755, aliceUID)
	writeFile(t, filepath.Join(taken, "alices"), "x", 0o644)
	os.Chown(filepath.Join(taken, "alices"), aliceUID, aliceUID)
	r, err = e.svc.UserAdd(bg, &agentproto.UserAddRequest{Name: "taken", Home: taken})
	if err != nil || r.UID != firstUID {
		t.Fatalf("UserAdd = %+v, %v; want fresh uid %d", r, err, firstUID)
	}
	if ownerOf(t, taken) != firstUID || ownerOf(t, filepath.Join(taken, "alices")) != aliceUID {
		t.Errorf("home owner %d, alice's file owner %d", ownerOf(t, taken), ownerOf(t, filepath.Join(taken, "alices")))
	}

	// Orphaned owner whose uid clashes with an existing group: fresh uid,
	// but the orphan's files are handed over.
	clash := filepath.Join(e.base, "home", "clash")
	mustMkdir(t, clash, 0o755, 3000) // gid 3000 is "devs"
	writeFile(t, filepath.Join(clash, "old"), "x", 0o644)
	os.Chown(filepath.Join(clash, "old"), 3000, 3000)
	r, err = e.svc.UserAdd(bg, &agentproto.UserAddRequest{Name: "clash", Home: clash})
	if err != nil || r.UID == 3000 {
		t.Fatalf("UserAdd = %+v, %v", r, err)
	}
	if got := ownerOf(t, filepath.Join(clash, "old")); got != r.UID {
		t.Errorf("orphaned file owner %d, want %d", got, r.UID)
	}
}

func TestUserDelKillsProcessesAndRemoves(t *testing.T) {
	e := newTestEnv(t)
	home := filepath.Join(e.base, "home", "gone")
	r, err := e.svc.UserAdd(bg, &agentproto.UserAddRequest{Name: "gone", Home: home})
	if err != nil {
		t.Fatal(err)
	}
	// Membership in another group must go too.
	g := readString(t, e.db.Group)
	writeFile(t, e.db.Group, strings.Replace(g, "devs:x:3000:alice,bob", "devs:x:3000:alice,gone,bob", 1), 0o644)

	bgp, err := e.svc.StartBackground(bg, &agentproto.StartBackgroundRequest{
		ExecRequest: agentproto.ExecRequest{Identity: agentproto.Identity{User: "gone"}, Shell: "sleep 100 & sleep 100"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.UserDel(bg, &agentproto.UserDelRequest{Name: "gone", RemoveHome: true}); err != nil {
		t.Fatal(err)
	}
	st, err := e.svc.Wait(bg, &agentproto.WaitRequest{Pid: bgp.Pid, TimeoutMillis: 10000})
	if err != nil || st.Signal != int(syscall.SIGKILL) {
		t.Fatalf("background process after UserDel: %+v, %v", st, err)
	}
	if pids, _ := processesOf("/proc", r.UID); len(pids) != 0 {
		t.Fatalf("processes of uid %d survive: %v", r.UID, pids)
	}
	for _, f := range []string{e.db.Passwd, e.db.Shadow, e.db.GShadow} {
		if strings.Contains(readString(t, f), "gone") {
			t.Errorf("%s still mentions gone:\n%s", f, readString(t, f))
		}
	}
	if g := readString(t, e.db.Group); strings.Contains(g, "gone") || !strings.Contains(g, "devs:x:3000:alice,bob\n") {
		t.Errorf("group file:\n%s", g)
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("home still there: %v", err)
	}
	if _, err := e.svc.UserDel(bg, &agentproto.UserDelRequest{Name: "gone"}); !errors.Is(err, agentproto.ErrNoSuchUser) {
		t.Errorf("second UserDel: err = %v, want ErrNoSuchUser", err)
	}
	if _, err := e.svc.UserDel(bg, &agentproto.UserDelRequest{Name: "root"}); !errors.Is(err, agentproto.ErrPermission) {
		t.Errorf("UserDel root: err = %v, want ErrPermission", err)
	}
	// alice keeps her home when RemoveHome is not set.
	if _, err := e.svc.UserDel(bg, &agentproto.UserDelRequest{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.home("alice")); err != nil {
		t.Errorf("alice's home removed: %v", err)
	}
	if _, err := e.svc.ReadFile(bg, &agentproto.ReadFileRequest{Identity: agentproto.Identity{User: "alice"}, Path: "/"}); !errors.Is(err, agentproto.ErrNoSuchUser) {
		t.Errorf("deleted user still usable: %v", err)
	}
}

// A uid fixed by the host is used as given, and refused when it belongs
// to another user or owns another home beside the new one; a home owned by
// another uid is taken over only on request, and never from a live user.
func TestUserAddFixedUID(t *testing.T) {
	e := newTestEnv(t)
	homes := filepath.Join(e.base, "agents")
	mustMkdir(t, homes, 0o755, 0)
	// A removed agent's kept home, owned by its uid 10000.
	old := filepath.Join(homes, "old")
	mustMkdir(t, old, 0o700, 10000)
	writeFile(t, filepath.Join(old, "secret"), "x", 0o600)
	os.Chown(filepath.Join(old, "secret"), 10000, 10000)

	cases := []struct {
		name string
		req  agentproto.UserAddRequest
		want error
	}{
		{"uid owning another home", agentproto.UserAddRequest{Name: "bob", Home: filepath.Join(homes, "bob"), UID: 10000}, agentproto.ErrExists},
		{"uid of another user", agentproto.UserAddRequest{Name: "bob", Home: filepath.Join(homes, "bob"), UID: aliceUID}, agentproto.ErrExists},
		{"uid out of range", agentproto.UserAddRequest{Name: "bob", Home: filepath.Join(homes, "bob"), UID: 70000}, agentproto.ErrInvalid},
		{"left-over home without adopt", agentproto.UserAddRequest{Name: "old", Home: old, UID: 10001}, agentproto.ErrExists},
	}
	for _, tc := range cases {
		if _, err := e.svc.UserAdd(bg, &tc.req); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if ownerOf(t, filepath.Join(old, "secret")) != 10000 {
		t.Fatal("a refused add changed the old home")
	}

	r, err := e.svc.UserAdd(bg, &agentproto.UserAddRequest{Name: "bob2", Home: filepath.Join(homes, "bob2"), UID: 10002})
	if err != nil || r.UID != 10002 || !r.Created {
		t.Fatalf("UserAdd = %+v, %v; want uid 10002", r, err)
	}
	// Adopting hands the orphaned files over.
	r, err = e.svc.UserAdd(bg, &agentproto.UserAddRequest{Name: "old", Home: old, UID: 10003, AdoptHome: true})
	if err != nil || r.UID != 10003 {
		t.Fatalf("adopt: %+v, %v", r, err)
	}
	if got := ownerOf(t, filepath.Join(old, "secret")); got != 10003 {
		t.Errorf("adopted file owner %d, want 10003", got)
	}
	// A home of a live user can't be adopted.
	live := filepath.Join(homes, "live")
	mustMkdir(t, live, 0o700, bobUID)
	if _, err := e.svc.UserAdd(bg, &agentproto.UserAddRequest{Name: "live", Home: live, UID: 10004, AdoptHome: true}); !errors.Is(err, agentproto.ErrPermission) {
		t.Errorf("adopting a live user's home: err = %v, want ErrPermission", err)
	}
	// The account files are recreated (a VM reset): the same uid comes
	// back from the host and the home is the user's without any chown.
	e.svc.UserDel(bg, &agentproto.UserDelRequest{Name: "bob2"})
	r, err = e.svc.UserAdd(bg, &agentproto.UserAddRequest{Name: "bob2", Home: filepath.Join(homes, "bob2"), UID: 10002})
	if err != nil || r.UID != 10002 {
		t.Fatalf("after reset: %+v, %v", r, err)
	}
	// An account whose uid differs from the host's is corrected.
	r, err = e.svc.UserAdd(bg, &agentproto.UserAddRequest{Name: "bob2", Home: filepath.Join(homes, "bob2"), UID: 10005, AdoptHome: true})
	if err != nil || r.UID != 10005 || ownerOf(t, filepath.Join(homes, "bob2")) != 10005 {
		t.Fatalf("uid change: %+v, %v", r, err)
	}
}

// A blocked user can't exec or write, its processes are killed, and the
// message says why; unblocking restores it.
func TestUserLimit(t *testing.T) {
	e := newTestEnv(t)
	if err := (func() error {
		_, err := e.svc.UserLimit(bg, &agentproto.UserLimitRequest{Name: "root", Blocked: true})
		return err
	})(); !errors.Is(err, agentproto.ErrInvalid) {
		t.Fatalf("blocking root: %v", err)
	}
	if _, err := e.svc.UserLimit(bg, &agentproto.UserLimitRequest{Name: "alice", Blocked: true, Reason: "over quota 1 GB"}); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.Exec(bg, &agentproto.ExecRequest{Identity: agentproto.Identity{User: "alice"}, Argv: []string{"true"}}, agentproto.ExecIO{})
	if !errors.Is(err, agentproto.ErrQuota) || !strings.Contains(err.Error(), "over quota 1 GB") {
		t.Fatalf("exec while blocked: %v", err)
	}
	_, err = e.svc.WriteFile(bg, &agentproto.WriteFileRequest{Identity: agentproto.Identity{User: "alice"}, Path: e.home("alice") + "/f"})
	if !errors.Is(err, agentproto.ErrQuota) {
		t.Fatalf("write while blocked: %v", err)
	}
	if _, err := e.svc.UserLimit(bg, &agentproto.UserLimitRequest{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.checkLimit("alice"); err != nil {
		t.Fatalf("after unblock: %v", err)
	}
}

// A user without a fixed uid (the diagnostics user) never gets a uid that
// owns another home beside its own.
func TestUserAddSkipsUIDsOwningHomes(t *testing.T) {
	e := newTestEnv(t)
	homes := filepath.Join(e.base, "agents")
	mustMkdir(t, homes, 0o755, 0)
	mustMkdir(t, filepath.Join(homes, "kept"), 0o700, firstUID)
	r, err := e.svc.UserAdd(bg, &agentproto.UserAddRequest{Name: "diag", Home: filepath.Join(homes, "diag")})
	if err != nil || r.UID == firstUID {
		t.Fatalf("UserAdd = %+v, %v; want a uid other than the kept home's %d", r, err, firstUID)
	}
}
