// Package squashfs reads SquashFS 4.0 images as an fs.FS: enough to list
// directories and read files, which is what provisioning needs to take the
// kernel modules out of a distribution's module image (Alpine's modloop).
//
// It exists because the Go SquashFS readers at hand decode xz blocks with a
// decoder that knows only the LZMA2 filter, while Alpine builds its modloop
// with mksquashfs -Xbcj (x86, or arm,armthumb), so most of its blocks carry
// a BCJ filter in front of LZMA2. Here xz blocks go through a small decoder
// that applies those filters (see xz.go).
//
// Supported: gzip, xz (LZMA2 with x86, ARM and ARM-Thumb BCJ), lz4 and
// zstd compression; regular files (fragments, sparse blocks), directories
// and symlinks. Extended attributes, ownership and the export table are
// ignored.
package squashfs

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/pierrec/lz4/v4"
)

// ErrFormat: the image is not SquashFS 4.0 or is damaged.
var ErrFormat = errdefs.Class(errdefs.ErrInvalid, "squashfs: invalid image")

// ErrUnsupported: the image uses a feature this reader lacks (a compressor
// such as lzo, or an xz filter other than x86/ARM/ARM-Thumb BCJ).
var ErrUnsupported = errdefs.Class(errdefs.ErrUnsupported, "squashfs: unsupported")

const (
	magic          = 0x73717368 // "hsqs"
	metaBlockSize  = 8192
	noFragment     = 0xFFFFFFFF
	blockUncompBit = 1 << 24
	maxSymlinks    = 40
	fragCacheSize  = 8
)

// Inode types. Directory entries use the basic ones.
const (
	typeDir     = 1
	typeFile    = 2
	typeSymlink = 3
	typeBlkDev  = 4
	typeChrDev  = 5
	typeFifo    = 6
	typeSocket  = 7
	typeExtDir  = 8
	typeExtFile = 9
	typeExtSym  = 10
	typeExtBlk  = 11
	typeExtChr  = 12
	typeExtFifo = 13
	typeExtSock = 14
)

// Compression ids from the superblock.
var compressors = map[uint16]string{1: "gzip", 2: "lzma", 3: "lzo", 4: "xz", 5: "lz4", 6: "zstd"}

type superblock struct {
	Magic             uint32
	Inodes            uint32
	MkfsTime          uint32
	BlockSize         uint32
	Fragments         uint32
	Compression       uint16
	BlockLog          uint16
	Flags             uint16
	IDCount           uint16
	VersionMajor      uint16
	VersionMinor      uint16
	RootInode         uint64
	BytesUsed         uint64
	IDTableStart      uint64
	XattrIDTableStart uint64
	InodeTableStart   uint64
	DirTableStart     uint64
	FragTableStart    uint64
	ExportTableStart  uint64
}

// FS is an open image. It is safe for concurrent use.
type FS struct {
	r          io.ReaderAt
	sb         superblock
	decompress func(src []byte, limit int) ([]byte, error)
	zstd       *zstd.Decoder
	root       *inode

	mu       sync.Mutex
	meta     map[int64]metaBlock
	dirs     map[uint64][]dirent
	frags    []fragEntry
	fragsErr error
	fragsOK  bool
	fragData map[int64][]byte
}

type metaBlock struct {
	data []byte
	next int64 // disk position of the following block
}

type fragEntry struct {
	Start  uint64
	Size   uint32
	Unused uint32
}

type inode struct {
	typ   uint16
	perm  uint16
	mtime uint32

	// directories
	dirBlock  uint32
	dirOffset uint16
	dirSize   uint32 // listing bytes (the on-disk size minus 3)

	// regular files
	size        uint64
	blocksStart uint64
	fragIndex   uint32
	fragOffset  uint32
	blockSizes  []uint32

	target string // symlinks
}

type dirent struct {
	name string
	ref  uint64
	typ  uint16
}

