package squashfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"

	"github.com/ulikunitz/xz/lzma"
)

// xz filter ids (.xz file format, section 5.3).
const (
	filterX86      = 0x04
	filterARM      = 0x07
	filterARMThumb = 0x08
	filterLZMA2    = 0x21
)

var xzMagic = []byte{0xFD, '7', 'z', 'X', 'Z', 0}

var crc64Table = crc64.MakeTable(crc64.ECMA)

// unxz decodes the single .xz stream mksquashfs writes for a block: one or
// more blocks whose filter chain is LZMA2, optionally preceded by BCJ
// filters. Each block's integrity check is verified; the index and footer
// are not needed for that and are not read.
func unxz(src []byte, limit int) ([]byte, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: xz: %s", ErrFormat, fmt.Sprintf(format, a...))
	}
	if len(src) < 12 || !bytes.Equal(src[:6], xzMagic) {
		return nil, bad("not an xz stream")
	}
	if crc32.ChecksumIEEE(src[6:8]) != binary.LittleEndian.Uint32(src[8:12]) {
		return nil, bad("stream header checksum mismatch")
	}
	if src[6] != 0 || src[7] > 0x0F {
		return nil, bad("reserved stream flags set")
	}
	check := src[7]
	pos := 12
	var out []byte
	for {
		if pos >= len(src) {
			return nil, bad("truncated")
		}
		if src[pos] == 0 { // the index follows: no more blocks
			return out, nil
		}
		hsize := (int(src[pos]) + 1) * 4
		if pos+hsize > len(src) {
			return nil, bad("truncated block header")
		}
		hdr := src[pos : pos+hsize]
		if crc32.ChecksumIEEE(hdr[:hsize-4]) != binary.LittleEndian.Uint32(hdr[hsize-4:]) {
			return nil, bad("block header checksum mismatch")
		}
		filters, compSize, uncompSize, err := parseBlockHeader(hdr[1 : hsize-4])
		if err != nil {
			return nil, bad("%v", err)
		}
		pos += hsize

		last := filters[len(filters)-1]
		if last.id != filterLZMA2 || len(last.props) != 1 {
			return nil, fmt.Errorf("%w: xz filter chain must end in LZMA2", ErrUnsupported)
		}
		dictCap, err := lzma2DictSize(last.props[0])
		if err != nil {
			return nil, bad("%v", err)
		}
		body := bytes.NewReader(src[pos:])
		lr, err := lzma.Reader2Config{DictCap: max(dictCap, lzma.MinDictCap)}.NewReader2(body)
		if err != nil {
			return nil, bad("%v", err)
		}
		data, err := io.ReadAll(io.LimitReader(lr, int64(limit-len(out))+1))
		if err != nil {
			return nil, bad("lzma2: %v", err)
		}
		if len(out)+len(data) > limit {
			return nil, bad("block decompresses to more than %d bytes", limit)
		}
		used := len(src[pos:]) - body.Len()
		if compSize >= 0 && int64(used) != compSize {
			return nil, bad("compressed size %d, header says %d", used, compSize)
		}
		if uncompSize >= 0 && int64(len(data)) != uncompSize {
			return nil, bad("uncompressed size %d, header says %d", len(data), uncompSize)
		}
		// Encoding ran the filters first to last; decoding undoes them in
		// reverse, after LZMA2.
		for i := len(filters) - 2; i >= 0; i-- {
			if err := unfilter(filters[i], data); err != nil {
				return nil, err
			}
		}
		pos += used
		for pos%4 != 0 {
			if pos >= len(src) || src[pos] != 0 {
				return nil, bad("bad block padding")
			}
			pos++
		}
		n := checkSize(check)
		if pos+n > len(src) {
			return nil, bad("truncated check")
		}
		if h := checkHash(check); h != nil {
			h.Write(data)
			if !bytes.Equal(checkSum(check, h), src[pos:pos+n]) {
				return nil, bad("block data fails its integrity check")
			}
		}
		pos += n
		out = append(out, data...)
	}
}

