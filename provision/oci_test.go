package provision_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osaurus/osaurus-sandbox/provision"
	pt "github.com/osaurus/osaurus-sandbox/provision/provisiontest"
)

func ociManifest(arch string, kernel provision.Artifact, ref string) *provision.Manifest {
	return &provision.Manifest{
		SchemaVersion: 1, Arch: arch, Distro: "alpine", Kernel: kernel,
		Rootfs: provision.Artifact{Format: provision.FormatOCI, OCI: &provision.OCIImage{Ref: ref}},
	}
}

func digestOf(ref string) string { return ref[strings.LastIndex(ref, "@")+1:] }

// A two-layer image: the upper layer deletes a file (whiteout) and replaces
// a directory's contents (opaque whiteout).
func layeredImage(t *testing.T, arch string) (base, top []file) {
	base = []file{
		{Name: "bin/"}, {Name: "bin/sh", Data: "#!fake shell\n", Mode: 0o755}, {Name: "bin/ls", Linkname: "sh"},
		{Name: "etc/"}, {Name: "etc/os-release", Data: "ID=alpine\n"}, {Name: "etc/secret", Data: "must not survive"},
		{Name: "opt/old/"}, {Name: "opt/old/a", Data: "hidden by the opaque dir"},
	}
	top = []file{
		{Name: "etc/.wh.secret"},
		{Name: "opt/old/.wh..wh..opq"}, {Name: "opt/old/b", Data: "from the top layer"},
		{Name: "etc/motd", Data: "welcome\n"},
	}
	return base, top
}

