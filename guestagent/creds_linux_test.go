//go:build linux

package guestagent

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/guestagent/account"
)

// threadStatus returns the Uid, Gid, Groups and CapEff lines of the
// calling thread.
func threadStatus() (map[string]string, error) {
	b, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for l := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(l, ":")
		if ok {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m, nil
}

// A thread running an agent's file operation keeps uid and gid 0 (real,
// effective and saved: what kill, tgkill and prlimit check), has the
// agent's file-system ids and groups and no effective capability.
func TestRunAsKeepsRootIDs(t *testing.T) {
	e := newTestEnv(t)
	a, err := e.svc.account("alice")
	if err != nil {
		t.Fatal(err)
	}
	st, err := account.RunAs(a, threadStatus)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Uid":    "0 0 0 2345",
		"Gid":    "0 0 0 2345",
		"CapEff": "0000000000000000",
	}
	for k, v := range want {
		if st[k] != v {
			t.Errorf("%s: %q, want %q", k, st[k], v)
		}
	}
	if !strings.Contains(" "+st["Groups"]+" ", " 3000 ") {
		t.Errorf("Groups: %q, want alice's devs (3000)", st["Groups"])
	}
	// The thread is gone afterwards: the caller's is untouched.
	if me, _ := threadStatus(); me["Uid"] != "0 0 0 0" || me["CapEff"] == "0000000000000000" {
		t.Errorf("the calling thread after runAs: %v", me)
	}
}

// With every effective capability gone, root's files are out of reach
// even though the thread's uid is 0.
func TestRunAsHasNoCapabilities(t *testing.T) {
	e := newTestEnv(t)
	a, _ := e.svc.account("alice")
	secret := filepath.Join(e.base, "root-only")
	writeFile(t, secret, "x", 0o600)
	_, err := account.RunAs(a, func() ([]byte, error) { return os.ReadFile(secret) })
	if !errors.Is(err, os.ErrPermission) {
		t.Errorf("alice reads a root 0600 file: %v, want permission denied", err)
	}
	err = runAs2(a, func() error { return os.Chown(filepath.Join(e.home("alice")), 0, 0) })
	if !errors.Is(err, os.ErrPermission) {
		t.Errorf("alice chowns her home to root: %v, want permission denied", err)
	}
}

func runAs2(a *account.Account, fn func() error) error {
	_, err := account.RunAs(a, func() (struct{}, error) { return struct{}{}, fn() })
	return err
}

// killAs makes kill(2)'s decision for an agent: its own processes yes,
// another user's or root's no, a vanished one ESRCH.
func TestKillAs(t *testing.T) {
	e := newTestEnv(t)
	alice, _ := e.svc.account("alice")
	start := func(uid int) *exec.Cmd {
		t.Helper()
		c := exec.Command("sleep", "300")
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}, Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	tests := []struct {
		name string
		uid  int
		want error
	}{
		{"her own", aliceUID, nil},
		{"bob's", bobUID, unix.EPERM},
		{"root's", 0, unix.EPERM},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := start(tc.uid)
			if err := account.KillAs(alice, c.Process.Pid, 0); err != tc.want {
				t.Errorf("killAs: %v, want %v", err, tc.want)
			}
			if err := account.KillGroupAs(alice, c.Process.Pid, 0); err != tc.want {
				t.Errorf("killGroupAs: %v, want %v", err, tc.want)
			}
		})
	}
	c := start(aliceUID)
	if err := account.KillAs(alice, c.Process.Pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if err := account.KillAs(alice, c.Process.Pid, 0); err != unix.ESRCH {
		t.Errorf("killAs on a reaped process: %v, want ESRCH", err)
	}
}
