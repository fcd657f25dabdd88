// Package download fetches the VM's kernel and root filesystem so that
// nothing unverified or half-written is ever used.
//
// Bytes go to Dest+".partial" and are hashed while they stream; only a
// file whose SHA-256 matches is fsynced and renamed onto Dest. An
// interrupted transfer leaves the partial behind and the next Fetch
// resumes it with an HTTP Range request.
package download

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/internal/filelock"
)

// PartialSuffix is appended to Dest for the file being downloaded.
const PartialSuffix = ".partial"

// DefaultStallTimeout ends a transfer that delivers no bytes for this long.
const DefaultStallTimeout = 60 * time.Second

// Progress throttling: an event at most every progressBytes or
// progressInterval, whichever comes first, plus one at start and end.
const (
	progressBytes    = 1 << 20
	progressInterval = 100 * time.Millisecond
	copyBufferSize   = 256 << 10
)

var (
	// ErrChecksumMismatch: the downloaded bytes are not the expected ones.
	// The concrete error is a *ChecksumError.
	ErrChecksumMismatch = errdefs.Class(errdefs.ErrUpstream, "checksum mismatch")
	// ErrStalled: the server sent no bytes for the client's StallTimeout.
	ErrStalled = errdefs.Class(errdefs.ErrTimeout, "download stalled")
)

// Progress reports one download's advance.
type Progress struct {
	Phase string
	Done  int64
	Total int64 // -1 when unknown
}

// Request describes one file to fetch.
type Request struct {
	URL    string // http(s):// or file://
	SHA256 string // expected hex digest; "" downloads unverified and returns the digest
	Dest   string // final path, replaced atomically
	Phase  string // label copied into progress events
}

// Client downloads files. The zero value (and a nil *Client) is usable.
type Client struct {
	// HTTP performs requests. When nil, a client with connect, TLS and
	// response-header timeouts but no whole-transfer deadline is used, so
	// large files are not cut off.
	HTTP *http.Client
	// StallTimeout fails a transfer that receives no bytes for this long;
	// DefaultStallTimeout when zero.
	StallTimeout time.Duration
}

// defaultHTTP is built once and never modified.
var defaultHTTP = newDefaultHTTP()

func newDefaultHTTP() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 15 * time.Second
	t.ResponseHeaderTimeout = 30 * time.Second
	return &http.Client{Transport: t}
}

func (c *Client) httpClient() *http.Client {
	if c == nil || c.HTTP == nil {
		return defaultHTTP
	}
	return c.HTTP
}

func (c *Client) stallTimeout() time.Duration {
	if c == nil || c.StallTimeout <= 0 {
		return DefaultStallTimeout
	}
	return c.StallTimeout
}

// ChecksumError is the error for a verified download whose digest differs.
type ChecksumError struct {
	URL      string
	Expected string
	Actual   string
	// Resumed is set when the bytes were part old partial, part new
	// download. The partial has been deleted, so retrying once downloads
	// from scratch and tells a corrupt partial from a changed upstream.
	Resumed bool
}

func (e *ChecksumError) Error() string {
	msg := fmt.Sprintf("%s: %v: expected sha256 %s, got %s", e.URL, ErrChecksumMismatch, e.Expected, e.Actual)
	if e.Resumed {
		msg += " (download was resumed; the partial file was deleted, retry once from scratch)"
	}
	return msg
}

func (e *ChecksumError) Unwrap() error { return ErrChecksumMismatch }

// StatusError is a non-2xx HTTP answer.
type StatusError struct {
	URL        string
	StatusCode int
	Status     string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: unexpected HTTP status %s", e.URL, e.Status)
}

