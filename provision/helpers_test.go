package provision_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/provision/download"
	"github.com/osaurus/osaurus-sandbox/provision/ext4"
	"github.com/osaurus/osaurus-sandbox/provision/provisiontest"
)

type file = provisiontest.File

var agent = []byte("#!/bin/sh\n# stands in for the guest agent\n")

func testContext(t testing.TB) context.Context {
	// A guard against hangs, not a speed limit: on a loaded 2-core machine
	// pulling the whole test guest has taken over ten minutes, so the
	// guard follows go test's own -timeout, leaving time to report.
	deadline, ok := time.Time{}, false
	if d, has := t.(interface{ Deadline() (time.Time, bool) }); has {
		deadline, ok = d.Deadline()
	}
	if !ok {
		deadline = time.Now().Add(30 * time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(-time.Minute))
	t.Cleanup(cancel)
	return ctx
}

// progressLog records progress events; provisioning may report from
// several goroutines.
type progressLog struct {
	mu     sync.Mutex
	events []provision.Progress
}

func (l *progressLog) add(p provision.Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, p)
}

// last returns the last event of a phase.
func (l *progressLog) last(phase string) (provision.Progress, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.events) - 1; i >= 0; i-- {
		if l.events[i].Phase == phase {
			return l.events[i], true
		}
	}
	return provision.Progress{}, false
}

func newProvisioner(t testing.TB, dir string) (*provision.Provisioner, *progressLog) {
	log := &progressLog{}
	return &provision.Provisioner{
		Layout:   provision.Layout{Dir: dir},
		Download: &download.Client{},
		Agent:    func(string) ([]byte, error) { return agent, nil },
		DiskSize: ext4.MinSize,
		Progress: log.add,
	}, log
}

// kernelFor returns a stand-in kernel: for arm64 a valid Image header
// wrapped like Alpine's (EFI zboot, gzip payload), for amd64 opaque bytes.
func kernelFor(t testing.TB, arch string) (packed, booted []byte) {
	image := bytes.Repeat([]byte("kernel!!"), 2048)
	if arch != "arm64" {
		return image, image
	}
	copy(image[56:], "ARM\x64")
	return zboot(t, "gzip", gzipBytes(t, image)), image
}

// zboot wraps a compressed Image the way CONFIG_EFI_ZBOOT does.
func zboot(t testing.TB, method string, payload []byte) []byte {
	hdr := make([]byte, 512)
	copy(hdr, "MZ")
	copy(hdr[4:], "zimg")
	binary.LittleEndian.PutUint32(hdr[8:], uint32(len(hdr)))
	binary.LittleEndian.PutUint32(hdr[12:], uint32(len(payload)))
	copy(hdr[24:], method)
	return append(append(hdr, payload...), make([]byte, 64)...) // trailing PE sections
}

func gzipBytes(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	gz.Write(b)
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// artifacts serves files over loopback HTTP; it returns the base URL.
func artifacts(t testing.TB, files map[string][]byte) (*provisiontest.Server, string) {
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := provisiontest.Files(t, dir)
	return srv, srv.URL + "/"
}

// rawKernel serves a kernel for arch and returns its artifact.
func rawKernel(t testing.TB, arch string) (provision.Artifact, *provisiontest.Server) {
	k, _ := kernelFor(t, arch)
	srv, base := artifacts(t, map[string][]byte{"vmlinuz": k})
	return provision.Artifact{URL: base + "vmlinuz", SHA256: sha(k), Format: provision.FormatRaw}, srv
}

// mustDisk asserts the files of a root disk: want maps a path to its
// content, or to "" for a file that must be absent.
func mustDisk(t testing.TB, disk string, want map[string]string) {
	t.Helper()
	for p, content := range want {
		got, ok := provisiontest.DiskFile(t, disk, p)
		switch {
		case content == "" && ok:
			t.Errorf("%s: present on the disk, want it absent", p)
		case content != "" && !ok:
			t.Errorf("%s: missing from the disk", p)
		case content != "" && got != content:
			t.Errorf("%s = %q, want %q", p, got, content)
		}
	}
}
