package initramfs

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"
)

// entry is one parsed newc record.
type entry struct {
	Name                 string
	Ino, Mode, UID, GID  uint32
	Nlink, Mtime         uint32
	RdevMajor, RdevMinor uint32
	Data                 string
}

// readNewc parses a whole newc archive independently of the writer,
// checking the format rules the kernel's unpacker relies on.
func readNewc(t testing.TB, b []byte) []entry {
	t.Helper()
	entries, err := parseNewc(b)
	if err != nil {
		t.Fatalf("parse archive: %v", err)
	}
	return entries
}

func parseNewc(b []byte) ([]entry, error) {
	var out []entry
	off := 0
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if off%4 != 0 {
			return nil, fmt.Errorf("header at offset %d is not 4-byte aligned", off)
		}
		if len(b)-off < 110 {
			return nil, fmt.Errorf("truncated header at offset %d", off)
		}
		h := b[off : off+110]
		if string(h[:6]) != "070701" {
			return nil, fmt.Errorf("bad magic %q at offset %d", h[:6], off)
		}
		var f [13]uint32
		for i := range f {
			v, err := strconv.ParseUint(string(h[6+8*i:14+8*i]), 16, 32)
			if err != nil {
				return nil, fmt.Errorf("field %d at offset %d: %w", i, off, err)
			}
			f[i] = uint32(v)
		}
		namesize, filesize := int(f[11]), int(f[6])
		if f[12] != 0 {
			return nil, fmt.Errorf("check field %d, want 0", f[12])
		}
		nameEnd := off + 110 + namesize
		if namesize == 0 || nameEnd > len(b) || b[nameEnd-1] != 0 {
			return nil, fmt.Errorf("bad name at offset %d", off)
		}
		name := string(b[off+110 : nameEnd-1])
		dataOff := align(nameEnd)
		if dataOff+filesize > len(b) {
			return nil, fmt.Errorf("truncated data of %s", name)
		}
		if !allZero(b[nameEnd:dataOff]) {
			return nil, fmt.Errorf("non-zero name padding of %s", name)
		}
		next := align(dataOff + filesize)
		if next > len(b) || !allZero(b[dataOff+filesize:next]) {
			return nil, fmt.Errorf("bad data padding of %s", name)
		}
		if name == "TRAILER!!!" {
			if !allZero(b[next:]) {
				return nil, fmt.Errorf("data after trailer")
			}
			if len(b)%512 != 0 {
				return nil, fmt.Errorf("archive length %d is not a multiple of 512", len(b))
			}
			return out, nil
		}
		out = append(out, entry{
			Name: name, Ino: f[0], Mode: f[1], UID: f[2], GID: f[3], Nlink: f[4], Mtime: f[5],
			RdevMajor: f[9], RdevMinor: f[10], Data: string(b[dataOff : dataOff+filesize]),
		})
		off = next
	}
}

func allZero(b []byte) bool {
	return len(bytes.Trim(b, "\x00")) == 0
}
