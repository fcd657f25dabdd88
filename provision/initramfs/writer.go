// Package initramfs writes Linux initramfs images: cpio archives in the
// "newc" format (magic 070701) that the kernel unpacks into its root tmpfs
// before running /init. It is pure Go so images can be built on any host.
package initramfs

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/osaurus/osaurus-sandbox/errdefs"
)

var (
	// ErrExists is returned when an entry is added at a path the archive
	// already holds (re-adding a directory with the same mode is allowed).
	ErrExists = errdefs.Class(errdefs.ErrExists, "path already in archive")
	// ErrInvalidPath is returned for empty paths, paths escaping the root
	// and paths whose parent is not a directory in the archive.
	ErrInvalidPath = errdefs.Class(errdefs.ErrInvalid, "invalid archive path")
	// ErrClosed is returned when adding to a closed Writer.
	ErrClosed = errdefs.Class(errdefs.ErrInternal, "initramfs writer closed")
)

const (
	newcMagic   = "070701"
	trailerName = "TRAILER!!!"
	headerSize  = 110
	// The kernel does not care, but cpio tools expect whole 512-byte blocks.
	blockSize = 512
	// defaultDirMode is used for parent directories created implicitly.
	defaultDirMode fs.FileMode = 0o755
)

// Unix file type bits as stored in the newc mode field.
const (
	sIFDIR = 0o040000
	sIFREG = 0o100000
	sIFLNK = 0o120000
	sIFCHR = 0o020000
)

// Option configures a Writer.
type Option func(*Writer)

// WithGzip compresses the archive with gzip at the given level (see
// compress/gzip). The kernel unpacks uncompressed archives fastest, so this
// is only worth it when the image is stored or sent somewhere.
func WithGzip(level int) Option {
	return func(w *Writer) { w.gzip, w.gzipLevel = true, level }
}

// Writer streams a newc cpio archive. Every entry is owned by root and has
// mtime 0, so the same input always gives the same bytes. Paths are stored
// without a leading slash. Writer is not safe for concurrent use.
type Writer struct {
	out       io.Writer // where entries go: dst or the gzip stream
	gz        *gzip.Writer
	gzip      bool
	gzipLevel int
	off       int64 // bytes of uncompressed archive written, for alignment
	nextIno   uint32
	// entries records the type and mode of every path already written.
	entries map[string]fs.FileMode
	err     error // sticky: a failed write leaves the archive corrupt
	closed  bool
}

// NewWriter returns a Writer that writes the archive to dst. Close must be
// called to finish the archive; it does not close dst.
func NewWriter(dst io.Writer, opts ...Option) *Writer {
	w := &Writer{out: dst, nextIno: 1, entries: map[string]fs.FileMode{}}
	for _, o := range opts {
		o(w)
	}
	if w.gzip {
		gz, err := gzip.NewWriterLevel(dst, w.gzipLevel)
		if err != nil {
			w.err = fmt.Errorf("initramfs: %w", err)
		} else {
			w.gz, w.out = gz, gz
		}
	}
	return w
}

// AddDir adds a directory. mode holds its permission bits (setuid, setgid
// and sticky included; fs.ModeDir is accepted and implied).
func (w *Writer) AddDir(name string, mode fs.FileMode) error {
	if mode.Type()&^fs.ModeDir != 0 {
		return fmt.Errorf("initramfs: directory %s: mode %v is not a directory mode", name, mode)
	}
	p, err := w.prepare(name)
	if err != nil {
		return err
	}
	perm := fs.ModeDir | permBits(mode)
	if old, ok := w.entries[p]; ok {
		if old == perm {
			return nil
		}
		return fmt.Errorf("initramfs: directory %s (mode %v, have %v): %w", p, perm, old, ErrExists)
	}
	if err := w.parents(p); err != nil {
		return err
	}
	return w.writeEntry(p, perm, sIFDIR, 2, 0, 0, nil, 0)
}

// AddFile adds a regular file with the given permission bits and contents.
func (w *Writer) AddFile(name string, mode fs.FileMode, data []byte) error {
	return w.AddFileReader(name, mode, bytes.NewReader(data), int64(len(data)))
}

// AddFileReader adds a regular file of size bytes read from r. It fails if
// r holds fewer than size bytes, which leaves the archive unusable.
func (w *Writer) AddFileReader(name string, mode fs.FileMode, r io.Reader, size int64) error {
	if mode.Type() != 0 {
		return fmt.Errorf("initramfs: file %s: mode %v is not a regular file mode", name, mode)
	}
	if size < 0 || size > 1<<32-1 {
		return fmt.Errorf("initramfs: file %s: size %d does not fit a newc archive", name, size)
	}
	p, err := w.add(name, permBits(mode))
	if err != nil {
		return err
	}
	return w.writeEntry(p, permBits(mode), sIFREG, 1, 0, 0, r, size)
}

// AddSymlink adds a symbolic link at name pointing to target.
func (w *Writer) AddSymlink(name, target string) error {
	if target == "" {
		return fmt.Errorf("initramfs: symlink %s: empty target", name)
	}
	p, err := w.add(name, fs.ModeSymlink|0o777)
	if err != nil {
		return err
	}
	return w.writeEntry(p, 0o777, sIFLNK, 1, 0, 0, strings.NewReader(target), int64(len(target)))
}