// Fetch makes req.Dest hold the file at req.URL and returns its SHA-256.
//
// With req.SHA256 set, an existing matching Dest is returned without any
// network access, a partial left by an earlier attempt is resumed, and a
// mismatching result is deleted and reported as a *ChecksumError. With
// req.SHA256 empty the file is always downloaded from the start, since
// neither Dest nor a partial could be checked.
//
// A failed or cancelled Fetch leaves at most Dest+".partial"; Dest is only
// ever absent or complete. Concurrent Fetches of one Dest (in this or
// another process) are serialised.
func (c *Client) Fetch(ctx context.Context, req Request, progress func(Progress)) (string, error) {
	want, err := normalizeDigest(req.SHA256, true)
	if err != nil {
		return "", fmt.Errorf("download %s: %w", req.URL, err)
	}
	if req.URL == "" || req.Dest == "" {
		return "", errors.New("download: request needs a URL and a Dest")
	}
	if progress == nil {
		progress = func(Progress) {}
	}
	if want != "" {
		// Fast path: no lock, no partial created, no network.
		if size, ok, err := matches(req.Dest, want); err != nil {
			return "", err
		} else if ok {
			progress(Progress{Phase: req.Phase, Done: size, Total: size})
			return want, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(req.Dest), 0o755); err != nil {
		return "", fmt.Errorf("download %s: %w", req.URL, err)
	}
	f, err := openLockedPartial(ctx, req.Dest+PartialSuffix)
	if err != nil {
		return "", fmt.Errorf("download %s: %w", req.URL, err)
	}
	defer f.Close() // closing drops the lock

	if want != "" {
		// Another process may have finished while we waited for the lock.
		size, ok, err := matches(req.Dest, want)
		if err != nil {
			return "", err
		}
		if ok {
			os.Remove(f.Name())
			progress(Progress{Phase: req.Phase, Done: size, Total: size})
			return want, nil
		}
		// A wrong Dest must not survive a failed download.
		if err := os.Remove(req.Dest); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("download %s: remove stale %s: %w", req.URL, req.Dest, err)
		}
	}
	d := &transfer{c: c, req: req, want: want, f: f, h: sha256.New(), progress: progress}
	sum, err := d.run(ctx)
	if err != nil {
		removeIfEmpty(f)
	}
	return sum, err
}

// removeIfEmpty drops a partial that holds nothing worth resuming (after
// e.g. a 404). Only while f is locked and still at its path, so another
// Fetch's partial is never touched.
func removeIfEmpty(f *os.File) {
	fi, err := f.Stat()
	if err != nil || fi.Size() != 0 {
		return
	}
	if pi, err := os.Stat(f.Name()); err == nil && os.SameFile(fi, pi) {
		os.Remove(f.Name())
	}
}

// transfer is one Fetch holding the partial's lock.
type transfer struct {
	c        *Client
	req      Request
	want     string
	f        *os.File
	h        hash.Hash
	progress func(Progress)
}

func (d *transfer) run(ctx context.Context) (string, error) {
	resumedFrom, err := d.loadPartial()
	if err != nil {
		return "", err
	}
	src, err := d.open(ctx, resumedFrom)
	if errors.Is(err, errRestart) {
		// The partial can't be continued (e.g. it is longer than the file).
		if resumedFrom, err = 0, d.restart(); err == nil {
			src, err = d.open(ctx, 0)
		}
	}
	if err != nil {
		return "", err
	}
	defer src.Close()
	if src.offset != resumedFrom {
		// The server ignored Range and sent the whole file.
		if resumedFrom, err = 0, d.restart(); err != nil {
			return "", err
		}
	}
	done, err := d.copy(ctx, src, resumedFrom)
	if err != nil {
		return "", err
	}
	if src.total >= 0 && done != src.total {
		return "", fmt.Errorf("download %s: got %d of %d bytes: %w", d.req.URL, done, src.total, io.ErrUnexpectedEOF)
	}
	sum := hex.EncodeToString(d.h.Sum(nil))
	if d.want != "" && sum != d.want {
		// Removed while still locked, so a waiter never sees these bytes.
		os.Remove(d.f.Name())
		return "", &ChecksumError{URL: d.req.URL, Expected: d.want, Actual: sum, Resumed: resumedFrom > 0}
	}
	if err := d.install(); err != nil {
		return "", err
	}
	d.progress(Progress{Phase: d.req.Phase, Done: done, Total: done})
	return sum, nil
}

