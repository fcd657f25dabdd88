//go:build linux

package files

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

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
