package download

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestPinsRecordAndGet(t *testing.T) {
	p := &Pins{Path: filepath.Join(t.TempDir(), "state", "pins.json")}
	const u = "https://example.invalid/rootfs.tar.xz"
	a, b := digest([]byte("a")), digest([]byte("b"))

	if _, ok, err := p.Get(u); err != nil || ok {
		t.Fatalf("Get on missing file = %v, %v; want not found", ok, err)
	}
	if err := p.Record(u, strings.ToUpper(a)); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := p.Get(u); err != nil || !ok || got != a {
		t.Fatalf("Get = %q, %v, %v; want %q", got, ok, err, a)
	}
	if err := p.Record(u, a); err != nil {
		t.Fatalf("recording the same pin again: %v", err)
	}
	err := p.Record(u, b)
	if !errors.Is(err, ErrPinConflict) || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
		t.Fatalf("changing a pin: err = %v, want ErrPinConflict naming both digests", err)
	}
	if err := p.Record(u, "not-a-digest"); err == nil {
		t.Fatal("recorded an invalid digest")
	}
	// The file is plain JSON other tools (and people) can read.
	data, err := os.ReadFile(p.Path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil || len(m) != 1 || m[u] != a {
		t.Fatalf("pins file = %s (%v)", data, err)
	}
}

func TestPinsConcurrentRecords(t *testing.T) {
	p := &Pins{Path: filepath.Join(t.TempDir(), "pins.json")}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if err := p.Record(string(rune('a'+i)), digest([]byte{byte(i)})); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range 8 {
		if got, ok, _ := p.Get(string(rune('a' + i))); !ok || got != digest([]byte{byte(i)}) {
			t.Errorf("pin %d lost", i)
		}
	}
}

func TestDamagedPinsFailClosed(t *testing.T) {
	p := &Pins{Path: filepath.Join(t.TempDir(), "pins.json")}
	if err := os.WriteFile(p.Path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Get("u"); err == nil {
		t.Fatal("Get on a damaged pins file succeeded")
	}
	if _, err := ExpectedDigest(context.Background(), nil, p, "http://127.0.0.1:1/x", "", "http://127.0.0.1:1/SUMS"); err == nil {
		t.Fatal("ExpectedDigest ignored a damaged pins file")
	}
}

func TestExpectedDigestOrder(t *testing.T) {
	explicit, pinned, listed := digest([]byte("e")), digest([]byte("p")), digest([]byte("l"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(listed + "  disk.img\n"))
	}))
	defer srv.Close()
	const art = "https://example.invalid/v1/disk.img?sig=1"
	pins := &Pins{Path: filepath.Join(t.TempDir(), "pins.json")}
	if err := pins.Record("https://example.invalid/pinned.img", pinned); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, url, sha, checksumURL, want string
		wantErr                           error
	}{
		{"explicit wins", "https://example.invalid/pinned.img", explicit, srv.URL, explicit, nil},
		{"pin before checksum file", "https://example.invalid/pinned.img", "", srv.URL, pinned, nil},
		// The pin answers offline: the checksum URL is unreachable.
		{"pin needs no network", "https://example.invalid/pinned.img", "", "http://127.0.0.1:1/SUMS", pinned, nil},
		{"checksum file", art, "", srv.URL + "/SHA256SUMS", listed, nil},
		{"nothing", art, "", "", "", ErrUnpinned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ExpectedDigest(context.Background(), &Client{}, pins, tc.url, tc.sha, tc.checksumURL)
			if !errors.Is(err, tc.wantErr) || got != tc.want {
				t.Fatalf("got %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "sha256") {
				t.Fatalf("message %q does not say how to pin", err)
			}
		})
	}
}

// upstream serves one file and its sha256sum listing, and can change both.
type upstream struct {
	mu   sync.Mutex
	data []byte
}

func (u *upstream) set(b []byte) { u.mu.Lock(); u.data = b; u.mu.Unlock() }

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	data := u.data
	u.mu.Unlock()
	switch r.URL.Path {
	case "/rootfs.tar.xz":
		w.Write(data)
	case "/SHA256SUMS":
		w.Write([]byte(digest(data) + " *rootfs.tar.xz\n"))
	default:
		http.NotFound(w, r)
	}
}

func TestPinEnforcedAfterFirstDownload(t *testing.T) {
	up := &upstream{data: payload(100 << 10)}
	first := up.data
	srv := httptest.NewServer(up)
	defer srv.Close()
	dir := t.TempDir()
	pins := &Pins{Path: filepath.Join(dir, "pins.json")}
	c := &Client{}
	art, sums := srv.URL+"/rootfs.tar.xz", srv.URL+"/SHA256SUMS"
	dest := filepath.Join(dir, "rootfs.tar.xz")

	// What a provisioner does for an artifact without a sha256.
	provision := func() (string, error) {
		want, err := ExpectedDigest(context.Background(), c, pins, art, "", sums)
		if err != nil {
			return "", err
		}
		sum, err := c.Fetch(context.Background(), Request{URL: art, SHA256: want, Dest: dest}, nil)
		if err != nil {
			return "", err
		}
		return sum, pins.Record(art, sum)
	}

	if _, err := provision(); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := pins.Get(art); !ok || got != digest(first) {
		t.Fatalf("pin after first download = %q, %v; want %s", got, ok, digest(first))
	}

	// Upstream now publishes a different file with a matching checksum
	// file; the pin must still refuse it.
	up.set(payload(99 << 10))
	if err := os.Remove(dest); err != nil {
		t.Fatal(err)
	}
	_, err := provision()
	var ce *ChecksumError
	if !errors.As(err, &ce) || ce.Expected != digest(first) || ce.Actual != digest(up.data) {
		t.Fatalf("changed upstream: err = %v, want a mismatch against the pin", err)
	}
	assertAbsent(t, dest, dest+PartialSuffix)
}