// Open reads the superblock of the image in r and checks it.
func Open(r io.ReaderAt) (*FS, error) {
	f := &FS{r: r, meta: map[int64]metaBlock{}, dirs: map[uint64][]dirent{}, fragData: map[int64][]byte{}}
	buf := make([]byte, binary.Size(superblock{}))
	if _, err := r.ReadAt(buf, 0); err != nil {
		return nil, fmt.Errorf("%w: reading superblock: %v", ErrFormat, err)
	}
	if err := binary.Read(bytes.NewReader(buf), binary.LittleEndian, &f.sb); err != nil {
		return nil, err
	}
	sb := &f.sb
	if sb.Magic != magic {
		return nil, fmt.Errorf("%w: bad magic %#x", ErrFormat, sb.Magic)
	}
	if sb.VersionMajor != 4 || sb.VersionMinor != 0 {
		return nil, fmt.Errorf("%w: version %d.%d, want 4.0", ErrUnsupported, sb.VersionMajor, sb.VersionMinor)
	}
	if sb.BlockLog < 12 || sb.BlockLog > 20 || sb.BlockSize != 1<<sb.BlockLog {
		return nil, fmt.Errorf("%w: block size %d (log %d)", ErrFormat, sb.BlockSize, sb.BlockLog)
	}
	switch sb.Compression {
	case 1:
		f.decompress = inflate
	case 4:
		f.decompress = unxz
	case 5:
		f.decompress = unlz4
	case 6:
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<24))
		if err != nil {
			return nil, err
		}
		f.zstd = d
		f.decompress = func(src []byte, limit int) ([]byte, error) {
			out, err := d.DecodeAll(src, make([]byte, 0, limit))
			if err == nil && len(out) > limit {
				err = fmt.Errorf("%w: zstd block larger than %d bytes", ErrFormat, limit)
			}
			return out, err
		}
	default:
		name := compressors[sb.Compression]
		if name == "" {
			name = fmt.Sprintf("id %d", sb.Compression)
		}
		return nil, fmt.Errorf("%w: %s compression", ErrUnsupported, name)
	}
	root, err := f.inode(sb.RootInode)
	if err != nil {
		return nil, fmt.Errorf("root inode: %w", err)
	}
	if !root.isDir() {
		return nil, fmt.Errorf("%w: root inode is not a directory", ErrFormat)
	}
	f.root = root
	return f, nil
}

// Close releases the decompressor; the io.ReaderAt is the caller's.
func (f *FS) Close() error {
	if f.zstd != nil {
		f.zstd.Close()
	}
	return nil
}

func inflate(src []byte, limit int) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("%w: gzip block: %v", ErrFormat, err)
	}
	defer zr.Close()
	return readLimited(zr, limit)
}

func unlz4(src []byte, limit int) ([]byte, error) {
	dst := make([]byte, limit)
	n, err := lz4.UncompressBlock(src, dst)
	if err != nil {
		return nil, fmt.Errorf("%w: lz4 block: %v", ErrFormat, err)
	}
	return dst[:n], nil
}

func readLimited(r io.Reader, limit int) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w: block decompresses to more than %d bytes", ErrFormat, limit)
	}
	return out, nil
}

func (f *FS) readAt(off int64, n int) ([]byte, error) {
	if off < 0 || uint64(off)+uint64(n) > f.sb.BytesUsed {
		return nil, fmt.Errorf("%w: read of %d bytes at %d beyond the image (%d bytes)", ErrFormat, n, off, f.sb.BytesUsed)
	}
	b := make([]byte, n)
	if _, err := f.r.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("%w: read at %d: %v", ErrFormat, off, err)
	}
	return b, nil
}

