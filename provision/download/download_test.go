package download

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func payload(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1, 2, 3})
	r.Read(b)
	return b
}

// rangeLog records the Range header of every request a server sees.
type rangeLog struct {
	mu     sync.Mutex
	ranges []string
}

func (l *rangeLog) add(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ranges = append(l.ranges, r.Header.Get("Range"))
}

func (l *rangeLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ranges)
}

// serve is a well-behaved file server (Range and 416 via ServeContent).
func serve(t *testing.T, data []byte) (*httptest.Server, *rangeLog) {
	t.Helper()
	log := &rangeLog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(r)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return srv, log
}

func assertFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes, sha256 %s; want %d bytes, %s", path, len(got), digest(got), len(want), digest(want))
	}
}

func assertAbsent(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (err %v), want absent", p, err)
		}
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestFetchVerifiesAndInstalls(t *testing.T) {
	data := payload(300 << 10)
	srv, _ := serve(t, data)
	dir := t.TempDir()
	dest := filepath.Join(dir, "sub", "rootfs.img")
	var c Client
	sum, err := c.Fetch(context.Background(), Request{URL: srv.URL + "/rootfs.img", SHA256: strings.ToUpper(digest(data)), Dest: dest}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum != digest(data) {
		t.Fatalf("sum = %s, want %s", sum, digest(data))
	}
	assertFile(t, dest, data)
	if names := dirNames(t, filepath.Dir(dest)); !slices.Equal(names, []string{"rootfs.img"}) {
		t.Fatalf("dir holds %v, want only rootfs.img", names)
	}
}

func TestCacheHitWorksOffline(t *testing.T) {
	data := payload(100 << 10)
	srv, log := serve(t, data)
	dest := filepath.Join(t.TempDir(), "vmlinuz")
	req := Request{URL: srv.URL + "/vmlinuz", SHA256: digest(data), Dest: dest, Phase: "kernel"}
	var c Client
	if _, err := c.Fetch(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	var events []Progress
	sum, err := c.Fetch(context.Background(), req, func(p Progress) { events = append(events, p) })
	if err != nil {
		t.Fatalf("cache hit with server down: %v", err)
	}
	if sum != digest(data) {
		t.Fatalf("sum = %s", sum)
	}
	if n := len(log.get()); n != 1 {
		t.Fatalf("server saw %d requests, want 1", n)
	}
	want := []Progress{{Phase: "kernel", Done: int64(len(data)), Total: int64(len(data))}}
	if !slices.Equal(events, want) {
		t.Fatalf("events = %v, want %v", events, want)
	}
	assertFile(t, dest, data)
}

func TestStaleDestIsReplaced(t *testing.T) {
	data := payload(50 << 10)
	srv, log := serve(t, data)
	dest := filepath.Join(t.TempDir(), "vmlinuz")
	if err := os.WriteFile(dest, []byte("old kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c Client
	if _, err := c.Fetch(context.Background(), Request{URL: srv.URL, SHA256: digest(data), Dest: dest}, nil); err != nil {
		t.Fatal(err)
	}
	assertFile(t, dest, data)
	if n := len(log.get()); n != 1 {
		t.Fatalf("server saw %d requests, want 1", n)
	}
}

func TestChecksumMismatch(t *testing.T) {
	data := payload(200 << 10)
	srv, _ := serve(t, data)
	wrong := digest([]byte("something else"))
	for _, tc := range []struct {
		name  string
		stale []byte // pre-existing Dest content
	}{
		{"no dest", nil},
		{"stale dest", []byte("stale")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dest := filepath.Join(dir, "rootfs.tar.xz")
			if tc.stale != nil {
				if err := os.WriteFile(dest, tc.stale, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			u := srv.URL + "/rootfs.tar.xz"
			var c Client
			_, err := c.Fetch(context.Background(), Request{URL: u, SHA256: wrong, Dest: dest}, nil)
			if !errors.Is(err, ErrChecksumMismatch) {
				t.Fatalf("err = %v, want ErrChecksumMismatch", err)
			}
			var ce *ChecksumError
			if !errors.As(err, &ce) || ce.Resumed {
				t.Fatalf("err = %#v, want a non-resumed *ChecksumError", err)
			}
			for _, s := range []string{u, wrong, digest(data)} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("message %q does not name %s", err, s)
				}
			}
			assertAbsent(t, dest, dest+PartialSuffix)
			if names := dirNames(t, dir); len(names) != 0 {
				t.Fatalf("left behind: %v", names)
			}
		})
	}
}

// cutServer sends the first half of data on a plain GET and then drops
// the connection; Range requests are served properly.
func cutServer(t *testing.T, data []byte) (*httptest.Server, *rangeLog) {
	t.Helper()
	log := &rangeLog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(r)
		if r.Header.Get("Range") != "" {
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusOK)
		w.Write(data[:len(data)/2])
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	return srv, log
}

func TestResumeAfterConnectionCut(t *testing.T) {
	data := payload(1<<20 + 777)
	srv, log := cutServer(t, data)
	dest := filepath.Join(t.TempDir(), "rootfs.img")
	req := Request{URL: srv.URL + "/rootfs.img", SHA256: digest(data), Dest: dest, Phase: "rootfs"}
	var c Client

	_, err := c.Fetch(context.Background(), req, nil)
	if err == nil || errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("cut transfer: err = %v, want a transfer error", err)
	}
	assertAbsent(t, dest)
	fi, err := os.Stat(dest + PartialSuffix)
	if err != nil {
		t.Fatalf("no partial after cut: %v", err)
	}
	n := fi.Size()
	if n == 0 || n > int64(len(data)/2) {
		t.Fatalf("partial holds %d bytes, want 1..%d", n, len(data)/2)
	}

	var events []Progress
	sum, err := c.Fetch(context.Background(), req, func(p Progress) { events = append(events, p) })
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if sum != digest(data) {
		t.Fatalf("sum = %s", sum)
	}
	assertFile(t, dest, data)
	assertAbsent(t, dest+PartialSuffix)
	if got, want := log.get(), []string{"", fmt.Sprintf("bytes=%d-", n)}; !slices.Equal(got, want) {
		t.Fatalf("server saw Range %q, want %q", got, want)
	}
	if events[0].Done != n || events[0].Total != int64(len(data)) {
		t.Fatalf("first event after resume = %+v, want Done %d Total %d", events[0], n, len(data))
	}
}

func TestServerIgnoringRangeRestarts(t *testing.T) {
	data := payload(500 << 10)
	log := &rangeLog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(r)
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data) // always 200, whole body
	}))
	defer srv.Close()
	dest := filepath.Join(t.TempDir(), "f")
	// Bytes that would corrupt the result if they were kept.
	if err := os.WriteFile(dest+PartialSuffix, bytes.Repeat([]byte{0xff}, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	var c Client
	if _, err := c.Fetch(context.Background(), Request{URL: srv.URL, SHA256: digest(data), Dest: dest}, nil); err != nil {
		t.Fatal(err)
	}
	assertFile(t, dest, data)
	if got := log.get(); !slices.Equal(got, []string{"bytes=1000-"}) {
		t.Fatalf("server saw Range %q", got)
	}
}

func TestRangeNotSatisfiable(t *testing.T) {
	data := payload(64 << 10)
	for _, tc := range []struct {
		name    string
		partial []byte
		ranges  []string
	}{
		// The earlier run got every byte but stopped before the rename.
		{"partial complete", data, []string{fmt.Sprintf("bytes=%d-", len(data))}},
		// The partial is longer than the file: start over.
		{"partial too long", append(slices.Clone(data), "junk"...), []string{fmt.Sprintf("bytes=%d-", len(data)+4), ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, log := serve(t, data)
			dest := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(dest+PartialSuffix, tc.partial, 0o644); err != nil {
				t.Fatal(err)
			}
			var c Client
			if _, err := c.Fetch(context.Background(), Request{URL: srv.URL, SHA256: digest(data), Dest: dest}, nil); err != nil {
				t.Fatal(err)
			}
			assertFile(t, dest, data)
			assertAbsent(t, dest+PartialSuffix)
			if got := log.get(); !slices.Equal(got, tc.ranges) {
				t.Fatalf("server saw Range %q, want %q", got, tc.ranges)
			}
		})
	}
}

func TestResumedMismatchDeletesPartialThenRetrySucceeds(t *testing.T) {
	data := payload(256 << 10)
	srv, log := serve(t, data)
	dest := filepath.Join(t.TempDir(), "f")
	// A partial whose bytes are not the file's (corrupt, or an older file).
	bad := slices.Clone(data[:1000])
	bad[0] ^= 1
	if err := os.WriteFile(dest+PartialSuffix, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	req := Request{URL: srv.URL, SHA256: digest(data), Dest: dest}
	var c Client
	_, err := c.Fetch(context.Background(), req, nil)
	var ce *ChecksumError
	if !errors.As(err, &ce) || !ce.Resumed {
		t.Fatalf("err = %v, want a resumed *ChecksumError", err)
	}
	assertAbsent(t, dest, dest+PartialSuffix)

	if _, err := c.Fetch(context.Background(), req, nil); err != nil {
		t.Fatalf("retry from scratch: %v", err)
	}
	assertFile(t, dest, data)
	if got := log.get(); !slices.Equal(got, []string{"bytes=1000-", ""}) {
		t.Fatalf("server saw Range %q", got)
	}
}

// blockingServer sends head and then holds the connection open without
// sending more until the client goes away.
func blockingServer(t *testing.T, head []byte, total int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(total))
		w.Write(head)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestCancelLeavesOnlyPartial(t *testing.T) {
	head := payload(2 << 20)
	srv := blockingServer(t, head, 8<<20)
	dir := t.TempDir()
	dest := filepath.Join(dir, "rootfs.img")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var c Client
	_, err := c.Fetch(ctx, Request{URL: srv.URL, SHA256: digest(head), Dest: dest}, func(p Progress) {
		if p.Done > 0 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"rootfs.img.partial"}) {
		t.Fatalf("dir holds %v, want only the partial", names)
	}
	got, _ := os.ReadFile(dest + PartialSuffix)
	if len(got) == 0 || !bytes.Equal(got, head[:len(got)]) {
		t.Fatalf("partial holds %d bytes that are not a prefix of the body", len(got))
	}
}

func TestStallIsDetected(t *testing.T) {
	head := payload(64 << 10)
	srv := blockingServer(t, head, 1<<20)
	dest := filepath.Join(t.TempDir(), "f")
	c := Client{StallTimeout: 200 * time.Millisecond}
	_, err := c.Fetch(context.Background(), Request{URL: srv.URL, SHA256: digest(head), Dest: dest}, nil)
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("err = %v, want ErrStalled", err)
	}
	assertAbsent(t, dest)
	if fi, err := os.Stat(dest + PartialSuffix); err != nil || fi.Size() != int64(len(head)) {
		t.Fatalf("partial: %v, %v; want %d bytes kept for resume", fi, err, len(head))
	}
}

func TestProgressIsMonotonicAndEndsAtTotal(t *testing.T) {
	data := payload(4<<20 + 123)
	srv, _ := serve(t, data)
	dest := filepath.Join(t.TempDir(), "f")
	var events []Progress
	var c Client
	_, err := c.Fetch(context.Background(), Request{URL: srv.URL, SHA256: digest(data), Dest: dest, Phase: "rootfs"},
		func(p Progress) { events = append(events, p) })
	if err != nil {
		t.Fatal(err)
	}
	total := int64(len(data))
	// Start, at least one per MiB, end.
	if len(events) < 5 {
		t.Fatalf("only %d events: %v", len(events), events)
	}
	if events[0].Done != 0 {
		t.Fatalf("first event %+v, want Done 0", events[0])
	}
	for i, ev := range events {
		if ev.Phase != "rootfs" || ev.Total != total {
			t.Fatalf("event %d = %+v, want phase rootfs, total %d", i, ev, total)
		}
		if i > 0 && ev.Done < events[i-1].Done {
			t.Fatalf("event %d goes back: %v then %v", i, events[i-1], ev)
		}
	}
	if last := events[len(events)-1]; last.Done != total {
		t.Fatalf("last event %+v, want Done %d", last, total)
	}
}

func TestUnknownLengthReportsTotalAtEnd(t *testing.T) {
	data := payload(300 << 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(data[:1000])
		w.(http.Flusher).Flush() // chunked: no Content-Length
		w.Write(data[1000:])
	}))
	defer srv.Close()
	var events []Progress
	var c Client
	_, err := c.Fetch(context.Background(), Request{URL: srv.URL, SHA256: digest(data), Dest: filepath.Join(t.TempDir(), "f")},
		func(p Progress) { events = append(events, p) })
	if err != nil {
		t.Fatal(err)
	}
	if events[0].Total != -1 {
		t.Fatalf("first event %+v, want Total -1", events[0])
	}
	if last := events[len(events)-1]; last.Done != int64(len(data)) || last.Total != int64(len(data)) {
		t.Fatalf("last event %+v", last)
	}
}

