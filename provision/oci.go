package provision

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

var (
	// ErrImagePlatform: the pinned image is not for linux/<arch>.
	ErrImagePlatform = agentproto.Class(agentproto.ErrUnsupported, "image is for another platform")
	// ErrLayerDigest: a layer's bytes do not hash to the digest its
	// manifest names.
	ErrLayerDigest = agentproto.Class(agentproto.ErrUpstream, "layer digest mismatch")
)

// imageRecord is written beside a cached image: what was pulled, for what.
type imageRecord struct {
	Ref      string `json:"ref"`
	Platform string `json:"platform"`
	Image    string `json:"image"` // digest of the platform image's manifest
}

// pullImage makes the image available as an OCI layout in the cache, keyed
// by the pinned digest and architecture, so a second provision needs no
// registry. Layers are verified against their digests before they are
// kept; an interrupted pull resumes with the layers already verified.
func (p *Provisioner) pullImage(ctx context.Context, src *OCIImage, arch string) (*rootfsSource, error) {
	ref, err := pinnedRef(src.Ref)
	if err != nil {
		return nil, fmt.Errorf("rootfs: %w", err)
	}
	pinned, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return nil, fmt.Errorf("rootfs: %s: %w", src.Ref, err)
	}
	dir := filepath.Join(p.Layout.Cache(), "oci", pinned.Hex+"-"+arch)
	rec, err := readImageRecord(dir)
	if err != nil {
		if rec, err = p.pull(ctx, ref, arch, dir); err != nil {
			return nil, fmt.Errorf("rootfs: pull %s: %w", src.Ref, err)
		}
	}
	h, err := v1.NewHash(rec.Image)
	if err != nil {
		return nil, fmt.Errorf("rootfs: cached image %s: %w", dir, err)
	}
	img, err := layout.Path(dir).Image(h)
	if err != nil {
		return nil, fmt.Errorf("rootfs: cached image %s: %w (delete it to pull again)", dir, err)
	}
	return &rootfsSource{
		id:    "oci:" + rec.Image,
		total: -1,
		open:  func() (io.ReadCloser, error) { return mutate.Extract(img), nil },
	}, nil
}