// metaBlock returns the decompressed metadata block at disk position pos.
func (f *FS) metaBlock(pos int64) (metaBlock, error) {
	f.mu.Lock()
	mb, ok := f.meta[pos]
	f.mu.Unlock()
	if ok {
		return mb, nil
	}
	hdr, err := f.readAt(pos, 2)
	if err != nil {
		return mb, err
	}
	h := binary.LittleEndian.Uint16(hdr)
	size := int(h & 0x7FFF)
	if size == 0 || size > metaBlockSize {
		return mb, fmt.Errorf("%w: metadata block at %d has size %d", ErrFormat, pos, size)
	}
	raw, err := f.readAt(pos+2, size)
	if err != nil {
		return mb, err
	}
	data := raw
	if h&0x8000 == 0 {
		if data, err = f.decompress(raw, metaBlockSize); err != nil {
			return mb, fmt.Errorf("metadata block at %d: %w", pos, err)
		}
	}
	mb = metaBlock{data: data, next: pos + 2 + int64(size)}
	f.mu.Lock()
	f.meta[pos] = mb
	f.mu.Unlock()
	return mb, nil
}

// metaReader reads a byte stream that continues across metadata blocks.
type metaReader struct {
	f    *FS
	cur  metaBlock
	off  int
	read int // bytes returned so far, bounded against corrupt tables
}

func (f *FS) metaReader(pos int64, off int) (*metaReader, error) {
	mb, err := f.metaBlock(pos)
	if err != nil {
		return nil, err
	}
	if off > len(mb.data) {
		return nil, fmt.Errorf("%w: offset %d beyond metadata block at %d", ErrFormat, off, pos)
	}
	return &metaReader{f: f, cur: mb, off: off}, nil
}

func (m *metaReader) bytes(n int) ([]byte, error) {
	if m.read+n > 1<<28 {
		return nil, fmt.Errorf("%w: metadata runs on too long", ErrFormat)
	}
	out := make([]byte, 0, n)
	for len(out) < n {
		if m.off == len(m.cur.data) {
			mb, err := m.f.metaBlock(m.cur.next)
			if err != nil {
				return nil, err
			}
			m.cur, m.off = mb, 0
		}
		k := min(n-len(out), len(m.cur.data)-m.off)
		out = append(out, m.cur.data[m.off:m.off+k]...)
		m.off += k
	}
	m.read += n
	return out, nil
}

func (m *metaReader) decode(v any) error {
	b, err := m.bytes(binary.Size(v))
	if err != nil {
		return err
	}
	return binary.Read(bytes.NewReader(b), binary.LittleEndian, v)
}

func (f *FS) inode(ref uint64) (*inode, error) {
	m, err := f.metaReader(int64(f.sb.InodeTableStart)+int64(ref>>16), int(ref&0xFFFF))
	if err != nil {
		return nil, err
	}
	var hdr struct {
		Type, Perm, UID, GID uint16
		Mtime, Number        uint32
	}
	if err := m.decode(&hdr); err != nil {
		return nil, err
	}
	in := &inode{typ: hdr.Type, perm: hdr.Perm, mtime: hdr.Mtime, fragIndex: noFragment}
	switch hdr.Type {
	case typeDir:
		var d struct {
			Block  uint32
			Nlink  uint32
			Size   uint16
			Offset uint16
			Parent uint32
		}
		if err := m.decode(&d); err != nil {
			return nil, err
		}
		in.dirBlock, in.dirOffset, in.dirSize = d.Block, d.Offset, uint32(max(int(d.Size)-3, 0))
	case typeExtDir:
		var d struct {
			Nlink   uint32
			Size    uint32
			Block   uint32
			Parent  uint32
			Indexes uint16
			Offset  uint16
			Xattr   uint32
		}
		if err := m.decode(&d); err != nil {
			return nil, err
		}
		in.dirBlock, in.dirOffset, in.dirSize = d.Block, d.Offset, uint32(max(int64(d.Size)-3, 0))
	case typeFile:
		var d struct{ Start, Frag, Offset, Size uint32 }
		if err := m.decode(&d); err != nil {
			return nil, err
		}
		in.blocksStart, in.fragIndex, in.fragOffset, in.size = uint64(d.Start), d.Frag, d.Offset, uint64(d.Size)
	case typeExtFile:
		var d struct {
			Start, Size, Sparse uint64
			Nlink, Frag, Offset uint32
			Xattr               uint32
		}
		if err := m.decode(&d); err != nil {
			return nil, err
		}
		in.blocksStart, in.fragIndex, in.fragOffset, in.size = d.Start, d.Frag, d.Offset, d.Size
	case typeSymlink, typeExtSym:
		var d struct{ Nlink, Size uint32 }
		if err := m.decode(&d); err != nil {
			return nil, err
		}
		if d.Size > 4096 {
			return nil, fmt.Errorf("%w: symlink target of %d bytes", ErrFormat, d.Size)
		}
		b, err := m.bytes(int(d.Size))
		if err != nil {
			return nil, err
		}
		in.target = string(b)
	case typeBlkDev, typeChrDev, typeFifo, typeSocket, typeExtBlk, typeExtChr, typeExtFifo, typeExtSock:
		// Nothing to read from these.
	default:
		return nil, fmt.Errorf("%w: inode type %d", ErrFormat, hdr.Type)
	}
	if in.isFile() {
		bs := uint64(f.sb.BlockSize)
		n := in.size / bs
		if in.fragIndex == noFragment && in.size%bs != 0 {
			n++
		}
		if n > 1<<24 {
			return nil, fmt.Errorf("%w: file of %d bytes", ErrFormat, in.size)
		}
		b, err := m.bytes(int(n) * 4)
		if err != nil {
			return nil, err
		}
		in.blockSizes = make([]uint32, n)
		for i := range in.blockSizes {
			in.blockSizes[i] = binary.LittleEndian.Uint32(b[i*4:])
		}
	}
	return in, nil
}

