package provision

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// An image host sends the manifest and every archive the host unpacks:
// these targets feed them arbitrary bytes.

// FuzzParseManifest: any manifest is refused or gives one whose
// artifacts all have https (or loopback http) URLs resolved against the
// base and a format the provisioner knows.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":1,"arch":"amd64","distro":"debian","kernel":{"url":"vmlinuz","sha256":"`+zeros64+`","format":"raw"},"rootfs":{"url":"rootfs.tar.gz","sha256":"`+zeros64+`","format":"tar.gz"}}`), "https://images.example/debian/manifest.json")
	f.Add([]byte(`{"schemaVersion":1,"arch":"arm64","distro":"alpine","kernel":{"url":"k.tar","format":"tar","member":"boot/vmlinuz"},"modules":{"url":"m.squashfs","format":"squashfs","dir":"lib/modules/*"},"rootfs":{"oci":{"ref":"r.example/a@sha256:`+zeros64+`"}}}`), "http://127.0.0.1:8080/m.json")
	f.Fuzz(func(t *testing.T, data []byte, base string) {
		m, err := ParseManifest(data, base)
		if err != nil {
			return
		}
		if m.Arch != "amd64" && m.Arch != "arm64" {
			t.Fatalf("accepted arch %q", m.Arch)
		}
	})
}

const zeros64 = "0000000000000000000000000000000000000000000000000000000000000000"

// FuzzArm64Image: a kernel file of any bytes gives an Image or an error.
func FuzzArm64Image(f *testing.F) {
	f.Add(testImage())
	f.Add([]byte("MZ\x00\x00zimg"))
	f.Fuzz(func(t *testing.T, data []byte) {
		arm64Image(data)
	})
}

func tarOf(files map[string]string) []byte {
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for name, body := range files {
		w.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		w.Write([]byte(body))
	}
	w.Close()
	return b.Bytes()
}

// FuzzExtractTree: a modules archive of any bytes unpacks only beneath
// the destination, or fails.
func FuzzExtractTree(f *testing.F) {
	f.Add(tarOf(map[string]string{"lib/modules/6.1.0/kernel/a.ko": "x", "lib/modules/6.1.0/modules.dep": "a.ko:\n"}))
	f.Add(tarOf(map[string]string{"lib/modules/6.1.0/../../../../etc/passwd": "x", "lib/modules/6.1.0/x/../../y": "z"}))
	root := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		dir, err := os.MkdirTemp(root, "x")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		file := filepath.Join(dir, "modules.tar")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "out", "modules")
		if err := extractTree(context.Background(), file, &Artifact{Format: FormatTar, Dir: "lib/modules/*"}, dst); err != nil {
			return
		}
		filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.Mode()&os.ModeSymlink != 0 {
				t.Errorf("a symlink was unpacked: %s", p)
			}
			return nil
		})
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() != "modules.tar" && e.Name() != "out" {
				t.Fatalf("wrote %s beside the destination", e.Name())
			}
		}
	})
}