func readImageRecord(dir string) (*imageRecord, error) {
	b, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if err != nil {
		return nil, err
	}
	var rec imageRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// pull writes the image into dir+".partial" and renames it to dir.
func (p *Provisioner) pull(ctx context.Context, ref name.Digest, arch, dir string) (*imageRecord, error) {
	platform := v1.Platform{OS: "linux", Architecture: arch}
	img, err := remote.Image(ref,
		remote.WithContext(ctx),
		remote.WithPlatform(platform),
		remote.WithTransport(&registryTransport{base: p.registryBase()}),
	)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	if (cfg.OS != "" && cfg.OS != "linux") || (cfg.Architecture != "" && cfg.Architecture != arch) {
		return nil, fmt.Errorf("%w: %s is %s/%s, the manifest wants linux/%s", ErrImagePlatform, ref, cfg.OS, cfg.Architecture, arch)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	tmp := dir + ".partial"
	lp, err := layout.FromPath(tmp)
	if err != nil {
		os.RemoveAll(tmp)
		if lp, err = layout.Write(tmp, empty.Index); err != nil {
			return nil, err
		}
	}
	if err := p.writeLayers(ctx, img, tmp); err != nil {
		return nil, err
	}
	// Config and manifest were verified against their digests on fetch.
	// (layout's AppendImage would also do this, but re-requests every
	// layer just to see that it is already there.)
	cfgName, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	rawCfg, err := img.RawConfigFile()
	if err != nil {
		return nil, err
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return nil, err
	}
	mediaType, err := img.MediaType()
	if err != nil {
		return nil, err
	}
	for _, b := range []struct {
		h    v1.Hash
		data []byte
	}{{cfgName, rawCfg}, {digest, rawManifest}} {
		if err := lp.WriteBlob(b.h, io.NopCloser(bytes.NewReader(b.data))); err != nil {
			return nil, err
		}
	}
	desc := v1.Descriptor{MediaType: mediaType, Size: int64(len(rawManifest)), Digest: digest, Platform: &platform}
	if err := lp.AppendDescriptor(desc); err != nil {
		return nil, err
	}
	rec := &imageRecord{Ref: ref.String(), Platform: platform.String(), Image: digest.String()}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(tmp, "image.json"), b, 0o644); err != nil {
		return nil, err
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	return rec, atomicfile.SyncDir(filepath.Dir(dir))
}

// writeLayers stores each layer blob that is not yet in the layout,
// verifying its digest before it gets its final name.
func (p *Provisioner) writeLayers(ctx context.Context, img v1.Image, dir string) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	type todo struct {
		layer v1.Layer
		hash  v1.Hash
		dst   string
	}
	var work []todo
	var total int64
	for _, l := range layers {
		h, err := l.Digest()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		if h.Algorithm != "sha256" {
			return fmt.Errorf("layer %s: only sha256 digests are supported", h)
		}
		dst := filepath.Join(dir, "blobs", h.Algorithm, h.Hex)
		if st, err := os.Stat(dst); err == nil && st.Size() == size {
			continue // only ever renamed into place after verification
		}
		work = append(work, todo{l, h, dst})
		total += size
	}
	prog := &pullProgress{total: total, report: p.progress}
	prog.add(0)
	for _, w := range work {
		if err := writeBlob(ctx, w.layer, w.hash, w.dst, prog); err != nil {
			return err
		}
	}
	return nil
}

func writeBlob(ctx context.Context, l v1.Layer, want v1.Hash, dst string, prog *pullProgress) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return fmt.Errorf("layer %s: %w", want, err)
	}
	defer rc.Close()
	tmp := dst + ".download"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h, prog), &ctxReader{ctx: ctx, r: rc})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("layer %s: %w", want, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want.Hex {
		return fmt.Errorf("%w: layer %s: got sha256:%s", ErrLayerDigest, want, got)
	}
	return os.Rename(tmp, dst)
}

// pullProgress reports bytes of layers pulled as "rootfs" progress.
type pullProgress struct {
	mu     sync.Mutex
	done   int64
	total  int64
	last   time.Time
	report func(Progress)
}

func (pp *pullProgress) Write(b []byte) (int, error) {
	pp.add(int64(len(b)))
	return len(b), nil
}

func (pp *pullProgress) add(n int64) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.done += n
	if now := time.Now(); n == 0 || pp.done == pp.total || now.Sub(pp.last) > 200*time.Millisecond {
		pp.last = now
		pp.report(Progress{Phase: "rootfs", Done: pp.done, Total: pp.total})
	}
}

// registryBase is the transport registry requests go through: the
// download client's, so tests and proxies apply alike.
func (p *Provisioner) registryBase() http.RoundTripper {
	if p.Download != nil && p.Download.HTTP != nil && p.Download.HTTP.Transport != nil {
		return p.Download.HTTP.Transport
	}
	return remote.DefaultTransport
}

// registryTransport keeps registry traffic on HTTPS. go-containerregistry
// speaks plain HTTP to loopback, private-network and .local registries;
// only loopback (where tests run their registry) keeps that, everything
// else, redirects included, is upgraded to HTTPS.
type registryTransport struct{ base http.RoundTripper }

func (t *registryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" || isLoopback(req.URL.Hostname()) {
		return t.base.RoundTrip(req)
	}
	up := req.Clone(req.Context())
	up.URL.Scheme = "https"
	resp, err := t.base.RoundTrip(up)
	if err != nil {
		return nil, fmt.Errorf("registry %s: plain HTTP is allowed only for loopback registries, and HTTPS failed: %w", req.URL.Host, err)
	}
	return resp, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