func (in *inode) isDir() bool     { return in.typ == typeDir || in.typ == typeExtDir }
func (in *inode) isFile() bool    { return in.typ == typeFile || in.typ == typeExtFile }
func (in *inode) isSymlink() bool { return in.typ == typeSymlink || in.typ == typeExtSym }

func (in *inode) mode() fs.FileMode {
	m := fs.FileMode(in.perm & 0o777)
	if in.perm&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if in.perm&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if in.perm&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m | typeMode(in.typ)
}

func typeMode(t uint16) fs.FileMode {
	switch t {
	case typeDir, typeExtDir:
		return fs.ModeDir
	case typeSymlink, typeExtSym:
		return fs.ModeSymlink
	case typeBlkDev, typeExtBlk:
		return fs.ModeDevice
	case typeChrDev, typeExtChr:
		return fs.ModeDevice | fs.ModeCharDevice
	case typeFifo, typeExtFifo:
		return fs.ModeNamedPipe
	case typeSocket, typeExtSock:
		return fs.ModeSocket
	}
	return 0
}

// dirents returns a directory's entries, sorted by name as mksquashfs
// writes them.
func (f *FS) dirents(in *inode) ([]dirent, error) {
	key := uint64(in.dirBlock)<<16 | uint64(in.dirOffset)
	f.mu.Lock()
	ents, ok := f.dirs[key]
	f.mu.Unlock()
	if ok {
		return ents, nil
	}
	ents = []dirent{}
	if in.dirSize > 0 {
		m, err := f.metaReader(int64(f.sb.DirTableStart)+int64(in.dirBlock), int(in.dirOffset))
		if err != nil {
			return nil, err
		}
		left := int64(in.dirSize)
		for left > 0 {
			var h struct{ Count, Start, Inode uint32 }
			if err := m.decode(&h); err != nil {
				return nil, err
			}
			left -= 12
			if h.Count >= 256 {
				return nil, fmt.Errorf("%w: directory header with %d entries", ErrFormat, h.Count+1)
			}
			for range h.Count + 1 {
				var e struct {
					Offset   uint16
					InodeOff int16
					Type     uint16
					NameSize uint16
				}
				if err := m.decode(&e); err != nil {
					return nil, err
				}
				name, err := m.bytes(int(e.NameSize) + 1)
				if err != nil {
					return nil, err
				}
				left -= 8 + int64(e.NameSize) + 1
				n := string(name)
				if n == "." || n == ".." || strings.ContainsAny(n, "/\x00") {
					return nil, fmt.Errorf("%w: directory entry %q", ErrFormat, n)
				}
				ents = append(ents, dirent{name: n, ref: uint64(h.Start)<<16 | uint64(e.Offset), typ: e.Type})
			}
		}
		if left != 0 {
			return nil, fmt.Errorf("%w: directory listing overruns its size", ErrFormat)
		}
		slices.SortFunc(ents, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	}
	f.mu.Lock()
	f.dirs[key] = ents
	f.mu.Unlock()
	return ents, nil
}

// resolve walks name from the root. Symlinks met on the way are followed
// (and the last one too when follow is set); a target is read relative to
// the image root and may not leave it.
func (f *FS) resolve(op, name string, follow bool) (*inode, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	walk := name
	for hops := 0; ; hops++ {
		if hops > maxSymlinks {
			return nil, &fs.PathError{Op: op, Path: name, Err: errors.New("too many levels of symbolic links")}
		}
		in, next, err := f.walk(walk, follow)
		if err != nil {
			return nil, &fs.PathError{Op: op, Path: name, Err: err}
		}
		if next == "" {
			return in, nil
		}
		walk = next
	}
}

// walk resolves p without following symlinks; when it meets one that must be
// followed it returns the path to walk instead.
func (f *FS) walk(p string, follow bool) (*inode, string, error) {
	cur := f.root
	if p == "." {
		return cur, "", nil
	}
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if !cur.isDir() {
			return nil, "", fs.ErrNotExist
		}
		ents, err := f.dirents(cur)
		if err != nil {
			return nil, "", err
		}
		j, ok := slices.BinarySearchFunc(ents, part, func(e dirent, n string) int { return strings.Compare(e.name, n) })
		if !ok {
			return nil, "", fs.ErrNotExist
		}
		in, err := f.inode(ents[j].ref)
		if err != nil {
			return nil, "", err
		}
		last := i == len(parts)-1
		if in.isSymlink() && (!last || follow) {
			var base string
			if strings.HasPrefix(in.target, "/") {
				base = path.Clean(strings.TrimLeft(in.target, "/"))
			} else {
				base = path.Join(path.Join(parts[:i]...), in.target)
			}
			next := path.Join(append([]string{base}, parts[i+1:]...)...)
			if next == ".." || strings.HasPrefix(next, "../") {
				return nil, "", fmt.Errorf("symlink %s points outside the image", path.Join(parts[:i+1]...))
			}
			if next == "" {
				next = "."
			}
			return nil, next, nil
		}
		cur = in
	}
	return cur, "", nil
}

