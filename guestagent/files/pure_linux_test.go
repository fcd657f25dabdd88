//go:build linux

package files

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// These tests need no root: they cover the path and line logic the file
// operations run after switching credentials.

// A request path resolves in the home when unconfined, and beneath the
// root, never outside it, when confined.
func TestSpaceName(t *testing.T) {
	for _, tc := range []struct {
		root, path, want string
		escape           bool
	}{
		{"", "", "/home/a", false},
		{"", "x/y", "/home/a/x/y", false},
		{"", "/etc/../etc/passwd", "/etc/passwd", false},
		{"/r", "", ".", false},
		{"/r", "x/y", "x/y", false},
		{"/r", "/r", ".", false},
		{"/r", "/r/", ".", false},
		{"/r", "/r/a/../b", "b", false},
		{"/r", "/etc/passwd", "", true},
		{"/r", "/rx/secret", "", true}, // a sibling sharing the prefix
		{"/r", "/r/../etc", "", true},
		{"/", "/etc/passwd", "etc/passwd", false},
		{"/", "/", ".", false},
	} {
		sp := &space{root: tc.root, home: "/home/a"}
		got, err := sp.name(tc.path)
		if tc.escape {
			if !errors.Is(err, agentproto.ErrEscape) {
				t.Errorf("root %q path %q: %q, %v; want ErrEscape", tc.root, tc.path, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("root %q path %q: %q, %v; want %q", tc.root, tc.path, got, err, tc.want)
		}
	}
}

// readLines picks start/count and tail selections, counts a last line
// without a newline, and cuts at the byte limit from the right end.
func TestReadLinesSelections(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("one\ntwo\nthree\nfour"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		req       agentproto.ReadFileRequest
		limit     int64
		want      string
		truncated bool
	}{
		{"from line 2", agentproto.ReadFileRequest{StartLine: 2}, 100, "two\nthree\nfour", false},
		{"two lines", agentproto.ReadFileRequest{StartLine: 2, LineCount: 2}, 100, "two\nthree\n", false},
		{"past the end", agentproto.ReadFileRequest{StartLine: 9}, 100, "", false},
		{"tail 2", agentproto.ReadFileRequest{TailLines: 2}, 100, "three\nfour", false},
		{"tail more than all", agentproto.ReadFileRequest{TailLines: 10}, 100, "one\ntwo\nthree\nfour", false},
		{"limit cuts a span", agentproto.ReadFileRequest{StartLine: 1, LineCount: 2}, 5, "one\nt", true},
		{"limit keeps a tail's end", agentproto.ReadFileRequest{TailLines: 2}, 6, "e\nfour", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var resp agentproto.ReadFileResponse
			if err := readLines(context.Background(), f, &tc.req, tc.limit, &resp); err != nil {
				t.Fatal(err)
			}
			if string(resp.Data) != tc.want || resp.Truncated != tc.truncated || resp.TotalLines != 4 {
				t.Errorf("got %q truncated=%v total=%d; want %q truncated=%v total=4", resp.Data, resp.Truncated, resp.TotalLines, tc.want, tc.truncated)
			}
		})
	}
}

// readLines agrees with a plain split of the file for files that cross
// its 64 KiB blocks, empty lines, a last line with and without a newline,
// and limits that cut the span.
func TestReadLinesAgreesWithSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	for i := range 60 {
		var b strings.Builder
		for range rng.IntN(40000) {
			b.WriteString(strings.Repeat("x", rng.IntN(12)))
			b.WriteByte('\n')
		}
		if rng.IntN(2) == 0 {
			b.WriteString("last")
		}
		content := b.String()
		lines := strings.SplitAfter(content, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		p := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		pick := func() int { return rng.IntN(len(lines) + 3) }
		limit := int64(len(content) + 1)
		if rng.IntN(3) == 0 {
			limit = int64(rng.IntN(len(content)+2) + 1)
		}
		reqs := []agentproto.ReadFileRequest{
			{StartLine: pick()}, {StartLine: pick(), LineCount: pick()}, {TailLines: pick() + 1}, {TailLines: 1 << 53},
		}
		for _, req := range reqs {
			var want string
			if req.TailLines > 0 {
				want = strings.Join(lines[len(lines)-min(req.TailLines, len(lines)):], "")
			} else if first := max(req.StartLine, 1); first <= len(lines) {
				last := len(lines)
				if req.LineCount > 0 {
					last = min(first-1+req.LineCount, last)
				}
				want = strings.Join(lines[first-1:last], "")
			}
			truncated := int64(len(want)) > limit
			if truncated && req.TailLines > 0 {
				want = want[int64(len(want))-limit:]
			} else if truncated {
				want = want[:limit]
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			var resp agentproto.ReadFileResponse
			err = readLines(context.Background(), f, &req, limit, &resp)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			if string(resp.Data) != want || resp.Truncated != truncated || resp.TotalLines != len(lines) {
				t.Fatalf("file %d (%d bytes, %d lines) %+v limit %d: got %d bytes truncated=%v total=%d; want %d bytes truncated=%v",
					i, len(content), len(lines), req, limit, len(resp.Data), resp.Truncated, resp.TotalLines, len(want), truncated)
			}
		}
	}
}

// A file longer than the line-scan limit is refused with the limit named.
func TestReadLinesScanLimit(t *testing.T) {
	withLimits(t, 8, listScanLimit, scanTimeLimit)
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(strings.Repeat("line\n", 4)), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var resp agentproto.ReadFileResponse
	err = readLines(context.Background(), f, &agentproto.ReadFileRequest{Path: p, StartLine: 1}, 100, &resp)
	if !errors.Is(err, agentproto.ErrTooLarge) || !strings.Contains(err.Error(), "line-scan limit") {
		t.Errorf("got %v, want ErrTooLarge naming the line-scan limit", err)
	}
}

// The scan time limit reads as ErrTimeout naming it; a caller's own
// cancellation stays a cancellation.
func TestScanErr(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errScanTime)
	if err := scanErr(ctx, "the scan", "do less"); !errors.Is(err, agentproto.ErrTimeout) || !strings.Contains(err.Error(), "scan time limit") {
		t.Errorf("scan limit: %v", err)
	}
	ctx, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := scanErr(ctx, "the scan", "do less"); !errors.Is(err, context.Canceled) || errors.Is(err, agentproto.ErrTimeout) {
		t.Errorf("caller cancel: %v", err)
	}
}

// Wire modes keep their special bits both ways.
func TestModeRoundTrip(t *testing.T) {
	for _, m := range []uint32{0, 0o644, 0o755, 0o4755, 0o2750, 0o1777, 0o7777} {
		if got := unixMode(fileMode(m)); got != m {
			t.Errorf("%o -> %v -> %o", m, fileMode(m), got)
		}
	}
}
