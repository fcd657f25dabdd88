package ext4

import (
	"io/fs"
	"os"

	"github.com/diskfs/go-diskfs/backend"
)

// sparseBlock is the granularity at which all-zero writes are elided. It
// matches the ext4 block size the engine picks for images >= 512 MiB.
const sparseBlock = 4096

// sparseFile is a backend.Storage over a freshly truncated (all-hole) file
// that drops writes of all-zero blocks that were never written before.
// The engine zeroes inode tables, the journal and bitmaps eagerly; without
// this an empty 8 GiB image would occupy ~400 MiB on the host.
type sparseFile struct {
	f     *os.File
	dirty []uint64 // one bit per sparseBlock: block holds (or held) non-zero data
}

var _ backend.Storage = (*sparseFile)(nil)

func newSparseFile(f *os.File, size int64) *sparseFile {
	blocks := (size + sparseBlock - 1) / sparseBlock
	return &sparseFile{f: f, dirty: make([]uint64, (blocks+63)/64)}
}

func (s *sparseFile) isDirty(b int64) bool {
	i := b / 64
	return i < int64(len(s.dirty)) && s.dirty[i]&(1<<(b%64)) != 0
}

func (s *sparseFile) markDirty(b int64) {
	if i := b / 64; i < int64(len(s.dirty)) {
		s.dirty[i] |= 1 << (b % 64)
	}
}

func allZero(p []byte) bool {
	for _, c := range p {
		if c != 0 {
			return false
		}
	}
	return true
}

// WriteAt writes p at off, skipping block-sized pieces that are zero and
// land on blocks that are still holes. Contiguous pieces that must be
// written are coalesced into one write.
func (s *sparseFile) WriteAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	runStart := -1 // index into p of the pending run, -1 when none
	flush := func(end int) error {
		if runStart < 0 {
			return nil
		}
		_, err := s.f.WriteAt(p[runStart:end], off+int64(runStart))
		runStart = -1
		return err
	}
	for i := 0; i < len(p); {
		blk := (off + int64(i)) / sparseBlock
		end := min(int((blk+1)*sparseBlock-off), len(p))
		piece := p[i:end]
		if !s.isDirty(blk) && allZero(piece) {
			if err := flush(i); err != nil {
				return 0, err
			}
		} else {
			if !allZero(piece) {
				s.markDirty(blk)
			}
			if runStart < 0 {
				runStart = i
			}
		}
		i = end
	}
	if err := flush(len(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *sparseFile) ReadAt(p []byte, off int64) (int, error) { return s.f.ReadAt(p, off) }
func (s *sparseFile) Read(p []byte) (int, error)              { return s.f.Read(p) }
func (s *sparseFile) Seek(off int64, whence int) (int64, error) {
	return s.f.Seek(off, whence)
}
func (s *sparseFile) Stat() (fs.FileInfo, error) { return s.f.Stat() }

// Close is a no-op: the builder owns the file and closes it after renaming.
func (s *sparseFile) Close() error                            { return nil }
func (s *sparseFile) Sys() (*os.File, error)                  { return s.f, nil }
func (s *sparseFile) Writable() (backend.WritableFile, error) { return s, nil }
func (s *sparseFile) Path() string                            { return s.f.Name() }