func (f *FS) fragments() ([]fragEntry, error) {
	f.mu.Lock()
	if f.fragsOK {
		defer f.mu.Unlock()
		return f.frags, f.fragsErr
	}
	f.mu.Unlock()
	frags, err := f.loadFragments()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frags, f.fragsErr, f.fragsOK = frags, err, true
	return frags, err
}

func (f *FS) loadFragments() ([]fragEntry, error) {
	n := int(f.sb.Fragments)
	if n == 0 {
		return nil, nil
	}
	const perBlock = metaBlockSize / 16
	blocks := (n + perBlock - 1) / perBlock
	idx, err := f.readAt(int64(f.sb.FragTableStart), blocks*8)
	if err != nil {
		return nil, err
	}
	out := make([]fragEntry, 0, n)
	for b := range blocks {
		m, err := f.metaReader(int64(binary.LittleEndian.Uint64(idx[b*8:])), 0)
		if err != nil {
			return nil, err
		}
		for range min(perBlock, n-len(out)) {
			var e fragEntry
			if err := m.decode(&e); err != nil {
				return nil, err
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// dataBlock reads one data or fragment block of at most BlockSize bytes.
func (f *FS) dataBlock(start uint64, size uint32) ([]byte, error) {
	n := int(size &^ blockUncompBit)
	if n > int(f.sb.BlockSize) {
		return nil, fmt.Errorf("%w: data block of %d bytes", ErrFormat, n)
	}
	raw, err := f.readAt(int64(start), n)
	if err != nil {
		return nil, err
	}
	if size&blockUncompBit != 0 {
		return raw, nil
	}
	return f.decompress(raw, int(f.sb.BlockSize))
}

func (f *FS) fragmentBlock(i uint32) ([]byte, error) {
	frags, err := f.fragments()
	if err != nil {
		return nil, err
	}
	if int(i) >= len(frags) {
		return nil, fmt.Errorf("%w: fragment %d of %d", ErrFormat, i, len(frags))
	}
	e := frags[i]
	f.mu.Lock()
	b, ok := f.fragData[int64(e.Start)]
	f.mu.Unlock()
	if ok {
		return b, nil
	}
	if b, err = f.dataBlock(e.Start, e.Size); err != nil {
		return nil, err
	}
	f.mu.Lock()
	if len(f.fragData) >= fragCacheSize {
		clear(f.fragData) // files are read in listing order, so reuse is local
	}
	f.fragData[int64(e.Start)] = b
	f.mu.Unlock()
	return b, nil
}

// Open implements fs.FS. Symlinks are followed.
func (f *FS) Open(name string) (fs.File, error) {
	in, err := f.resolve("open", name, true)
	if err != nil {
		return nil, err
	}
	info := fileInfo{name: path.Base(name), in: in}
	switch {
	case in.isDir():
		return &dir{f: f, info: info}, nil
	case in.isFile():
		return &file{f: f, info: info, in: in}, nil
	default:
		return &special{info: info}, nil
	}
}

// Stat implements fs.StatFS. Symlinks are followed.
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	in, err := f.resolve("stat", name, true)
	if err != nil {
		return nil, err
	}
	return fileInfo{name: path.Base(name), in: in}, nil
}

// Lstat implements fs.ReadLinkFS: it does not follow a final symlink.
func (f *FS) Lstat(name string) (fs.FileInfo, error) {
	in, err := f.resolve("lstat", name, false)
	if err != nil {
		return nil, err
	}
	return fileInfo{name: path.Base(name), in: in}, nil
}

// ReadLink implements fs.ReadLinkFS.
func (f *FS) ReadLink(name string) (string, error) {
	in, err := f.resolve("readlink", name, false)
	if err != nil {
		return "", err
	}
	if !in.isSymlink() {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	return in.target, nil
}

// ReadDir implements fs.ReadDirFS.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	in, err := f.resolve("readdir", name, true)
	if err != nil {
		return nil, err
	}
	if !in.isDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	ents, err := f.dirents(in)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	out := make([]fs.DirEntry, len(ents))
	for i, e := range ents {
		out[i] = &dirEntry{f: f, e: e}
	}
	return out, nil
}

// ReadFile implements fs.ReadFileFS.
func (f *FS) ReadFile(name string) ([]byte, error) {
	in, err := f.resolve("read", name, true)
	if err != nil {
		return nil, err
	}
	if !in.isFile() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("not a regular file")}
	}
	fl := &file{f: f, info: fileInfo{name: path.Base(name), in: in}, in: in}
	b := make([]byte, 0, in.size)
	for {
		n, err := fl.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = slices.Grow(b, 1) // only for a corrupt size; Read reports EOF
		}
	}
}

