// Package ext4 builds the VM's root disk: a sparse raw ext4 image populated
// from a root filesystem tarball, without root privileges or external tools.
//
// The filesystem itself is laid out by github.com/diskfs/go-diskfs; this
// package feeds it a tar stream, normalises and confines paths, keeps the
// host file sparse and makes the result appear atomically.
package ext4

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	dext4 "github.com/diskfs/go-diskfs/filesystem/ext4"
	"github.com/osaurus/osaurus-sandbox/errdefs"
)

// DefaultSize is the image size used when Options.Size is zero.
const DefaultSize int64 = 8 << 30

// MinSize is the smallest image BuildFromTar accepts. Below it the engine
// switches to 1 KiB blocks and the journal no longer fits comfortably.
const MinSize int64 = 512 << 20

var (
	// ErrUnsafePath reports a tar entry, hard link target or extra file whose
	// path would land outside the image root.
	ErrUnsafePath = errdefs.Class(errdefs.ErrEscape, "path escapes image root")
	// ErrDuplicateEntry reports a tar entry for a path that already holds a
	// file or symlink; the engine cannot delete, so archives must be
	// flattened (as rootfs tarballs and flattened OCI images are).
	ErrDuplicateEntry = errdefs.Class(errdefs.ErrExists, "duplicate archive entry")
	// ErrInvalidOptions reports unusable Options (size, extra files).
	ErrInvalidOptions = errdefs.Class(errdefs.ErrInvalid, "invalid image options")
)

// File is an extra regular file written into the image after the tarball,
// replacing any entry of the same path. Missing parents are created 0755
// and owned by root.
type File struct {
	Path     string // e.g. "usr/local/bin/agent" or "/etc/hostname"
	Mode     fs.FileMode
	UID, GID int
	Data     []byte
}

// Options configures BuildFromTar.
type Options struct {
	Size  int64  // image size in bytes; DefaultSize when zero
	Label string // filesystem volume label (at most 16 bytes)
	Extra []File // written after the tar stream, in order
}

// Result counts what went into the image.
type Result struct {
	Files           int // regular files, including extras and copied hard links
	Dirs            int // directories created (explicit and implied parents)
	Symlinks        int
	HardlinksCopied int // hard links materialised as independent copies
	Skipped         int // device nodes, fifos and other unsupported entries
}

// BuildFromTar creates a sparse ext4 image at dst holding the contents of
// tarStream (plain or gzip-compressed, detected by magic) plus opts.Extra.
// The image is assembled in a temporary file beside dst and renamed over
// dst only on success, so a failed or cancelled build leaves dst untouched.
func BuildFromTar(ctx context.Context, dst string, tarStream io.Reader, opts Options) (Result, error) {
	size := opts.Size
	if size == 0 {
		size = DefaultSize
	}
	if size < MinSize {
		return Result{}, fmt.Errorf("%w: size %d is below the minimum of %d bytes", ErrInvalidOptions, size, MinSize)
	}
	if len(opts.Label) > 16 {
		return Result{}, fmt.Errorf("%w: label %q is longer than 16 bytes", ErrInvalidOptions, opts.Label)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}

	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*.tmp")
	if err != nil {
		return Result{}, fmt.Errorf("create temporary image: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Truncate(size); err != nil {
		return Result{}, fmt.Errorf("size temporary image: %w", err)
	}

	img := newImageFile(tmp, size)
	res, err := build(ctx, img, size, tarStream, opts)
	if err != nil {
		return res, err
	}
	if err := img.Flush(); err != nil {
		return res, err
	}
	if err := tmp.Sync(); err != nil {
		return res, fmt.Errorf("sync image: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return res, fmt.Errorf("close image: %w", err)
	}
	// Last chance to honour a cancel before the destination appears.
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return res, fmt.Errorf("rename image into place: %w", err)
	}
	committed = true
	return res, nil
}

func build(ctx context.Context, img *imageFile, size int64, tarStream io.Reader, opts Options) (Result, error) {
	fsys, err := dext4.Create(img, size, 0, 512, &dext4.Params{
		VolumeName: opts.Label,
		Features: []dext4.FeatureOpt{
			// Let the guest kernel hash-index directories that grow while
			// apt/apk install packages; we write plain linear directories.
			dext4.WithFeatureDirectoryIndices(true),
		},
	})
	if err != nil {
		return Result{}, fmt.Errorf("create ext4 filesystem: %w", err)
	}
	b := &builder{
		fs:       fsys,
		nodes:    map[string]node{"": {kind: kindDir}},
		written:  map[string]bool{},
		dirTimes: map[string]time.Time{},
		buf:      make([]byte, 1<<20),
	}

	for _, x := range opts.Extra {
		p, err := cleanPath(x.Path)
		if err != nil {
			return b.res, fmt.Errorf("extra file: %w", err)
		}
		b.extras = append(b.extras, p)
	}

	r, err := decompress(tarStream)
	if err != nil {
		return b.res, err
	}
	tr := tar.NewReader(&ctxReader{ctx: ctx, r: r})
	for {
		if err := ctx.Err(); err != nil {
			return b.res, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return b.res, fmt.Errorf("read tar: %w", err)
		}
		if err := b.addEntry(hdr, tr); err != nil {
			return b.res, err
		}
	}
	for _, x := range opts.Extra {
		if err := ctx.Err(); err != nil {
			return b.res, err
		}
		if err := b.addExtra(x); err != nil {
			return b.res, err
		}
	}
	if err := b.applyDirTimes(ctx); err != nil {
		return b.res, err
	}
	return b.res, nil
}

// decompress returns r itself, or a gunzipping reader if r starts with the
// gzip magic.
func decompress(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read tar stream: %w", err)
	}
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("open gzip stream: %w", err)
		}
		return zr, nil
	}
	return br, nil
}

