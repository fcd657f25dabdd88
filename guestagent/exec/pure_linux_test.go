//go:build linux

package exec

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"golang.org/x/sys/unix"
)

// These tests need no root: they cover the request checks that run before
// a process starts.

func TestCommandArgv(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  agentproto.ExecRequest
		want []string // nil: ErrInvalid
	}{
		{"argv", agentproto.ExecRequest{Argv: []string{"ls", "-l"}}, []string{"ls", "-l"}},
		{"shell", agentproto.ExecRequest{Shell: "echo hi; id"}, []string{"/bin/sh", "-c", "echo hi; id"}},
		{"both", agentproto.ExecRequest{Argv: []string{"ls"}, Shell: "id"}, nil},
		{"neither", agentproto.ExecRequest{}, nil},
		{"empty program", agentproto.ExecRequest{Argv: []string{"", "x"}}, nil},
	} {
		got, err := commandArgv(&tc.req)
		if tc.want == nil {
			if !errors.Is(err, agentproto.ErrInvalid) {
				t.Errorf("%s: %q, %v; want ErrInvalid", tc.name, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// The environment starts clean for the user, later entries win, and an
// entry that is not KEY=VALUE is refused by name.
func TestBuildEnv(t *testing.T) {
	a := &account.Account{Name: "agent-x", Home: "/home/agent-x", Shell: "/bin/bash"}
	env, err := buildEnv(a, []string{"FOO=1", "HOME=/elsewhere", "FOO=2", "EMPTY="})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=" + BasePath, "HOME=/elsewhere", "USER=agent-x", "LOGNAME=agent-x", "SHELL=/bin/bash", "LANG=C.UTF-8", "FOO=2", "EMPTY="}
	if !slices.Equal(env, want) {
		t.Errorf("env %q\nwant %q", env, want)
	}
	if got := envValue(env, "FOO"); got != "2" {
		t.Errorf("envValue FOO = %q", got)
	}
	if got := envValue(env, "FO"); got != "" {
		t.Errorf("envValue FO = %q, want none (a prefix of a key is not the key)", got)
	}
	for _, bad := range []string{"NOEQUALS", "=value", "K=a\x00b"} {
		if _, err := buildEnv(a, []string{bad}); !errors.Is(err, agentproto.ErrInvalid) {
			t.Errorf("entry %q: %v, want ErrInvalid", bad, err)
		}
	}
}

// lookPath searches the process's PATH (relative entries from the working
// directory), takes a name with a slash as a path, and tells a missing
// program from one that is not executable.
func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"tool": 0o755, "data": 0o644} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(bin, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file, path, want string
		err              error
	}{
		{"tool", "/nonexistent:" + bin, filepath.Join(bin, "tool"), nil},
		{"tool", "bin", filepath.Join(bin, "tool"), nil},  // relative to dir
		{"bin/tool", "", filepath.Join(bin, "tool"), nil}, // a path, not searched
		{filepath.Join(bin, "tool"), "", filepath.Join(bin, "tool"), nil},
		{"data", bin, "", agentproto.ErrNotFound},      // skipped in the search
		{"bin/data", "", "", agentproto.ErrPermission}, // named: not executable
		{"bin/sub", "", "", agentproto.ErrPermission},  // a directory
		{"bin/missing", "", "", agentproto.ErrNotFound},
		{"missing", bin, "", agentproto.ErrNotFound},
	} {
		got, err := lookPath(tc.file, tc.path, dir)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("lookPath(%q, %q): %q, %v; want %v", tc.file, tc.path, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("lookPath(%q, %q): %q, %v; want %q", tc.file, tc.path, got, err, tc.want)
		}
	}
}

// A signal death reads as 128+signal, as a shell reports it.
func TestExitStatus(t *testing.T) {
	if st := exitStatus(unix.WaitStatus(3 << 8)); !st.Exited || st.Code != 3 || st.Signal != 0 {
		t.Errorf("exit 3: %+v", st)
	}
	if st := exitStatus(unix.WaitStatus(unix.SIGKILL)); st.Code != 137 || st.Signal != int(unix.SIGKILL) {
		t.Errorf("SIGKILL: %+v", st)
	}
}

// The table keeps at most maxFinished statuses, dropping the oldest, and
// never drops a newer process that reused an old pid.
func TestBgTableBounded(t *testing.T) {
	tb := bgTable{procs: map[int]*bgProc{}}
	newProc := func(pid int) *bgProc { return &bgProc{pid: pid, done: make(chan struct{})} }
	first := newProc(1)
	tb.add(first)
	reused := newProc(2)
	tb.add(reused)
	tb.finish(first, agentproto.ExitStatus{Exited: true, Code: 7})
	if p := tb.get(1); p == nil || p.status.Code != 7 {
		t.Fatalf("finished process not kept: %+v", p)
	}
	// pid 2 finishes, then a new process reuses pid 2 before it is dropped.
	tb.finish(reused, agentproto.ExitStatus{Exited: true})
	again := newProc(2)
	tb.add(again)
	for pid := 3; pid < 3+maxFinished; pid++ {
		p := newProc(pid)
		tb.add(p)
		tb.finish(p, agentproto.ExitStatus{Exited: true})
	}
	if tb.get(1) != nil {
		t.Error("the oldest status was kept past maxFinished")
	}
	if tb.get(2) != again {
		t.Error("dropping an old status removed the process that reused its pid")
	}
	if n := len(tb.finished); n != maxFinished {
		t.Errorf("%d statuses kept, want %d", n, maxFinished)
	}
}