type fileInfo struct {
	name string
	in   *inode
}

func (i fileInfo) Name() string { return i.name }
func (i fileInfo) Size() int64 {
	switch {
	case i.in.isFile():
		return int64(i.in.size)
	case i.in.isSymlink():
		return int64(len(i.in.target))
	}
	return 0
}
func (i fileInfo) Mode() fs.FileMode  { return i.in.mode() }
func (i fileInfo) ModTime() time.Time { return time.Unix(int64(i.in.mtime), 0) }
func (i fileInfo) IsDir() bool        { return i.in.isDir() }
func (i fileInfo) Sys() any           { return nil }

type dirEntry struct {
	f *FS
	e dirent
}

func (d *dirEntry) Name() string      { return d.e.name }
func (d *dirEntry) IsDir() bool       { return typeMode(d.e.typ).IsDir() }
func (d *dirEntry) Type() fs.FileMode { return typeMode(d.e.typ) }
func (d *dirEntry) Info() (fs.FileInfo, error) {
	in, err := d.f.inode(d.e.ref)
	if err != nil {
		return nil, err
	}
	return fileInfo{name: d.e.name, in: in}, nil
}
func (d *dirEntry) String() string { return fs.FormatDirEntry(d) }

type dir struct {
	f    *FS
	info fileInfo
	ents []dirent
	read bool
	pos  int
}