// ctxReader stops a long copy (a big file, a slow stream) promptly on cancel.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// cleanPath maps a tar-style name ("./usr/bin/x", "/etc/", "usr//lib") to
// the engine's form without a leading slash; "" is the root. Names that
// climb above the root are rejected rather than clamped, since clamping
// would silently put content somewhere the archive author did not intend.
func cleanPath(name string) (string, error) {
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: %q contains NUL", ErrUnsafePath, name)
	}
	p := path.Clean(strings.TrimLeft(name, "/"))
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("%w: %q", ErrUnsafePath, name)
	}
	if p == "." {
		return "", nil
	}
	return p, nil
}

type kind uint8

const (
	kindDir kind = iota + 1
	kindFile
	kindSymlink
)

type node struct {
	kind   kind
	target string // symlink target, to resolve parents and re-create hard links to symlinks
}

type builder struct {
	fs       *dext4.FileSystem
	nodes    map[string]node // everything created so far, by clean path
	extras   []string        // clean paths of Options.Extra, which win over tar entries
	written  map[string]bool // resolved paths of extras already written
	dirTimes map[string]time.Time
	buf      []byte
	res      Result
}

func (b *builder) addEntry(hdr *tar.Header, r io.Reader) error {
	name, err := cleanPath(hdr.Name)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		// The guest mounts devtmpfs on /dev, and the engine cannot make
		// device nodes anyway.
		b.res.Skipped++
		return nil
	case tar.TypeXGlobalHeader:
		return nil
	case tar.TypeDir, tar.TypeReg, tar.TypeGNUSparse, tar.TypeSymlink, tar.TypeLink:
	default:
		b.res.Skipped++
		return nil
	}
	p, err := b.resolveParents(name)
	if err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeDir && b.shadowed(p) {
		return nil
	}
	mode := hdr.FileInfo().Mode()
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := b.mkdir(p, mode, hdr.Uid, hdr.Gid); err != nil {
			return err
		}
		b.dirTimes[p] = hdr.ModTime
		return nil
	case tar.TypeSymlink:
		return b.symlink(p, hdr.Linkname, hdr.ModTime)
	case tar.TypeLink:
		return b.hardlink(p, hdr)
	default:
		if err := b.writeFile(p, mode, hdr.Uid, hdr.Gid, hdr.ModTime, r, hdr.Size); err != nil {
			return err
		}
		b.res.Files++
		return nil
	}
}

