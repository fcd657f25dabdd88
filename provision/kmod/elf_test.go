package kmod

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// fakeModule builds the smallest ELF64 relocatable object debug/elf accepts
// with a .modinfo section holding the given NUL-separated key=value records.
func fakeModule(t testing.TB, records ...string) []byte {
	t.Helper()
	var modinfo []byte
	for _, r := range records {
		modinfo = append(modinfo, r...)
		modinfo = append(modinfo, 0)
	}
	shstrtab := []byte("\x00.modinfo\x00.shstrtab\x00")

	const ehsize, shentsize = 64, 64
	modinfoOff := uint64(ehsize)
	shstrOff := modinfoOff + uint64(len(modinfo))
	shoff := (shstrOff + uint64(len(shstrtab)) + 7) &^ 7

	le := binary.LittleEndian
	var b bytes.Buffer
	hdr := elf.Header64{
		Type:      uint16(elf.ET_REL),
		Machine:   uint16(elf.EM_X86_64),
		Version:   uint32(elf.EV_CURRENT),
		Shoff:     shoff,
		Ehsize:    ehsize,
		Shentsize: shentsize,
		Shnum:     3,
		Shstrndx:  2,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	if err := binary.Write(&b, le, hdr); err != nil {
		t.Fatal(err)
	}
	b.Write(modinfo)
	b.Write(shstrtab)
	b.Write(make([]byte, shoff-uint64(b.Len())))
	sections := []elf.Section64{
		{}, // the mandatory null section
		{Name: 1, Type: uint32(elf.SHT_PROGBITS), Flags: uint64(elf.SHF_ALLOC), Off: modinfoOff, Size: uint64(len(modinfo)), Addralign: 1},
		{Name: 10, Type: uint32(elf.SHT_STRTAB), Off: shstrOff, Size: uint64(len(shstrtab)), Addralign: 1},
	}
	for _, s := range sections {
		if err := binary.Write(&b, le, s); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func compressXZ(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	// The settings the kernel's build uses for .ko.xz (see scripts/Makefile.modinst).
	w, err := xz.WriterConfig{DictCap: 1 << 20, CheckSum: xz.CRC32}.NewWriter(&out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func compressZstd(t testing.TB, b []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

func compressGzip(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestFakeModuleParses(t *testing.T) {
	mi, err := parseModinfo(fakeModule(t, "license=GPL", "depends=a,b-c", "name=x"))
	if err != nil {
		t.Fatal(err)
	}
	if mi.name != "x" || len(mi.depends) != 2 || mi.depends[0] != "a" || mi.depends[1] != "b_c" {
		t.Fatalf("got %+v", mi)
	}
}