func fileURL(p string) string { return (&url.URL{Scheme: "file", Path: filepath.ToSlash(p)}).String() }

func TestFileURL(t *testing.T) {
	data := payload(123 << 10)
	src := filepath.Join(t.TempDir(), "my kernel")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var c Client
	for _, tc := range []struct {
		name    string
		sha     string
		partial []byte
		wantErr error
	}{
		{"copy", digest(data), nil, nil},
		{"resume", digest(data), data[:5000], nil},
		{"partial too long", digest(data), append(slices.Clone(data), 1), nil},
		{"mismatch", digest(nil), nil, ErrChecksumMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "vmlinuz")
			if tc.partial != nil {
				if err := os.WriteFile(dest+PartialSuffix, tc.partial, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := c.Fetch(context.Background(), Request{URL: fileURL(src), SHA256: tc.sha, Dest: dest}, nil)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				assertAbsent(t, dest, dest+PartialSuffix)
				return
			}
			assertFile(t, dest, data)
			assertAbsent(t, dest+PartialSuffix)
		})
	}
}

func TestBadStatusIsReported(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	dir := t.TempDir()
	u := srv.URL + "/missing.img"
	var c Client
	_, err := c.Fetch(context.Background(), Request{URL: u, SHA256: digest(nil), Dest: filepath.Join(dir, "f")}, nil)
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusNotFound {
		t.Fatalf("err = %v, want a 404 *StatusError", err)
	}
	if !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), u) {
		t.Fatalf("message %q lacks the status or URL", err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("left behind: %v", names)
	}
}