type xzFilter struct {
	id    uint64
	props []byte
}

// parseBlockHeader reads the block flags and filter list (the header
// without its size byte and CRC32). Absent sizes are -1.
func parseBlockHeader(b []byte) (filters []xzFilter, compSize, uncompSize int64, err error) {
	if len(b) < 1 {
		return nil, 0, 0, fmt.Errorf("empty block header")
	}
	flags := b[0]
	if flags&0x3C != 0 {
		return nil, 0, 0, fmt.Errorf("reserved block flags set")
	}
	r := bytes.NewReader(b[1:])
	compSize, uncompSize = -1, -1
	if flags&0x40 != 0 {
		v, err := binary.ReadUvarint(r)
		if err != nil || v == 0 || v > 1<<40 {
			return nil, 0, 0, fmt.Errorf("bad compressed size")
		}
		compSize = int64(v)
	}
	if flags&0x80 != 0 {
		v, err := binary.ReadUvarint(r)
		if err != nil || v > 1<<40 {
			return nil, 0, 0, fmt.Errorf("bad uncompressed size")
		}
		uncompSize = int64(v)
	}
	filters = make([]xzFilter, int(flags&3)+1)
	for i := range filters {
		id, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("bad filter id")
		}
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return nil, 0, 0, fmt.Errorf("bad filter properties size")
		}
		props := make([]byte, n)
		if _, err := io.ReadFull(r, props); err != nil {
			return nil, 0, 0, err
		}
		filters[i] = xzFilter{id: id, props: props}
	}
	for r.Len() > 0 {
		if c, _ := r.ReadByte(); c != 0 {
			return nil, 0, 0, fmt.Errorf("non-zero block header padding")
		}
	}
	return filters, compSize, uncompSize, nil
}

// lzma2DictSize decodes the LZMA2 property byte (.xz format, 5.3.1).
func lzma2DictSize(p byte) (int, error) {
	bits := int(p & 0x3F)
	if p&0xC0 != 0 || bits > 40 {
		return 0, fmt.Errorf("bad LZMA2 dictionary size %#x", p)
	}
	if bits == 40 {
		return int(lzma.MaxDictCap), nil
	}
	return min((2|bits&1)<<(bits/2+11), int(lzma.MaxDictCap)), nil
}

func unfilter(f xzFilter, data []byte) error {
	var bcj func([]byte, uint32)
	switch f.id {
	case filterX86:
		bcj = unBCJX86
	case filterARM:
		bcj = unBCJARM
	case filterARMThumb:
		bcj = unBCJARMThumb
	default:
		return fmt.Errorf("%w: xz filter %#x", ErrUnsupported, f.id)
	}
	var start uint32
	switch len(f.props) {
	case 0:
	case 4:
		start = binary.LittleEndian.Uint32(f.props)
	default:
		return fmt.Errorf("%w: xz: BCJ filter with %d property bytes", ErrFormat, len(f.props))
	}
	bcj(data, start)
	return nil
}

func checkSize(id byte) int {
	if id == 0 {
		return 0
	}
	return 4 << ((id - 1) / 3) // 1-3: 4, 4-6: 8, 7-9: 16, 10-12: 32, 13-15: 64
}

// checkHash returns the hash for a check id, or nil for none or one this
// reader does not know (whose bytes are then skipped).
func checkHash(id byte) hash.Hash {
	switch id {
	case 0x01:
		return crc32.NewIEEE()
	case 0x04:
		return crc64.New(crc64Table)
	case 0x0A:
		return sha256.New()
	}
	return nil
}

// checkSum encodes h's sum as the xz check field: CRCs little-endian.
func checkSum(id byte, h hash.Hash) []byte {
	switch id {
	case 0x01:
		return binary.LittleEndian.AppendUint32(nil, h.(hash.Hash32).Sum32())
	case 0x04:
		return binary.LittleEndian.AppendUint64(nil, h.(hash.Hash64).Sum64())
	}
	return h.Sum(nil)
}
