package host

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/provision"
)

// manifestURL is the image manifest to provision from.
func manifestURL(cfg config.Sandbox) (string, error) {
	if cfg.ImageManifest != "" {
		return cfg.ImageManifest, nil
	}
	if u := provision.DefaultManifestURL(); u != "" {
		return u, nil
	}
	return "", fmt.Errorf("no default guest image for this machine: set one with `osaurus-sandbox config set imageManifest URL`")
}

// loadManifest fetches the manifest; when that fails it falls back to the
// copy kept from the last provision from the same URL, so provisioning
// again works offline.
func loadManifest(ctx context.Context, p config.Paths, cfg config.Sandbox) (*provision.Manifest, error) {
	u, err := manifestURL(cfg)
	if err != nil {
		return nil, err
	}
	if m, ok, err := provision.BuiltinManifest(u); ok {
		return m, err
	}
	cache := p.ManifestCache()
	cacheURL := cache + ".url"
	data, ferr := fetchSmall(ctx, u)
	if ferr != nil {
		prev, _ := os.ReadFile(cacheURL)
		if string(prev) != u {
			return nil, fmt.Errorf("image manifest %s: %w", u, ferr)
		}
		if data, err = os.ReadFile(cache); err != nil {
			return nil, fmt.Errorf("image manifest %s: %w (and no cached copy: %v)", u, ferr, err)
		}
	}
	m, err := provision.ParseManifest(data, u)
	if err != nil {
		return nil, err
	}
	if ferr == nil {
		os.MkdirAll(filepath.Dir(cache), 0o755)
		atomicfile.WriteFile(cache, data, 0o644)
		atomicfile.WriteFile(cacheURL, []byte(u), 0o644)
	}
	return m, nil
}

func fetchSmall(ctx context.Context, u string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(u, "file://"); ok {
		return os.ReadFile(rest)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
}

// natURL is what the NAT diagnostic fetches: the configured URL, else the
// image source itself (reachability of where images come from). A
// loopback host is rewritten to 10.0.2.2, which is how the guest reaches
// the host's loopback through NAT.
func natURL(cfg config.Sandbox) string {
	raw := cfg.DiagnosticsURL
	if raw == "" {
		raw, _ = manifestURL(cfg)
		// A built-in image has no URL of its own: use its kernel's
		// checksum file, a small file on the image host.
		if m, ok, err := provision.BuiltinManifest(raw); ok && err == nil {
			raw = m.Kernel.ChecksumURL
			if raw == "" {
				raw = m.Kernel.URL
			}
		}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	host, port := u.Hostname(), u.Port()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		u.Host = "10.0.2.2"
		if port != "" {
			u.Host += ":" + port
		}
	}
	return u.String()
}