func (b *builder) addExtra(x File) error {
	name, err := cleanPath(x.Path)
	if err != nil {
		return fmt.Errorf("extra file: %w", err)
	}
	if name == "" || x.Mode.Type() != 0 {
		return fmt.Errorf("%w: extra file %q must be a regular file path", ErrInvalidOptions, x.Path)
	}
	p, err := b.resolveParents(name)
	if err != nil {
		return err
	}
	if b.written[p] {
		return fmt.Errorf("%w: extra file %q given twice", ErrInvalidOptions, x.Path)
	}
	if err := b.writeFile(p, x.Mode, x.UID, x.GID, time.Now(), bytes.NewReader(x.Data), int64(len(x.Data))); err != nil {
		return err
	}
	b.written[p] = true
	b.res.Files++
	return nil
}

// shadowed reports whether an extra file will be written at p, so the tar
// entry there must be left out (the engine cannot replace files).
func (b *builder) shadowed(p string) bool {
	for _, x := range b.extras {
		if r, err := b.resolveParents(x); err == nil && r == p {
			return true
		}
	}
	return false
}

// maxSymlinkHops bounds symlink resolution like the kernel's MAXSYMLINKS.
const maxSymlinkHops = 40

// resolveParents follows symlinks among the ancestors of p the way the
// guest kernel would inside its root, so that "lib/x" lands in "usr/lib/x"
// on a merged-/usr system. Absolute and ".."-climbing targets are
// interpreted relative to the image root and cannot leave it. The last
// component is not followed.
func (b *builder) resolveParents(p string) (string, error) {
	if p == "" {
		return p, nil
	}
	parts := strings.Split(p, "/")
	cur := ""
	hops := 0
	for i := 0; i < len(parts)-1; i++ {
		next := path.Join(cur, parts[i])
		n, ok := b.nodes[next]
		if !ok || n.kind != kindSymlink {
			cur = next
			continue
		}
		if hops++; hops > maxSymlinkHops {
			return "", fmt.Errorf("resolve %s: too many levels of symbolic links", p)
		}
		base := "/" + cur
		if strings.HasPrefix(n.target, "/") {
			base = "/"
		}
		rest := strings.Join(parts[i+1:], "/")
		resolved := strings.TrimPrefix(path.Join(base, n.target, rest), "/")
		if resolved == "" {
			return "", nil
		}
		parts = strings.Split(resolved, "/")
		cur = ""
		i = -1
	}
	return path.Join(cur, parts[len(parts)-1]), nil
}

// ensureParents creates missing ancestors of p as 0755 root:root, the way
// tar would for an archive that omits directory entries.
func (b *builder) ensureParents(p string) error {
	dir := path.Dir(p)
	if dir == "." {
		return nil
	}
	if n, ok := b.nodes[dir]; ok {
		if n.kind != kindDir {
			return fmt.Errorf("create %s: parent %s is not a directory", p, dir)
		}
		return nil
	}
	return b.mkdir(dir, fs.ModeDir|0o755, 0, 0)
}

func (b *builder) mkdir(p string, mode fs.FileMode, uid, gid int) error {
	if p == "" {
		// The root directory already exists; keep the engine's 0755
		// root:root, which is what a bootable root wants anyway.
		return nil
	}
	n, ok := b.nodes[p]
	switch {
	case ok && n.kind != kindDir:
		return fmt.Errorf("%w: directory %s replaces an earlier non-directory", ErrDuplicateEntry, p)
	case !ok:
		if err := b.ensureParents(p); err != nil {
			return err
		}
		if err := b.fs.Mkdir(p); err != nil {
			return fmt.Errorf("mkdir %s: %w", p, err)
		}
		b.nodes[p] = node{kind: kindDir}
		b.res.Dirs++
	}
	// New inodes inherit the parent's bits (including setgid/sticky), so
	// always set them explicitly.
	return b.setAttrs(p, mode, uid, gid)
}

func (b *builder) setAttrs(p string, mode fs.FileMode, uid, gid int) error {
	if err := b.fs.Chmod(p, mode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return fmt.Errorf("chmod %s: %w", p, err)
	}
	if err := b.fs.Chown(p, uid, gid); err != nil {
		return fmt.Errorf("chown %s: %w", p, err)
	}
	return nil
}

