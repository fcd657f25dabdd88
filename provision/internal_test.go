package provision

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func testImage() []byte {
	img := bytes.Repeat([]byte("arm64 kernel text "), 500)
	copy(img[56:], "ARM\x64")
	return img
}

func zbootImage(method string, payload []byte) []byte {
	hdr := make([]byte, 256)
	copy(hdr, "MZ")
	copy(hdr[4:], "zimg")
	binary.LittleEndian.PutUint32(hdr[8:], uint32(len(hdr)))
	binary.LittleEndian.PutUint32(hdr[12:], uint32(len(payload)))
	copy(hdr[24:], method)
	// The zstd method appends the size after the payload; the header's
	// size leaves it out.
	return append(append(hdr, payload...), 0x11, 0x22, 0x33, 0x44)
}

func TestArm64Image(t *testing.T) {
	img := testImage()
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(img)
	w.Close()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	zst := enc.EncodeAll(img, nil)
	enc.Close()

	tests := []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"raw Image", img, true},
		{"Image.gz", gz.Bytes(), true},
		{"EFI zboot gzip (Alpine virt)", zbootImage("gzip", gz.Bytes()), true},
		{"EFI zboot zstd", zbootImage("zstd22", zst), true},
		{"EFI zboot lzma", zbootImage("lzma", []byte("whatever")), false},
		{"x86 bzImage", bytes.Repeat([]byte("bzImage "), 1000), false},
		{"gzip of something else", func() []byte {
			var b bytes.Buffer
			w := gzip.NewWriter(&b)
			w.Write(bytes.Repeat([]byte("x"), 5000))
			w.Close()
			return b.Bytes()
		}(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := arm64Image(tt.in)
			if !tt.ok {
				if !errors.Is(err, ErrNotArm64Image) {
					t.Fatalf("got %v, want ErrNotArm64Image", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, img) {
				t.Fatalf("unpacked %d bytes, want the %d-byte Image", len(got), len(img))
			}
		})
	}
}

type recordingTransport struct{ got []string }

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.got = append(r.got, req.URL.String())
	if req.URL.Host == "10.9.8.7:5000" {
		return nil, errors.New("connection refused")
	}
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
}

func TestRegistryTransportKeepsHTTPSBeyondLoopback(t *testing.T) {
	tests := []struct{ in, sent string }{
		{"http://127.0.0.1:5000/v2/", "http://127.0.0.1:5000/v2/"},
		{"http://localhost:5000/v2/", "http://localhost:5000/v2/"},
		{"http://[::1]:5000/v2/", "http://[::1]:5000/v2/"},
		// go-containerregistry picks plain HTTP for these by itself.
		{"http://192.168.1.20:5000/v2/x/blobs/sha256:ab", "https://192.168.1.20:5000/v2/x/blobs/sha256:ab"},
		{"http://registry.local/v2/", "https://registry.local/v2/"},
		{"http://cdn.example.com/blob", "https://cdn.example.com/blob"},
		{"https://ghcr.io/v2/", "https://ghcr.io/v2/"},
	}
	for _, tt := range tests {
		rec := &recordingTransport{}
		req, _ := http.NewRequest(http.MethodGet, tt.in, nil)
		resp, err := (&registryTransport{base: rec}).RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		resp.Body.Close()
		if len(rec.got) != 1 || rec.got[0] != tt.sent {
			t.Errorf("%s: sent %v, want %s", tt.in, rec.got, tt.sent)
		}
		if req.URL.String() != tt.in {
			t.Errorf("%s: the caller's request was modified to %s", tt.in, req.URL)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, "http://10.9.8.7:5000/v2/", nil)
	_, err := (&registryTransport{base: &recordingTransport{}}).RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "only for loopback") {
		t.Errorf("failed upgrade: got %v, want an error explaining the HTTPS rule", err)
	}
}