func TestProvisionFromOCIImage(t *testing.T) {
	ctx := testContext(t)
	reg := pt.Registry(t, nil)
	base, top := layeredImage(t, "amd64")
	ref := pt.Push(t, pt.Host(reg)+"/test/rootfs", pt.Image(t, "amd64", pt.Layer(t, base...), pt.Layer(t, top...)))
	kernel, kernelSrv := rawKernel(t, "amd64")
	m := ociManifest("amd64", kernel, ref)

	p, progress := newProvisioner(t, t.TempDir())
	st, err := p.Provision(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if want := "oci:" + digestOf(ref); st.RootfsSHA256 != want {
		t.Errorf("RootfsSHA256 = %q, want %q", st.RootfsSHA256, want)
	}
	disk := p.Layout.RootDisk()
	want := map[string]string{
		"/bin/sh":                       "#!fake shell\n",
		"/etc/os-release":               "ID=alpine\n",
		"/etc/motd":                     "welcome\n",
		"/opt/old/b":                    "from the top layer",
		"/etc/secret":                   "", // whited out
		"/opt/old/a":                    "", // under an opaque directory
		"/" + provision.AgentPathOnDisk: string(agent),
	}
	mustDisk(t, disk, want)
	if ev, ok := progress.last("rootfs"); !ok || ev.Total <= 0 || ev.Done != ev.Total {
		t.Errorf("last rootfs progress event = %+v, %v; want a finished pull with a known total", ev, ok)
	}

	// With both servers gone, provisioning again works from the cache:
	// first keeping the disk, then rebuilding a deleted one.
	reg.Close()
	kernelSrv.Close()
	if _, err := p.Provision(ctx, m); err != nil {
		t.Fatalf("offline provision: %v", err)
	}
	if err := os.Remove(disk); err != nil {
		t.Fatal(err)
	}
	st2, err := p.Provision(ctx, m)
	if err != nil {
		t.Fatalf("offline rebuild: %v", err)
	}
	if st2.RootfsSHA256 != st.RootfsSHA256 {
		t.Errorf("offline rebuild recorded %q, first provision %q", st2.RootfsSHA256, st.RootfsSHA256)
	}
	mustDisk(t, disk, want)
}

func TestOCIImageIndexPicksPlatform(t *testing.T) {
	ctx := testContext(t)
	reg := pt.Registry(t, nil)
	imgs := map[string]v1.Image{
		"amd64": pt.Image(t, "amd64", pt.Layer(t, file{Name: "etc/arch", Data: "amd64"})),
		"arm64": pt.Image(t, "arm64", pt.Layer(t, file{Name: "etc/arch", Data: "arm64"})),
	}
	ref := pt.PushIndex(t, pt.Host(reg)+"/test/multi", imgs["amd64"], imgs["arm64"])
	for arch, img := range imgs {
		t.Run(arch, func(t *testing.T) {
			kernel, _ := rawKernel(t, arch)
			p, _ := newProvisioner(t, t.TempDir())
			st, err := p.Provision(ctx, ociManifest(arch, kernel, ref))
			if err != nil {
				t.Fatal(err)
			}
			mustDisk(t, p.Layout.RootDisk(), map[string]string{"/etc/arch": arch})
			d, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			if st.RootfsSHA256 != "oci:"+d.String() {
				t.Errorf("RootfsSHA256 = %q, want the %s image's digest %s", st.RootfsSHA256, arch, d)
			}
		})
	}
}

func TestOCIRefusals(t *testing.T) {
	ctx := testContext(t)
	img := pt.Image(t, "amd64", pt.Layer(t, file{Name: "etc/os-release", Data: "ID=alpine\n"}))
	other := pt.Image(t, "amd64", pt.Layer(t, file{Name: "etc/os-release", Data: "ID=evil\n"}))
	armOnly := pt.Image(t, "arm64", pt.Layer(t, file{Name: "etc/arch", Data: "arm64"}))

	// The tampering registry answers a request for img's manifest with
	// other's, as a compromised mirror would.
	var tamper atomic.Bool
	var imgDigest, otherDigest string
	reg := pt.Registry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tamper.Load() && strings.HasSuffix(r.URL.Path, "/manifests/"+imgDigest) {
				r.URL.Path = strings.TrimSuffix(r.URL.Path, imgDigest) + otherDigest
			}
			h.ServeHTTP(w, r)
		})
	})
	host := pt.Host(reg)
	ref := pt.Push(t, host+"/test/rootfs", img)
	otherRef := pt.Push(t, host+"/test/rootfs", other)
	imgDigest, otherDigest = digestOf(ref), digestOf(otherRef)
	armRef := pt.Push(t, host+"/test/arm", armOnly)
	kernel, _ := rawKernel(t, "amd64")

	tests := []struct {
		name    string
		ref     string
		tamper  bool
		wantErr error  // checked with errors.Is when set
		wantMsg string // a substring of the error
	}{
		{"tag only", host + "/test/rootfs:test", false, provision.ErrImageNotPinned, "pin it as " + host + "/test/rootfs@sha256:"},
		{"unknown digest", host + "/test/rootfs@sha256:" + strings.Repeat("ab", 32), false, nil, "MANIFEST_UNKNOWN"},
		{"registry serves another manifest", ref, true, nil, "does not match"},
		{"wrong platform", armRef, false, provision.ErrImagePlatform, "linux/arm64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tamper.Store(tt.tamper)
			defer tamper.Store(false)
			p, _ := newProvisioner(t, t.TempDir())
			_, err := p.Provision(ctx, ociManifest("amd64", kernel, tt.ref))
			if err == nil {
				t.Fatal("provisioned; want a refusal")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v; want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantMsg)
			}
			if _, err := p.Load(); !errors.Is(err, provision.ErrNotProvisioned) {
				t.Errorf("after a refusal Load() = %v, want ErrNotProvisioned", err)
			}
			if _, err := os.Stat(p.Layout.RootDisk()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a root disk was built: %v", err)
			}
		})
	}
	// Validate alone refuses a tag, before any network access.
	m := ociManifest("amd64", kernel, "alpine:3.24")
	if err := m.Validate(); !errors.Is(err, provision.ErrImageNotPinned) || !strings.Contains(err.Error(), "index.docker.io/library/alpine@sha256:<digest>") {
		t.Errorf("Validate(tag) = %v", err)
	}
}

