package provision

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The guest's tar of its package cache is hostile input: only plain
// regular files the area keeps may land in the host's cache, and a
// restore gives the guest a flat tar of exactly those.
func TestPackageCacheTar(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h tar.Header, data string) {
		h.Size = int64(len(data))
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(data))
	}
	keep := []string{"jq_1.6-2.1_amd64.deb", "libonig5_6.9.8-1_amd64.deb", "python3_3.11.2-1%2bb1_amd64.deb"}
	for _, n := range keep {
		add(tar.Header{Name: "./" + n}, "deb "+n)
	}
	add(tar.Header{Name: "./partial", Typeflag: tar.TypeDir}, "")
	add(tar.Header{Name: "./lock"}, "")
	add(tar.Header{Name: "./partial/half.deb"}, "half")
	add(tar.Header{Name: "../escape.deb"}, "x")
	add(tar.Header{Name: "/etc/evil.deb"}, "x")
	add(tar.Header{Name: "./.hidden.deb"}, "x")
	add(tar.Header{Name: "./link.deb", Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow"}, "")
	add(tar.Header{Name: "./notes.txt"}, "not a package")
	tw.Close()

	area := cacheAreas("apt")[0]
	dir := t.TempDir()
	if err := readCacheTar(&buf, dir, area.keep); err != nil {
		t.Fatal(err)
	}
	got, err := cachedFiles(dir, area.keep)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(keep))
	if !slices.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape.deb")); err == nil {
		t.Fatal("a ../ name escaped the cache folder")
	}

	// The restore tar holds the same files, flat.
	var out bytes.Buffer
	if err := writeCacheTar(&out, dir, got); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&out)
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Typeflag != tar.TypeReg || h.Uid != 0 || h.Mode != 0o644 {
			t.Errorf("restore entry %+v", h)
		}
		names = append(names, h.Name)
	}
	if !slices.Equal(names, want) {
		t.Fatalf("restore tar %v, want %v", names, want)
	}
}

func TestPackageCacheLimits(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "big.deb", Typeflag: tar.TypeReg, Size: maxCacheFile + 1})
	if err := readCacheTar(bytes.NewReader(buf.Bytes()), t.TempDir(), cacheAreas("apt")[0].keep); err == nil {
		t.Fatal("a file over the limit was taken")
	}
}

func TestManifestPackages(t *testing.T) {
	base := func() *Manifest {
		m, _, err := BuiltinManifestFor(BuiltinAlpine, "amd64")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := base(); m.Validate() != nil || !slices.Contains(m.Packages, "ripgrep") || !slices.Contains(m.Packages, "py3-pip") {
		t.Fatalf("built-in alpine packages %v: %v", m.Packages, m.Validate())
	}
	tests := []struct {
		pkgs []string
		ok   bool
	}{
		{[]string{"jq", "curl=8.5.0-r0"}, true},
		{[]string{"--allow-untrusted"}, false},
		{[]string{"jq; rm -rf /"}, false},
		{[]string{"pkg-"}, false},
		{[]string{""}, false},
	}
	for _, tt := range tests {
		m := base()
		m.Packages = tt.pkgs
		if err := m.Validate(); (err == nil) != tt.ok {
			t.Errorf("packages %q: %v, want ok %v", tt.pkgs, err, tt.ok)
		}
	}
	m := base()
	m.Packages = make([]string, MaxManifestPackages+1)
	for i := range m.Packages {
		m.Packages[i] = "jq"
	}
	if m.Validate() == nil {
		t.Error("a list over the limit was accepted")
	}
}
