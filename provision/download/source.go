package download

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// errRestart: the partial can't be continued; fetch from byte 0.
var errRestart = errors.New("partial cannot be resumed")

// source is a body positioned somewhere in the remote file.
type source struct {
	io.ReadCloser
	offset int64 // file position of the body's first byte
	total  int64 // file size, -1 when unknown
	// cause explains a failed read beyond the caller's ctx (a stall).
	cause func() error
}

func (d *transfer) open(ctx context.Context, from int64) (*source, error) {
	return d.c.open(ctx, d.req.URL, from)
}

// open starts reading rawURL at byte from. The returned offset says where
// the body really starts: 0 when a server ignored the Range.
func (c *Client) open(ctx context.Context, rawURL string, from int64) (*source, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	switch u.Scheme {
	case "http", "https":
		return c.openHTTP(ctx, rawURL, from)
	case "file":
		return openFile(u, from)
	default:
		return nil, fmt.Errorf("download %s: unsupported URL scheme %q (want http, https or file)", rawURL, u.Scheme)
	}
}

func (c *Client) openHTTP(ctx context.Context, rawURL string, from int64) (*source, error) {
	stall := c.stallTimeout()
	rctx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(stall, func() { cancel(ErrStalled) })
	stalled := func() error {
		if errors.Is(context.Cause(rctx), ErrStalled) {
			return fmt.Errorf("%w: no data for %v", ErrStalled, stall)
		}
		return nil
	}
	release := func() {
		timer.Stop()
		cancel(nil)
	}

	req, err := http.NewRequestWithContext(rctx, http.MethodGet, rawURL, nil)
	if err != nil {
		release()
		return nil, fmt.Errorf("download: %w", err)
	}
	// Ranges and Content-Length must count the file's own bytes, not those
	// of a compressed transfer encoding.
	req.Header.Set("Accept-Encoding", "identity")
	if from > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", from))
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		if s := stalled(); s != nil {
			err = s
		}
		release()
		return nil, fmt.Errorf("download: %w", err)
	}
	body := &stallReader{r: resp.Body, timer: timer, stall: stall}
	src := &source{
		ReadCloser: closeFunc{body, func() error { release(); return resp.Body.Close() }},
		total:      resp.ContentLength,
		cause:      stalled,
	}
	fail := func(err error) (*source, error) {
		src.Close()
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		// A whole file, whether or not a Range was asked for.
	case resp.StatusCode == http.StatusPartialContent:
		start, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != from {
			return fail(fmt.Errorf("download %s: asked for bytes from %d, server answered Content-Range %q", rawURL, from, resp.Header.Get("Content-Range")))
		}
		if total < 0 && resp.ContentLength >= 0 {
			total = from + resp.ContentLength
		}
		src.offset, src.total = from, total
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && from > 0:
		// The partial reaches the end of the file, or beyond it.
		_, size, ok := parseContentRange(resp.Header.Get("Content-Range"))
		src.Close()
		if ok && size == from {
			return &source{ReadCloser: io.NopCloser(strings.NewReader("")), offset: from, total: from, cause: noCause}, nil
		}
		return nil, errRestart
	default:
		return fail(&StatusError{URL: rawURL, StatusCode: resp.StatusCode, Status: resp.Status})
	}
	return src, nil
}

func openFile(u *url.URL, from int64) (*source, error) {
	if u.Opaque != "" || (u.Host != "" && u.Host != "localhost") {
		return nil, fmt.Errorf("download %s: file URLs must be file:///absolute/path", u)
	}
	f, err := os.Open(filepath.FromSlash(u.Path))
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", u, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", f.Name())
	}
	if err == nil && from > fi.Size() {
		f.Close()
		return nil, errRestart
	}
	if err == nil && from > 0 {
		_, err = f.Seek(from, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("download %s: %w", u, err)
	}
	return &source{ReadCloser: f, offset: from, total: fi.Size(), cause: noCause}, nil
}

func noCause() error { return nil }

// stallReader pushes the stall deadline back whenever bytes arrive.
type stallReader struct {
	r     io.Reader
	timer *time.Timer
	stall time.Duration
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.timer.Reset(s.stall)
	}
	return n, err
}

type closeFunc struct {
	io.Reader
	close func() error
}

func (c closeFunc) Close() error { return c.close() }

// parseContentRange reads "bytes first-last/size", "bytes first-last/*"
// and "bytes */size"; start or total is -1 where the header has none.
func parseContentRange(h string) (start, total int64, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(h), "bytes ")
	if !found {
		return 0, 0, false
	}
	rng, size, found := strings.Cut(strings.TrimSpace(rest), "/")
	if !found {
		return 0, 0, false
	}
	start, total = -1, -1
	var err error
	if size != "*" {
		if total, err = strconv.ParseInt(size, 10, 64); err != nil || total < 0 {
			return 0, 0, false
		}
	}
	if rng != "*" {
		first, last, found := strings.Cut(rng, "-")
		if !found {
			return 0, 0, false
		}
		if start, err = strconv.ParseInt(first, 10, 64); err != nil || start < 0 {
			return 0, 0, false
		}
		if end, err := strconv.ParseInt(last, 10, 64); err != nil || end < start {
			return 0, 0, false
		}
	}
	return start, total, true
}
