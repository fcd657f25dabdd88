package provision

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Download is one file provisioning fetches, for the first-run view.
type Download struct {
	URL string
	// Size in bytes, or -1 when the server didn't say (or for an OCI
	// image, whose layers are sized only when pulled).
	Size int64
}

// ResolveManifest returns the manifest at url: a built-in one, a
// file:// path, or an http(s) URL fetched with c (nil: the default
// client). It keeps no copy; the owner's provisioning does.
func ResolveManifest(ctx context.Context, c *http.Client, url string) (*Manifest, error) {
	if m, ok, err := BuiltinManifest(url); ok {
		return m, err
	}
	var data []byte
	if path, ok := strings.CutPrefix(url, "file://"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		data = b
	} else {
		resp, err := get(ctx, c, http.MethodGet, url)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if data, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20)); err != nil {
			return nil, err
		}
	}
	return ParseManifest(data, url)
}

// Downloads lists the distinct files m fetches, asking each server for
// its size (HEAD); a size it doesn't give is -1.
func Downloads(ctx context.Context, c *http.Client, m *Manifest) []Download {
	var out []Download
	seen := map[string]bool{}
	for _, a := range m.artifacts() {
		u := a.URL
		if a.Format == FormatOCI && a.OCI != nil {
			u = a.OCI.Ref
		}
		if u == "" || seen[u] {
			continue
		}
		seen[u] = true
		d := Download{URL: u, Size: -1}
		if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
			if resp, err := get(ctx, c, http.MethodHead, u); err == nil {
				resp.Body.Close()
				d.Size = resp.ContentLength
			}
		} else if path, ok := strings.CutPrefix(u, "file://"); ok {
			if st, err := os.Stat(path); err == nil {
				d.Size = st.Size()
			}
		}
		out = append(out, d)
	}
	return out
}

func get(ctx context.Context, c *http.Client, method, url string) (*http.Response, error) {
	if c == nil {
		c = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("%s %s: unexpected HTTP status %s", method, url, resp.Status)
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error { err := c.ReadCloser.Close(); c.cancel(); return err }
