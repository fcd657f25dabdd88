package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// readICNS splits an icns file into its entries, checking every length.
func readICNS(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	if len(b) < 8 || string(b[:4]) != "icns" || int(binary.BigEndian.Uint32(b[4:8])) != len(b) {
		t.Fatalf("bad icns header: % x", b[:min(8, len(b))])
	}
	entries := map[string][]byte{}
	for rest := b[8:]; len(rest) > 0; {
		if len(rest) < 8 {
			t.Fatalf("truncated entry header")
		}
		n := int(binary.BigEndian.Uint32(rest[4:8]))
		if n < 8 || n > len(rest) {
			t.Fatalf("entry %q: length %d of %d left", rest[:4], n, len(rest))
		}
		entries[string(rest[:4])] = rest[8:n]
		rest = rest[n:]
	}
	return entries
}

func TestWriteICNS(t *testing.T) {
	src, err := readPNG("../../assets/AppIcon.png")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteICNS(&buf, src); err != nil {
		t.Fatal(err)
	}
	entries := readICNS(t, buf.Bytes())
	if len(entries) != len(icnsEntries) {
		t.Errorf("%d entries, want %d", len(entries), len(icnsEntries))
	}
	for _, e := range icnsEntries {
		img, err := png.Decode(bytes.NewReader(entries[e.typ]))
		if err != nil {
			t.Fatalf("%s: %v", e.typ, err)
		}
		if b := img.Bounds(); b.Dx() != e.size || b.Dy() != e.size {
			t.Errorf("%s: %v, want %d px", e.typ, b, e.size)
		}
		// Corners are transparent, the middle of the tile opaque.
		if _, _, _, a := img.At(0, 0).RGBA(); a != 0 {
			t.Errorf("%s: corner alpha %d, want 0", e.typ, a)
		}
		if _, _, _, a := img.At(e.size/2, e.size/4).RGBA(); a != 0xffff {
			t.Errorf("%s: centre alpha %d, want opaque", e.typ, a)
		}
	}
}

func TestWriteICNSRejectsWrongSize(t *testing.T) {
	err := WriteICNS(&bytes.Buffer{}, image.NewRGBA(image.Rect(0, 0, 512, 512)))
	if !errors.Is(err, ErrIconSize) {
		t.Fatalf("err = %v, want ErrIconSize", err)
	}
}

// The committed icon is what Draw produces, so `make app` ships the
// drawing in this file.
func TestCommittedIconIsCurrent(t *testing.T) {
	committed, err := os.ReadFile("../../assets/AppIcon.png")
	if err != nil {
		t.Fatalf("%v (regenerate: go run ./scripts/appicon -png assets/AppIcon.png)", err)
	}
	out := filepath.Join(t.TempDir(), "icon.png")
	if err := run(out, "", nil); err != nil {
		t.Fatal(err)
	}
	fresh, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, fresh) {
		t.Error("assets/AppIcon.png is stale: go run ./scripts/appicon -png assets/AppIcon.png")
	}
	icns := filepath.Join(t.TempDir(), "AppIcon.icns")
	if err := run("", icns, []string{"../../assets/AppIcon.png"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(icns)
	if err != nil {
		t.Fatal(err)
	}
	readICNS(t, b)
}