// AddCharDevice adds a character device node, such as /dev/console, which
// the kernel must find in the initramfs to give /init its console.
func (w *Writer) AddCharDevice(name string, mode fs.FileMode, major, minor uint32) error {
	if mode.Type()&^(fs.ModeDevice|fs.ModeCharDevice) != 0 {
		return fmt.Errorf("initramfs: device %s: mode %v is not a character device mode", name, mode)
	}
	p, err := w.add(name, fs.ModeDevice|fs.ModeCharDevice|permBits(mode))
	if err != nil {
		return err
	}
	return w.writeEntry(p, permBits(mode), sIFCHR, 1, major, minor, nil, 0)
}

// Close writes the trailer, pads the archive to a whole block and flushes
// the compressor, if any. It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	if w.err == nil {
		w.err = w.writeHeader(trailerName, 0, 0, 1, 0, 0, 0)
	}
	if w.err == nil {
		w.err = w.pad(blockSize)
	}
	if w.gz != nil {
		if err := w.gz.Close(); err != nil && w.err == nil {
			w.err = fmt.Errorf("initramfs: %w", err)
		}
	}
	w.closed = true
	return w.err
}

// prepare checks the writer state and returns the cleaned archive path.
func (w *Writer) prepare(name string) (string, error) {
	if w.err != nil {
		return "", w.err
	}
	if w.closed {
		return "", ErrClosed
	}
	p := path.Clean("/" + name)[1:]
	if p == "" || p == trailerName || strings.Contains("/"+name+"/", "/../") {
		return "", fmt.Errorf("initramfs: %q: %w", name, ErrInvalidPath)
	}
	return p, nil
}

// add registers a non-directory entry after creating its parents.
func (w *Writer) add(name string, mode fs.FileMode) (string, error) {
	p, err := w.prepare(name)
	if err != nil {
		return "", err
	}
	if _, ok := w.entries[p]; ok {
		return "", fmt.Errorf("initramfs: %s: %w", p, ErrExists)
	}
	if err := w.parents(p); err != nil {
		return "", err
	}
	w.entries[p] = mode
	return p, nil
}

// parents writes the missing ancestor directories of p, outermost first,
// because the kernel's unpacker does not create them on its own.
func (w *Writer) parents(p string) error {
	var missing []string
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		mode, ok := w.entries[d]
		if !ok {
			missing = append(missing, d)
			continue
		}
		if !mode.IsDir() {
			return fmt.Errorf("initramfs: %s: parent %s is not a directory: %w", p, d, ErrInvalidPath)
		}
		break
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := w.writeEntry(missing[i], fs.ModeDir|defaultDirMode, sIFDIR, 2, 0, 0, nil, 0); err != nil {
			return err
		}
	}
	return nil
}

// writeEntry writes one header with its name and size bytes of data from r.
func (w *Writer) writeEntry(p string, mode fs.FileMode, typ uint32, nlink, rmajor, rminor uint32, r io.Reader, size int64) error {
	if typ == sIFDIR {
		w.entries[p] = mode
	}
	ino := w.nextIno
	w.nextIno++
	if err := w.writeHeader(p, ino, typ|unixPerm(mode), nlink, uint32(size), rmajor, rminor); err != nil {
		w.err = err
		return err
	}
	if size > 0 {
		n, err := io.CopyN(w.out, r, size)
		w.off += n
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("data ended after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
			}
			w.err = fmt.Errorf("initramfs: write %s: %w", p, err)
			return w.err
		}
	}
	if err := w.pad(4); err != nil {
		w.err = err
		return err
	}
	return nil
}

func (w *Writer) writeHeader(name string, ino, mode, nlink, size, rmajor, rminor uint32) error {
	var b strings.Builder
	b.Grow(headerSize + len(name) + 4)
	b.WriteString(newcMagic)
	for _, v := range [...]uint32{
		ino, mode, 0 /* uid */, 0 /* gid */, nlink, 0 /* mtime */, size,
		0, 0, // devmajor, devminor of the file system holding the file
		rmajor, rminor,
		uint32(len(name) + 1), // namesize counts the NUL
		0,                     // check, only used by the 070702 format
	} {
		fmt.Fprintf(&b, "%08x", v)
	}
	b.WriteString(name)
	b.WriteByte(0)
	// Name and data each start on a 4-byte boundary.
	for (w.off+int64(b.Len()))%4 != 0 {
		b.WriteByte(0)
	}
	n, err := io.WriteString(w.out, b.String())
	w.off += int64(n)
	if err != nil {
		return fmt.Errorf("initramfs: write %s: %w", name, err)
	}
	return nil
}

func (w *Writer) pad(align int64) error {
	n := (align - w.off%align) % align
	if n == 0 {
		return nil
	}
	m, err := w.out.Write(make([]byte, n))
	w.off += int64(m)
	if err != nil {
		return fmt.Errorf("initramfs: write padding: %w", err)
	}
	return nil
}

// permBits keeps the permission, setuid, setgid and sticky bits of mode.
func permBits(mode fs.FileMode) fs.FileMode {
	return mode & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// unixPerm converts Go's permission bits to their Unix encoding.
func unixPerm(mode fs.FileMode) uint32 {
	m := uint32(mode.Perm())
	if mode&fs.ModeSetuid != 0 {
		m |= 0o4000
	}
	if mode&fs.ModeSetgid != 0 {
		m |= 0o2000
	}
	if mode&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	return m
}