func TestInvalidRequests(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "f")
	var c Client
	for _, req := range []Request{
		{URL: "http://127.0.0.1:1/x", SHA256: "abc", Dest: dest},
		{URL: "ftp://example.invalid/x", SHA256: digest(nil), Dest: dest},
		{URL: "file://otherhost/x", SHA256: digest(nil), Dest: dest},
		{URL: "", SHA256: digest(nil), Dest: dest},
		{URL: "http://127.0.0.1:1/x", SHA256: digest(nil)},
	} {
		if _, err := c.Fetch(context.Background(), req, nil); err == nil {
			t.Errorf("Fetch(%+v) succeeded", req)
		}
	}
	assertAbsent(t, dest, dest+PartialSuffix)
}

func TestUnpinnedFetchLearnsDigestAndIgnoresPartial(t *testing.T) {
	data := payload(100 << 10)
	srv, log := serve(t, data)
	dest := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(dest+PartialSuffix, []byte("unverifiable"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c Client
	sum, err := c.Fetch(context.Background(), Request{URL: srv.URL, Dest: dest}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum != digest(data) {
		t.Fatalf("sum = %s, want %s", sum, digest(data))
	}
	assertFile(t, dest, data)
	if got := log.get(); !slices.Equal(got, []string{""}) {
		t.Fatalf("server saw Range %q, want one plain GET", got)
	}
}

func TestConcurrentFetchesOfOneDest(t *testing.T) {
	data := payload(2 << 20)
	srv, _ := serve(t, data)
	dest := filepath.Join(t.TempDir(), "f")
	req := Request{URL: srv.URL, SHA256: digest(data), Dest: dest}
	var c Client
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { _, errs[i] = c.Fetch(context.Background(), req, nil) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("fetch %d: %v", i, err)
		}
	}
	assertFile(t, dest, data)
	assertAbsent(t, dest+PartialSuffix)
}

func TestParseContentRange(t *testing.T) {
	for _, tc := range []struct {
		in           string
		start, total int64
		ok           bool
	}{
		{"bytes 100-199/200", 100, 200, true},
		{"bytes 0-0/*", 0, -1, true},
		{"bytes */4096", -1, 4096, true},
		{"bytes 5-3/10", 0, 0, false},
		{"items 0-1/2", 0, 0, false},
		{"bytes 1-2", 0, 0, false},
		{"", 0, 0, false},
	} {
		start, total, ok := parseContentRange(tc.in)
		if ok != tc.ok || (ok && (start != tc.start || total != tc.total)) {
			t.Errorf("parseContentRange(%q) = %d, %d, %v; want %d, %d, %v", tc.in, start, total, ok, tc.start, tc.total, tc.ok)
		}
	}
}

func BenchmarkFetch64MiB(b *testing.B) {
	data := payload(64 << 20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	dest := filepath.Join(b.TempDir(), "f")
	req := Request{URL: srv.URL, SHA256: digest(data), Dest: dest}
	var c Client
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := os.Remove(dest); err != nil && !errors.Is(err, os.ErrNotExist) {
			b.Fatal(err)
		}
		if _, err := c.Fetch(context.Background(), req, nil); err != nil {
			b.Fatal(err)
		}
	}
}
