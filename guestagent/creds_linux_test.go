//go:build linux

package guestagent

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/agentproto"
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

func withLimits(t *testing.T, lines int64, entries int, d time.Duration) {
	t.Helper()
	ol, oe, od := lineScanLimit, listScanLimit, scanTimeLimit
	lineScanLimit, listScanLimit, scanTimeLimit = lines, entries, d
	t.Cleanup(func() { lineScanLimit, listScanLimit, scanTimeLimit = ol, oe, od })
}

// A line selection reads at most lineScanLimit bytes and ends with the
// call: a file of holes can't keep PID 1 busy.
func TestReadLinesBounded(t *testing.T) {
	e := newTestEnv(t)
	alice := agentproto.Identity{User: "alice"}
	sparse := filepath.Join(e.home("alice"), "sparse")
	if err := os.WriteFile(sparse, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(sparse, aliceUID, aliceUID)
	if err := os.Truncate(sparse, 4<<20); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		lines   int64
		d       time.Duration
		ctx     func() context.Context
		want    error
		message string
	}{
		{name: "over the byte limit", lines: 1 << 20, d: time.Minute, want: agentproto.ErrTooLarge, message: "line-scan limit"},
		{name: "over the time limit", lines: 8 << 20, d: time.Nanosecond, want: agentproto.ErrTimeout, message: "scan time limit"},
		{name: "call cancelled", lines: 8 << 20, d: time.Minute, want: context.Canceled, ctx: func() context.Context {
			ctx, cancel := context.WithCancel(bg)
			cancel()
			return ctx
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			withLimits(t, tc.lines, listScanLimit, tc.d)
			ctx := bg
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			for _, req := range []agentproto.ReadFileRequest{{TailLines: 3}, {StartLine: 2}, {LineCount: 1}} {
				req.Identity, req.Path = alice, "sparse"
				_, err := e.svc.ReadFile(ctx, &req)
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.message) {
					t.Errorf("%+v: err = %v, want %v naming %q", req, err, tc.want, tc.message)
				}
			}
		})
	}
	// Bytes need no scan: the start of the same file reads fine.
	withLimits(t, 1<<20, listScanLimit, time.Minute)
	if r, err := e.svc.ReadFile(bg, &agentproto.ReadFileRequest{Identity: alice, Path: "sparse", Length: 10}); err != nil || len(r.Data) != 10 {
		t.Errorf("byte read of the sparse file: %v, %v", r, err)
	}
}

// PID 1 reads regular files only: a device may never end or answer.
func TestReadFileRefusesDevices(t *testing.T) {
	e := newTestEnv(t)
	for _, p := range []string{"/dev/zero", "/dev/null"} {
		_, err := e.svc.ReadFile(bg, &agentproto.ReadFileRequest{Identity: agentproto.Identity{User: "alice"}, Path: p, TailLines: 1})
		if !errors.Is(err, agentproto.ErrInvalid) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s: err = %v, want ErrInvalid (not a regular file)", p, err)
		}
	}
}

// A listing reads at most listScanLimit entries, counted across every
// directory it enters, and ends with the call.
func TestListBounded(t *testing.T) {
	e := newTestEnv(t)
	dir := filepath.Join(e.home("alice"), "many")
	mustMkdir(t, dir, 0o755, aliceUID)
	for _, sub := range []string{"a", "b"} {
		mustMkdir(t, filepath.Join(dir, sub), 0o755, aliceUID)
		for i := range 30 {
			writeFile(t, filepath.Join(dir, sub, strings.Repeat("f", i+1)), "", 0o644)
		}
	}
	alice := agentproto.Identity{User: "alice"}
	withLimits(t, lineScanLimit, 50, time.Minute)
	_, err := e.svc.List(bg, &agentproto.ListRequest{Identity: alice, Path: "many", MaxDepth: 3, MaxEntries: 1000})
	if !errors.Is(err, agentproto.ErrTooLarge) || !strings.Contains(err.Error(), "list-scan limit") {
		t.Errorf("listing 62 entries with a limit of 50: err = %v, want ErrTooLarge naming the list-scan limit", err)
	}
	withLimits(t, lineScanLimit, 100, time.Minute)
	if r, err := e.svc.List(bg, &agentproto.ListRequest{Identity: alice, Path: "many", MaxDepth: 3}); err != nil || len(r.Entries) != 62 {
		t.Errorf("listing under the limit: %v entries, %v", r, err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := e.svc.List(ctx, &agentproto.ListRequest{Identity: alice, Path: "many", MaxDepth: 3}); !errors.Is(err, context.Canceled) {
		t.Errorf("listing in a cancelled call: err = %v, want context.Canceled", err)
	}
}