// A layer whose bytes do not match its digest is refused and not kept; once
// the registry serves it correctly, provisioning again succeeds.
func TestOCICorruptLayer(t *testing.T) {
	ctx := testContext(t)
	layer := pt.Layer(t, file{Name: "etc/os-release", Data: strings.Repeat("ID=alpine\n", 1000)})
	ld, err := layer.Digest()
	if err != nil {
		t.Fatal(err)
	}
	var corrupt atomic.Bool
	corrupt.Store(true)
	reg := pt.Registry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if corrupt.Load() && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+ld.String()) {
				w = &flipWriter{ResponseWriter: w}
			}
			h.ServeHTTP(w, r)
		})
	})
	ref := pt.Push(t, pt.Host(reg)+"/test/rootfs", pt.Image(t, "amd64", layer))
	kernel, _ := rawKernel(t, "amd64")
	m := ociManifest("amd64", kernel, ref)
	p, _ := newProvisioner(t, t.TempDir())

	_, err = p.Provision(ctx, m)
	if err == nil || !strings.Contains(err.Error(), ld.Hex[:12]) && !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("corrupt layer: got %v, want a digest error", err)
	}
	kept, _ := filepath.Glob(filepath.Join(p.Layout.Cache(), "oci", "*", "blobs", "sha256", ld.Hex))
	if len(kept) != 0 {
		t.Fatalf("corrupt layer kept in the cache: %v", kept)
	}
	corrupt.Store(false)
	if _, err := p.Provision(ctx, m); err != nil {
		t.Fatalf("after the registry was fixed: %v", err)
	}
	mustDisk(t, p.Layout.RootDisk(), map[string]string{"/etc/os-release": strings.Repeat("ID=alpine\n", 1000)})
}

// flipWriter corrupts one byte of a response body.
type flipWriter struct {
	http.ResponseWriter
	done bool
}

func (f *flipWriter) Write(b []byte) (int, error) {
	if !f.done && len(b) > 40 {
		c := append([]byte(nil), b...)
		c[40] ^= 0xFF
		f.done = true
		return f.ResponseWriter.Write(c)
	}
	return f.ResponseWriter.Write(b)
}

// blobCounter counts blob downloads per digest and can refuse one once.
type blobCounter struct {
	mu     sync.Mutex
	gets   map[string]int
	failOn string // a digest whose first download fails
}

func (c *blobCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if i := strings.Index(r.URL.Path, "/blobs/sha256:"); i >= 0 && r.Method == http.MethodGet {
			d := r.URL.Path[i+len("/blobs/"):]
			c.mu.Lock()
			c.gets[d]++
			fail := d == c.failOn && c.gets[d] == 1
			c.mu.Unlock()
			if fail {
				http.Error(w, "connection lost", http.StatusNotFound)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

func (c *blobCounter) count(d string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets[d]
}

// An interrupted pull keeps the layers it verified; the next attempt
// downloads only what is missing, and each blob is fetched once.
func TestOCIPullResumesByLayer(t *testing.T) {
	ctx := testContext(t)
	first := pt.Layer(t, file{Name: "usr/lib/big", Data: strings.Repeat("first layer ", 10000)})
	second := pt.Layer(t, file{Name: "etc/os-release", Data: "ID=alpine\n"})
	d1, _ := first.Digest()
	d2, _ := second.Digest()
	counter := &blobCounter{gets: map[string]int{}, failOn: d2.String()}
	reg := pt.Registry(t, counter.wrap)
	ref := pt.Push(t, pt.Host(reg)+"/test/rootfs", pt.Image(t, "amd64", first, second))
	counter.mu.Lock()
	clear(counter.gets) // pushing may have probed blobs
	counter.mu.Unlock()
	kernel, _ := rawKernel(t, "amd64")
	p, _ := newProvisioner(t, t.TempDir())
	m := ociManifest("amd64", kernel, ref)

	if _, err := p.Provision(ctx, m); err == nil {
		t.Fatal("the first pull should have failed on the second layer")
	}
	if _, err := p.Provision(ctx, m); err != nil {
		t.Fatal(err)
	}
	if n := counter.count(d1.String()); n != 1 {
		t.Errorf("first layer downloaded %d times, want once (kept from the interrupted pull)", n)
	}
	if n := counter.count(d2.String()); n != 2 {
		t.Errorf("second layer requested %d times, want 2 (failed, then fetched)", n)
	}
	mustDisk(t, p.Layout.RootDisk(), map[string]string{"/etc/os-release": "ID=alpine\n", "/usr/lib/big": strings.Repeat("first layer ", 10000)})
}
