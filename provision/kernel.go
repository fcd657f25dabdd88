package provision

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// ErrNotArm64Image: an arm64 kernel did not unpack to a bootable Image.
var ErrNotArm64Image = agentproto.Class(agentproto.ErrUnsupported, "not an arm64 kernel Image")

// maxKernel bounds a decompressed kernel.
const maxKernel = 256 << 20

// arm64Image returns the uncompressed arm64 Image inside data. Apple's
// Virtualization framework boots only that, while distributions ship it
// gzip'd (Image.gz) or, with CONFIG_EFI_ZBOOT (Alpine's virt kernel among
// them), as an EFI application carrying the compressed Image.
func arm64Image(data []byte) ([]byte, error) {
	var err error
	if payload, method, ok := zbootPayload(data); ok {
		switch method {
		case "gzip":
			data, err = gunzip(payload)
		case "zstd", "zstd22":
			data, err = unzstd(payload)
		default:
			return nil, fmt.Errorf("%w: EFI zboot payload compressed with %q; only gzip and zstd are supported", ErrNotArm64Image, method)
		}
		if err != nil {
			return nil, fmt.Errorf("EFI zboot payload: %w", err)
		}
	} else if len(data) > 2 && data[0] == 0x1f && data[1] == 0x8b {
		if data, err = gunzip(data); err != nil {
			return nil, err
		}
	}
	// The arm64 boot protocol puts "ARM\x64" at offset 56 of every Image.
	if len(data) < 64 || !bytes.Equal(data[56:60], []byte("ARM\x64")) {
		return nil, fmt.Errorf("%w (no ARM\\x64 magic at offset 56)", ErrNotArm64Image)
	}
	return data, nil
}

// zbootPayload finds the compressed Image of an EFI zboot kernel: a PE
// file ("MZ") whose DOS header holds "zimg", the payload's offset and size,
// and the compression method's name.
func zbootPayload(b []byte) (payload []byte, method string, ok bool) {
	if len(b) < 64 || string(b[0:2]) != "MZ" || string(b[4:8]) != "zimg" {
		return nil, "", false
	}
	off := uint64(binary.LittleEndian.Uint32(b[8:12]))
	size := uint64(binary.LittleEndian.Uint32(b[12:16]))
	if off+size > uint64(len(b)) {
		return nil, "", false
	}
	method = string(b[24:56])
	if i := bytes.IndexByte([]byte(method), 0); i >= 0 {
		method = method[:i]
	}
	return b[off : off+size], method, true
}

func gunzip(b []byte) ([]byte, error) {
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	gz.Multistream(false)
	out, err := io.ReadAll(io.LimitReader(gz, maxKernel+1))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	if len(out) > maxKernel {
		return nil, fmt.Errorf("kernel larger than %d bytes", maxKernel)
	}
	return out, nil
}

func unzstd(b []byte) ([]byte, error) {
	d, err := zstd.NewReader(bytes.NewReader(b), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	out, err := io.ReadAll(io.LimitReader(d, maxKernel+1))
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	if len(out) > maxKernel {
		return nil, fmt.Errorf("kernel larger than %d bytes", maxKernel)
	}
	return out, nil
}
