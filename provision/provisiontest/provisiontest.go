// Package provisiontest serves guest images the way provisioning tests need
// them: artifacts from a loopback HTTP server and root filesystems from a
// loopback OCI registry, both in-process.
package provisiontest

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/osaurus/osaurus-sandbox/provision"
)

// GuestHint tells a developer how to get the test guest.
const GuestHint = "run `make test-guest` and set OSAURUS_TEST_GUEST to its folder (`make test` does both)"

// GuestDir returns the test guest folder built by scripts/build-test-guest.sh
// ($OSAURUS_TEST_GUEST). It fails the test, never skips it, when the
// variable is unset or the folder is incomplete.
func GuestDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("OSAURUS_TEST_GUEST")
	if dir == "" {
		t.Fatalf("OSAURUS_TEST_GUEST is not set: %s", GuestHint)
	}
	for _, f := range []string{"manifest.json", "manifest-debian-kernel.json", "kernel.tar.gz", "debian-kernel.tar.gz", "rootfs.tar.gz"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("no test guest in %s (%v): %s", dir, err, GuestHint)
		}
	}
	return dir
}

// Server is a loopback server that can be stopped early, so a test can
// show that later work needs no network.
type Server struct {
	*httptest.Server
	once sync.Once
}

// Close stops the server; calling it again does nothing.
func (s *Server) Close() { s.once.Do(s.Server.Close) }

func serve(t testing.TB, h http.Handler) *Server {
	s := &Server{Server: httptest.NewServer(h)}
	t.Cleanup(s.Close)
	return s
}

// Files serves dir over loopback HTTP until the test ends.
func Files(t testing.TB, dir string) *Server {
	return serve(t, http.FileServer(http.Dir(dir)))
}

// Registry starts an in-process OCI registry on loopback, storing blobs in
// a temp dir, until the test ends. wrap, when given, sits in front of it
// (to tamper with responses). Image references start with Host(s).
func Registry(t testing.TB, wrap func(http.Handler) http.Handler) *Server {
	t.Helper()
	var h http.Handler = registry.New(
		registry.WithBlobHandler(registry.NewDiskBlobHandler(t.TempDir())),
		registry.Logger(log.New(io.Discard, "", 0)),
	)
	if wrap != nil {
		h = wrap(h)
	}
	return serve(t, h)
}

// Host is the registry host:port to put in image references.
func Host(s *Server) string { return strings.TrimPrefix(s.URL, "http://") }

// File is one entry of a test layer.
type File struct {
	Name     string // "bin/sh", "etc/.wh.secret", "opt/.wh..wh..opq", "etc/dir/"
	Data     string
	Mode     int64  // 0644 when zero; 0755 for directories
	Linkname string // makes a symlink
}

// Layer builds a gzip'd tar layer from files, in order. A name ending in
// "/" is a directory.
func Layer(t testing.TB, files ...File) v1.Layer {
	t.Helper()
	data := tarBytes(t, files)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Image stacks layers into an OCI image for linux/arch.
func Image(t testing.TB, arch string, layers ...v1.Layer) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	return img
}

// Push uploads img as repo:tag (repo includes the registry host) and
// returns the reference pinned by the image's digest.
func Push(t testing.TB, repo string, img v1.Image) string {
	t.Helper()
	ref, err := name.NewTag(repo + ":test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return repo + "@" + d.String()
}

// PushIndex uploads an image index with one image per platform and returns
// the reference pinned by the index's digest.
func PushIndex(t testing.TB, repo string, imgs ...v1.Image) string {
	t.Helper()
	var adds []mutate.IndexAddendum
	for _, img := range imgs {
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture}}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	ref, err := name.NewTag(repo + ":index")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return repo + "@" + d.String()
}

// Guest is the test guest served the way a user's image host would serve
// it: kernel and modules over loopback HTTP, the root filesystem as a
// single-layer image in a loopback registry.
type Guest struct {
	Manifest *provision.Manifest
	HTTP     *Server
	Registry *Server
	Ref      string // the pinned image reference
}

// Close stops both servers; later provisions must then work from the cache.
func (g *Guest) Close() {
	g.HTTP.Close()
	g.Registry.Close()
}

// The test guest's manifests: the product's own kernel, and Debian's
// modular kernel (the path of images that bring their own).
const (
	OwnKernelManifest     = "manifest.json"
	ModularKernelManifest = "manifest-debian-kernel.json"
)

// TestGuest pushes the test guest's rootfs.tar.gz to a loopback registry and
// returns a manifest that takes the root filesystem from there and the
// kernel (and modules) from the guest's manifest named manifestFile,
// served over loopback HTTP.
func TestGuest(t testing.TB, manifestFile string) *Guest {
	t.Helper()
	dir := GuestDir(t)
	data, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		t.Fatalf("%v: %s", err, GuestHint)
	}
	files := Files(t, dir)
	m, err := provision.ParseManifest(data, files.URL+"/"+manifestFile)
	if err != nil {
		t.Fatalf("test guest manifest: %v", err)
	}
	layer, err := tarball.LayerFromFile(filepath.Join(dir, "rootfs.tar.gz"), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	reg := Registry(t, nil)
	ref := Push(t, Host(reg)+"/osaurus/test-guest", Image(t, m.Arch, layer))
	m.Rootfs = provision.Artifact{Format: provision.FormatOCI, OCI: &provision.OCIImage{Ref: ref}}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	return &Guest{Manifest: m, HTTP: files, Registry: reg, Ref: ref}
}
