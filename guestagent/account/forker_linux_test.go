//go:build linux

package account

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/internal/testwait"
)

// threadSeccomp is the seccomp mode of thread tid (0: none, 2: filter).
func threadSeccomp(t *testing.T, tid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Seccomp line for thread %d", tid)
	return ""
}

// An agent's processes are forked by one prepared thread: the same thread
// from call to call, under the agents' filter, with the agent's umask and
// root's whole identity at every fork, even after a failed check; the
// caller's thread gets none of it, and the thread ends when the user's
// area goes.
func TestForkerIsPreparedOnceAndKeepsNothingBetweenCalls(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test changes thread credentials: run it as root (sudo go test ./guestagent/account/)")
	}
	a := &Account{Name: "forker-bob", UID: 4244, GID: 4345, Home: "/nonexistent", Groups: []int{4345}}
	t.Cleanup(func() { retireForkers(a.Name) })
	type seen struct {
		tid     int
		creds   threadCreds
		umask   int
		seccomp string
	}
	fork := func(check func() error) (seen, error) {
		var s seen
		_, err := ForkAsAgent(a, netns.None(), check, func() (int, error) {
			s.tid, s.creds = unix.Gettid(), readThreadCreds(t)
			s.umask = unix.Umask(0o077)
			s.seccomp = threadSeccomp(t, s.tid)
			return 1, nil
		})
		return s, err
	}
	first, err := fork(func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	// A failed check as the agent, then a fork: root's identity is back.
	errCheck := errors.New("no such directory")
	if _, err := fork(func() error { return errCheck }); !errors.Is(err, errCheck) {
		t.Fatalf("failed check: %v", err)
	}
	second, err := fork(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []seen{first, second} {
		if s.creds.fsuid != 0 || s.creds.fsgid != 0 || s.creds.effective == 0 || s.creds.effective != s.creds.permitted {
			t.Errorf("at the fork: %+v; want root's identity", s.creds)
		}
		if s.umask != agentUmask || s.seccomp != "2" {
			t.Errorf("forking thread: umask %#o, seccomp %s; want %#o and the filter (2)", s.umask, s.seccomp, agentUmask)
		}
	}
	if first.tid != second.tid {
		t.Errorf("forks ran on threads %d and %d; want one prepared thread", first.tid, second.tid)
	}
	if me := threadSeccomp(t, unix.Gettid()); me != "0" {
		t.Errorf("the caller's thread has seccomp mode %s; want none", me)
	}
	// The user's area goes: so does its thread.
	retireForkers(a.Name)
	testwait.Eventually(t, "the prepared thread to end", 10*time.Second, 10*time.Millisecond, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", first.tid))
		return errors.Is(err, os.ErrNotExist)
	})
	third, err := fork(nil)
	if err != nil {
		t.Fatal(err)
	}
	if third.tid == first.tid {
		t.Errorf("after the retirement the fork ran on the old thread %d", first.tid)
	}
}