func (d *dir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dir) Close() error               { return nil }
func (d *dir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: errors.New("is a directory")}
}

func (d *dir) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.read {
		ents, err := d.f.dirents(d.info.in)
		if err != nil {
			return nil, err
		}
		d.ents, d.read = ents, true
	}
	rest := d.ents[d.pos:]
	if n > 0 {
		if len(rest) == 0 {
			return nil, io.EOF
		}
		rest = rest[:min(n, len(rest))]
	}
	d.pos += len(rest)
	out := make([]fs.DirEntry, len(rest))
	for i, e := range rest {
		out[i] = &dirEntry{f: d.f, e: e}
	}
	return out, nil
}

type special struct{ info fileInfo }

func (s *special) Stat() (fs.FileInfo, error) { return s.info, nil }
func (s *special) Close() error               { return nil }
func (s *special) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: s.info.name, Err: errors.New("not a regular file")}
}

// file reads a regular file block by block.
type file struct {
	f    *FS
	info fileInfo
	in   *inode
	off  int64

	pos      []uint64 // disk position of each block, computed on first read
	blk      int      // index of the block in buf, -1 for none
	buf      []byte
	bufValid bool
}

func (fl *file) Stat() (fs.FileInfo, error) { return fl.info, nil }
func (fl *file) Close() error               { return nil }

func (fl *file) Read(p []byte) (int, error) {
	size := int64(fl.in.size)
	if fl.off >= size {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	bs := int64(fl.f.sb.BlockSize)
	i := int(fl.off / bs)
	if !fl.bufValid || fl.blk != i {
		b, err := fl.block(i)
		if err != nil {
			return 0, &fs.PathError{Op: "read", Path: fl.info.name, Err: err}
		}
		fl.buf, fl.blk, fl.bufValid = b, i, true
	}
	n := copy(p, fl.buf[fl.off-int64(i)*bs:])
	fl.off += int64(n)
	return n, nil
}

// block returns the bytes of block i of the file, checked for length.
func (fl *file) block(i int) ([]byte, error) {
	bs := int64(fl.f.sb.BlockSize)
	want := int(min(bs, int64(fl.in.size)-int64(i)*bs))
	if i == len(fl.in.blockSizes) {
		if fl.in.fragIndex == noFragment {
			return nil, fmt.Errorf("%w: block %d beyond the file's block list", ErrFormat, i)
		}
		fb, err := fl.f.fragmentBlock(fl.in.fragIndex)
		if err != nil {
			return nil, err
		}
		start := int(fl.in.fragOffset)
		if start+want > len(fb) {
			return nil, fmt.Errorf("%w: file tail beyond its fragment", ErrFormat)
		}
		return fb[start : start+want], nil
	}
	if fl.pos == nil {
		fl.pos = make([]uint64, len(fl.in.blockSizes))
		p := fl.in.blocksStart
		for j, s := range fl.in.blockSizes {
			fl.pos[j] = p
			p += uint64(s &^ blockUncompBit)
		}
	}
	s := fl.in.blockSizes[i]
	if s == 0 {
		return make([]byte, want), nil // sparse
	}
	b, err := fl.f.dataBlock(fl.pos[i], s)
	if err != nil {
		return nil, err
	}
	if len(b) != want {
		return nil, fmt.Errorf("%w: block %d holds %d bytes, want %d", ErrFormat, i, len(b), want)
	}
	return b, nil
}