// prepare readies p to be created as a new non-directory. Replacing an
// existing entry is refused: the engine's Remove corrupts the filesystem
// (it leaves the inode allocated), and a flattened root filesystem has no
// duplicates anyway.
func (b *builder) prepare(p string) error {
	if p == "" {
		return fmt.Errorf("%w: cannot replace the root directory", ErrUnsafePath)
	}
	if _, ok := b.nodes[p]; ok {
		return fmt.Errorf("%w: %s", ErrDuplicateEntry, p)
	}
	return b.ensureParents(p)
}

func (b *builder) writeFile(p string, mode fs.FileMode, uid, gid int, mtime time.Time, r io.Reader, size int64) error {
	if err := b.prepare(p); err != nil {
		return err
	}
	f, err := b.fs.OpenFile(p, os.O_CREATE|os.O_RDWR)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	b.nodes[p] = node{kind: kindFile}
	if err := b.fill(f, r, size); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", p, err)
	}
	if err := b.setAttrs(p, mode, uid, gid); err != nil {
		return err
	}
	return b.chtimes(p, mtime)
}

// fill writes exactly size bytes from r into f. The engine allocates blocks
// on every Write that grows the file and never merges the resulting
// extents, so the file is first grown to its final size with a single
// byte at the end: one allocation, as few extents as possible.
func (b *builder) fill(f io.WriteSeeker, r io.Reader, size int64) error {
	if size == 0 {
		return nil
	}
	if _, err := f.Seek(size-1, io.SeekStart); err != nil {
		return err
	}
	if _, err := f.Write([]byte{0}); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	for left := size; left > 0; {
		chunk := b.buf[:min(int64(len(b.buf)), left)]
		if _, err := io.ReadFull(r, chunk); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if _, err := f.Write(chunk); err != nil {
			return err
		}
		left -= int64(len(chunk))
	}
	return nil
}

func (b *builder) symlink(p, target string, mtime time.Time) error {
	if target == "" {
		return fmt.Errorf("symlink %s: empty target", p)
	}
	if err := b.prepare(p); err != nil {
		return err
	}
	if err := b.fs.Symlink(target, p); err != nil {
		return fmt.Errorf("symlink %s -> %s: %w", p, target, err)
	}
	b.nodes[p] = node{kind: kindSymlink, target: target}
	b.res.Symlinks++
	// The engine's Chmod/Chown follow symlinks, so a link keeps 0777 and
	// its parent directory's owner; only the time is applied to the link.
	return b.chtimes(p, mtime)
}

// hardlink copies the link target's content: the engine cannot create a
// second name for an inode.
func (b *builder) hardlink(p string, hdr *tar.Header) error {
	name, err := cleanPath(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("hard link %s: %w", hdr.Name, err)
	}
	target, err := b.resolveParents(name)
	if err != nil {
		return err
	}
	if target == p {
		return nil
	}
	n, ok := b.nodes[target]
	if !ok {
		return fmt.Errorf("hard link %s: target %s not found earlier in the archive", p, target)
	}
	switch n.kind {
	case kindSymlink:
		if err := b.symlink(p, n.target, hdr.ModTime); err != nil {
			return err
		}
	case kindFile:
		data, err := b.fs.ReadFile(target)
		if err != nil {
			return fmt.Errorf("hard link %s: read %s: %w", p, target, err)
		}
		if err := b.writeFile(p, hdr.FileInfo().Mode(), hdr.Uid, hdr.Gid, hdr.ModTime, bytes.NewReader(data), int64(len(data))); err != nil {
			return err
		}
		b.res.Files++
	default:
		return fmt.Errorf("hard link %s: target %s is a directory", p, target)
	}
	b.res.HardlinksCopied++
	return nil
}

func (b *builder) chtimes(p string, t time.Time) error {
	if err := b.fs.Chtimes(p, t, t, t); err != nil {
		return fmt.Errorf("set times of %s: %w", p, err)
	}
	return nil
}

// applyDirTimes sets directory mtimes last, after their contents are in
// place, deepest first like tar does.
func (b *builder) applyDirTimes(ctx context.Context) error {
	dirs := make([]string, 0, len(b.dirTimes))
	for d := range b.dirTimes {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.chtimes(d, b.dirTimes[d]); err != nil {
			return err
		}
	}
	return nil
}