// loadPartial hashes what an earlier attempt left and returns its size.
func (d *transfer) loadPartial() (int64, error) {
	if d.want == "" {
		// Nothing could vouch for an old partial's bytes.
		return 0, d.restart()
	}
	n, err := io.CopyBuffer(d.h, d.f, make([]byte, copyBufferSize))
	if err != nil {
		return 0, fmt.Errorf("download %s: read partial: %w", d.req.URL, err)
	}
	return n, nil // the file offset is now at the end, ready to append
}

func (d *transfer) restart() error {
	d.h.Reset()
	if err := d.f.Truncate(0); err != nil {
		return fmt.Errorf("download %s: truncate partial: %w", d.req.URL, err)
	}
	if _, err := d.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("download %s: %w", d.req.URL, err)
	}
	return nil
}

// copy streams src into the partial and the hash, reporting progress and
// stopping on ctx, and returns the partial's final size.
func (d *transfer) copy(ctx context.Context, src *source, done int64) (int64, error) {
	ev := Progress{Phase: d.req.Phase, Done: done, Total: src.total}
	d.progress(ev)
	lastDone, lastAt := done, time.Now()
	buf := make([]byte, copyBufferSize)
	for {
		if err := ctx.Err(); err != nil {
			return done, fmt.Errorf("download %s: %w", d.req.URL, context.Cause(ctx))
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, err := d.f.Write(buf[:n]); err != nil {
				return done, fmt.Errorf("download %s: write %s: %w", d.req.URL, d.f.Name(), err)
			}
			d.h.Write(buf[:n])
			done += int64(n)
			if done-lastDone >= progressBytes || time.Since(lastAt) >= progressInterval {
				ev.Done = done
				d.progress(ev)
				lastDone, lastAt = done, time.Now()
			}
		}
		if rerr == io.EOF {
			return done, nil
		}
		if rerr != nil {
			if cause := src.cause(); cause != nil {
				rerr = cause
			} else if ctx.Err() != nil {
				rerr = context.Cause(ctx)
			}
			return done, fmt.Errorf("download %s: interrupted after %d bytes (run again to resume): %w", d.req.URL, done, rerr)
		}
	}
}

// install makes the verified partial durable and moves it onto Dest.
func (d *transfer) install() error {
	if err := d.f.Sync(); err != nil {
		return fmt.Errorf("download %s: sync: %w", d.req.URL, err)
	}
	if err := os.Rename(d.f.Name(), d.req.Dest); err != nil {
		return fmt.Errorf("download %s: %w", d.req.URL, err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(d.req.Dest)); err != nil {
		return fmt.Errorf("download %s: %w", d.req.URL, err)
	}
	return nil
}

// matches reports whether path exists with the given digest.
func matches(path, want string) (int64, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("download: check %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, f, make([]byte, copyBufferSize))
	if err != nil {
		return 0, false, fmt.Errorf("download: check %s: %w", path, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)) == want, nil
}

// openLockedPartial opens (creating) the partial and takes its exclusive
// lock. The lock lives on the inode, so after waiting it checks that the
// path still names that inode: the holder may have renamed it to Dest or
// deleted it.
func openLockedPartial(ctx context.Context, path string) (*os.File, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if err := filelock.LockFile(ctx, f); err != nil {
			f.Close()
			return nil, err
		}
		fi, err1 := f.Stat()
		pi, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(fi, pi) {
			return f, nil
		}
		f.Close()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// normalizeDigest lower-cases a hex SHA-256 and checks its form.
func normalizeDigest(s string, allowEmpty bool) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" && allowEmpty {
		return "", nil
	}
	if !isHex64(s) {
		return "", fmt.Errorf("sha256 %q is not 64 hex digits", s)
	}
	return s, nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') && (r < 'A' || r > 'F') {
			return false
		}
	}
	return true
}
