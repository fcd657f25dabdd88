package download

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sync"

	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

var (
	// ErrPinConflict: Record was asked to change a URL's recorded digest.
	ErrPinConflict = errdefs.Class(errdefs.ErrInvalid, "pin conflict")
	// ErrUnpinned: an artifact has no digest, no pin and no checksum file.
	ErrUnpinned = errdefs.Class(errdefs.ErrInvalid, "artifact is not pinned")
)

// Pins records the digest first seen for URLs that the manifest could not
// pin ahead of time (trust on first use), so that a later change upstream
// is caught. The file is a JSON object {url: sha256}.
//
// A Pins serialises its own updates; two processes recording at once may
// lose one entry, which is then learned again at the next download.
type Pins struct {
	Path string
	mu   sync.Mutex
}

// Get returns the pinned digest for url; a missing file pins nothing.
func (p *Pins) Get(url string) (string, bool, error) {
	m, err := p.load()
	if err != nil {
		return "", false, err
	}
	sum, ok := m[url]
	return sum, ok, nil
}

// Record pins url to sha. Recording the same digest again is a no-op;
// a different one fails with ErrPinConflict, because a pin exists to
// refuse exactly that.
func (p *Pins) Record(url, sha string) error {
	sum, err := normalizeDigest(sha, false)
	if err != nil {
		return fmt.Errorf("pin %s: %w", url, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	m, err := p.load()
	if err != nil {
		return err
	}
	if old, ok := m[url]; ok {
		if old == sum {
			return nil
		}
		return fmt.Errorf("%w: %s pins %s to sha256 %s, not %s; delete that entry to accept the new file",
			ErrPinConflict, p.Path, url, old, sum)
	}
	m[url] = sum
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.Path), 0o755); err != nil {
		return fmt.Errorf("pins: %w", err)
	}
	if err := atomicfile.WriteFile(p.Path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("pins: %w", err)
	}
	return nil
}

func (p *Pins) load() (map[string]string, error) {
	data, err := os.ReadFile(p.Path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	m := map[string]string{}
	if err := json.Unmarshal(data, &m); err != nil {
		// Fail closed: a damaged file must not silently unpin everything.
		return nil, fmt.Errorf("pins: %s is damaged (%v); repair or delete it", p.Path, err)
	}
	for u, s := range m {
		n, err := normalizeDigest(s, false)
		if err != nil {
			return nil, fmt.Errorf("pins: %s: entry for %s: %w", p.Path, u, err)
		}
		m[u] = n
	}
	return m, nil
}

// ExpectedDigest decides which SHA-256 a download of artifactURL must
// have: sha256 when given; else the digest pinned for the URL; else the
// one listed for the URL's file name in the checksum file at checksumURL.
// With none of these it fails with ErrUnpinned.
//
// A digest that did not come from sha256 should be recorded with
// pins.Record after the Fetch succeeds, so it is enforced from then on
// and the checksum file is no longer consulted. pins may be nil.
func ExpectedDigest(ctx context.Context, c *Client, pins *Pins, artifactURL, sha256, checksumURL string) (string, error) {
	if sha256 != "" {
		sum, err := normalizeDigest(sha256, false)
		if err != nil {
			return "", fmt.Errorf("%s: %w", artifactURL, err)
		}
		return sum, nil
	}
	if pins != nil {
		sum, ok, err := pins.Get(artifactURL)
		if err != nil || ok {
			return sum, err
		}
	}
	if checksumURL == "" {
		return "", fmt.Errorf("%w: %s has neither a sha256 nor a checksum file; add \"sha256\": \"<hex>\" "+
			"for it to the manifest (sha256sum prints the digest of a trusted copy)", ErrUnpinned, artifactURL)
	}
	return FetchChecksumFile(ctx, c, checksumURL, fileNameOf(artifactURL))
}

// fileNameOf is the last path element of a URL, without query.
func fileNameOf(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		return path.Base(u.Path)
	}
	return path.Base(rawURL)
}
