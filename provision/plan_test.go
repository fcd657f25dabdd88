package provision

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// The first-run view lists each distinct file once with the size its
// server gives; a manifest's relative URLs resolve against it.
func TestResolveManifestAndDownloads(t *testing.T) {
	files := map[string]string{"/netboot.tar.gz": strings.Repeat("k", 3000), "/rootfs.tar.gz": strings.Repeat("r", 500)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/m.json" {
			w.Write([]byte(`{"schemaVersion":1,"arch":"amd64","distro":"alpine",
				"kernel":{"url":"netboot.tar.gz","sha256":"` + strings.Repeat("a", 64) + `","format":"tar.gz","member":"boot/vmlinuz-virt"},
				"modules":{"url":"netboot.tar.gz","sha256":"` + strings.Repeat("a", 64) + `","format":"tar.gz","member":"boot/modloop-virt","memberFormat":"squashfs","dir":"modules/*-virt"},
				"rootfs":{"url":"rootfs.tar.gz","sha256":"` + strings.Repeat("b", 64) + `","format":"tar.gz"}}`))
			return
		}
		body, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		// As file servers do (above 2 KiB Go's would send it chunked).
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write([]byte(body))
	}))
	defer srv.Close()
	ctx := context.Background()
	m, err := ResolveManifest(ctx, srv.Client(), srv.URL+"/m.json")
	if err != nil {
		t.Fatal(err)
	}
	got := Downloads(ctx, srv.Client(), m)
	want := []Download{{srv.URL + "/netboot.tar.gz", 3000}, {srv.URL + "/rootfs.tar.gz", 500}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("downloads %+v, want %+v", got, want)
	}
	if _, err := ResolveManifest(ctx, srv.Client(), srv.URL+"/missing.json"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a missing manifest: %v", err)
	}
	if m, err := ResolveManifest(ctx, nil, BuiltinAlpine); err != nil || m.Distro != "alpine" {
		t.Fatalf("built-in: %v %v", m, err)
	}
}