func TestValidate(t *testing.T) {
	sum := strings.Repeat("a", 64)
	kernel := Artifact{URL: "https://x/k", SHA256: sum, Format: FormatRaw}
	rootfs := Artifact{URL: "https://x/r.tar.gz", SHA256: sum, Format: FormatTarGz}
	digestRef := "ghcr.io/o/r@sha256:" + sum
	base := func() *Manifest {
		return &Manifest{SchemaVersion: 1, Arch: "amd64", Distro: "alpine", Kernel: kernel, Rootfs: rootfs}
	}
	tests := []struct {
		name   string
		edit   func(m *Manifest)
		errSub string // "" means valid
	}{
		{"tarball rootfs", func(*Manifest) {}, ""},
		{"oci rootfs", func(m *Manifest) { m.Rootfs = Artifact{Format: FormatOCI, OCI: &OCIImage{Ref: digestRef}} }, ""},
		{"oci tag", func(m *Manifest) { m.Rootfs = Artifact{Format: FormatOCI, OCI: &OCIImage{Ref: "ghcr.io/o/r:1"}} }, "not pinned"},
		{"oci without ref", func(m *Manifest) { m.Rootfs = Artifact{Format: FormatOCI} }, "rootfs.oci.ref: required"},
		{"oci with url", func(m *Manifest) {
			m.Rootfs = Artifact{Format: FormatOCI, URL: "https://x", OCI: &OCIImage{Ref: digestRef}}
		}, "instead of url"},
		{"oci kernel", func(m *Manifest) { m.Kernel = Artifact{Format: FormatOCI, OCI: &OCIImage{Ref: digestRef}} }, "kernel.format"},
		{"oci on a tarball", func(m *Manifest) { m.Rootfs.OCI = &OCIImage{Ref: digestRef} }, "only for format oci"},
		{"squashfs member modules", func(m *Manifest) {
			m.Modules = &Artifact{URL: "https://x/n.tar.gz", ChecksumURL: "https://x/n.tar.gz.sha256", Format: FormatTarGz,
				Member: "boot/modloop-virt", MemberFormat: FormatSquashfs, Dir: "modules/*-virt"}
		}, ""},
		{"bare squashfs modules", func(m *Manifest) {
			m.Modules = &Artifact{URL: "https://x/modloop", SHA256: sum, Format: FormatSquashfs, Dir: "modules/[0-9]*"}
		}, ""},
		{"squashfs member of a raw file", func(m *Manifest) {
			m.Modules = &Artifact{URL: "https://x/m", SHA256: sum, Format: FormatRaw, Member: "m", MemberFormat: FormatSquashfs, Dir: "d"}
		}, "modules.format"},
		{"member without memberFormat", func(m *Manifest) {
			m.Modules = &Artifact{URL: "https://x/m.tar", SHA256: sum, Format: FormatTar, Member: "m", Dir: "d"}
		}, "only with memberFormat"},
		{"modules without dir", func(m *Manifest) {
			m.Modules = &Artifact{URL: "https://x/m.tar", SHA256: sum, Format: FormatTar}
		}, "modules.dir: required"},
		{"bad dir pattern", func(m *Manifest) {
			m.Modules = &Artifact{URL: "https://x/m.tar", SHA256: sum, Format: FormatTar, Dir: "lib/modules/["}
		}, "syntax error"},
		{"dir escaping", func(m *Manifest) {
			m.Modules = &Artifact{URL: "https://x/m.tar", SHA256: sum, Format: FormatTar, Dir: "../x"}
		}, "not a path inside"},
		{"unpinned url", func(m *Manifest) { m.Rootfs.SHA256 = "" }, "sha256 or checksumUrl required"},
		{"kernel tar without member", func(m *Manifest) { m.Kernel.Format = FormatTarGz }, "kernel.member"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			tt.edit(m)
			err := m.Validate()
			switch {
			case tt.errSub == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tt.errSub != "" && (err == nil || !strings.Contains(err.Error(), tt.errSub)):
				t.Fatalf("got %v, want an error containing %q", err, tt.errSub)
			}
		})
	}
}

func TestParseManifestOCI(t *testing.T) {
	sum := strings.Repeat("c", 64)
	doc := `{"schemaVersion":1,"arch":"arm64","distro":"alpine",
	 "kernel":{"url":"k/vmlinuz","sha256":"` + sum + `","format":"raw"},
	 "rootfs":{"oci":{"ref":"127.0.0.1:5000/guest@sha256:` + sum + `"},"format":"oci"}}`
	m, err := ParseManifest([]byte(doc), "http://127.0.0.1:8080/images/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	if m.Kernel.URL != "http://127.0.0.1:8080/images/k/vmlinuz" {
		t.Errorf("kernel url %q", m.Kernel.URL)
	}
	if m.Rootfs.URL != "" || m.Rootfs.OCI == nil || m.Rootfs.OCI.Ref != "127.0.0.1:5000/guest@sha256:"+sum {
		t.Errorf("rootfs %+v", m.Rootfs)
	}
	tagged := strings.Replace(doc, "@sha256:"+sum, ":latest", 1)
	if _, err := ParseManifest([]byte(tagged), "http://127.0.0.1:8080/manifest.json"); !errors.Is(err, ErrImageNotPinned) {
		t.Errorf("tag-only ref: %v, want ErrImageNotPinned", err)
	}
}
