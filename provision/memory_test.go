package provision_test

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/provision/provisiontest"
)

// writeArtifact streams size pseudo-random bytes (or, with tarName set, a
// plain tar holding them as that file) to path and returns its digest,
// without ever holding the artifact in this process's memory.
func writeArtifact(t *testing.T, path, tarName string, size int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	w := io.MultiWriter(f, h)
	data := io.LimitReader(randReader{rand.New(rand.NewPCG(1, 2))}, size)
	if tarName == "" {
		if _, err := io.Copy(w, data); err != nil {
			t.Fatal(err)
		}
	} else {
		tw := tar.NewWriter(w)
		for _, d := range []string{"etc/", "usr/", "usr/bin/"} {
			if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: tarName, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, data); err != nil {
			t.Fatal(err)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

type randReader struct{ r *rand.Rand }

func (r randReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte(r.r.Uint32())
	}
	return len(b), nil
}

// heapPeak samples the in-use heap until stop is called and returns the
// highest figure seen above the starting one.
func heapPeak() (stop func() uint64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > base && ms.HeapInuse-base > peak.Load() {
				peak.Store(ms.HeapInuse - base)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// Provisioning streams its artifacts: a large kernel and a large file in
// the root filesystem pass through without ever being whole in memory.
// Held whole, they stayed in the owner's resident memory long after the
// provision (the runtime keeps freed heap until it is scavenged).
func TestProvisionDoesNotHoldArtifactsInMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 512 MiB root disk; not in -short mode")
	}
	const (
		kernelSize = 96 << 20
		fileSize   = 128 << 20
		// Well under either artifact: what the builders need for
		// themselves (copy buffers, the disk's metadata cache), with room
		// for garbage the GC has not collected yet.
		bound = 48 << 20
	)
	srvDir := t.TempDir()
	kernelSHA := writeArtifact(t, filepath.Join(srvDir, "vmlinuz"), "", kernelSize)
	rootfsSHA := writeArtifact(t, filepath.Join(srvDir, "rootfs.tar"), "usr/bin/big", fileSize)
	srv := provisiontest.Files(t, srvDir)
	m := &provision.Manifest{
		SchemaVersion: 1, Arch: "amd64", Distro: "debian",
		Kernel: provision.Artifact{URL: srv.URL + "/vmlinuz", SHA256: kernelSHA, Format: provision.FormatRaw},
		Rootfs: provision.Artifact{URL: srv.URL + "/rootfs.tar", SHA256: rootfsSHA, Format: provision.FormatTar},
	}
	p, _ := newProvisioner(t, t.TempDir())

	stop := heapPeak()
	_, err := p.Provision(testContext(t), m)
	peak := stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak heap in use above the start: %d MiB", peak>>20)
	if peak > bound {
		t.Errorf("provisioning a %d MiB kernel and a %d MiB root file system file peaked at %d MiB of heap, want at most %d MiB: an artifact is held whole in memory instead of streamed",
			kernelSize>>20, fileSize>>20, peak>>20, bound>>20)
	}
	if st, err := os.Stat(p.Layout.Kernel()); err != nil || st.Size() != kernelSize {
		t.Errorf("kernel file: %v, want %d bytes", err, kernelSize)
	}
}

// BenchmarkProvisionTestGuestMemory provisions the test guest from
// loopback, building its root disk, and reports the heap that takes at its
// peak, what is still live afterwards, and this process's resident memory
// before and after the freed heap is returned to the OS (what the owner
// does when provisioning ends).
func BenchmarkProvisionTestGuestMemory(b *testing.B) {
	dir := provisiontest.GuestDir(b)
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		b.Fatal(err)
	}
	srv := provisiontest.Files(b, dir)
	m, err := provision.ParseManifest(data, srv.URL+"/manifest.json")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		p, _ := newProvisioner(b, b.TempDir())
		p.DiskSize = 0 // the default size, as the app builds it
		stop := heapPeak()
		start := time.Now()
		if _, err := p.Provision(testContext(b), m); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		peak := stop()
		b.StopTimer()
		rss := selfRSS(b)
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		debug.FreeOSMemory()
		b.ReportMetric(took.Seconds(), "s/provision")
		b.ReportMetric(float64(peak>>20), "peak-heap-MiB")
		b.ReportMetric(float64(ms.HeapAlloc>>20), "live-heap-after-MiB")
		b.ReportMetric(float64(rss>>10), "rss-after-MiB")
		b.ReportMetric(float64(selfRSS(b)>>10), "rss-after-release-MiB")
		b.StartTimer()
	}
}

// selfRSS is this process's VmRSS in KiB.
func selfRSS(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
