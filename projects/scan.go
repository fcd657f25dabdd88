package projects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// scanned is one path of an agent's view.
type scanned struct {
	typ  string
	mode fs.FileMode // full mode: setuid and setgid bits matter
	size int64
	hash string // "" for a file too big to hash
}

// errTooMany: the view is wider, deeper or bigger than the host reads.
var errTooMany = errors.New("too much to review")

// scanner walks an agent's view from a directory descriptor, a component
// at a time (open.go), within bounds: MaxEntries entries, MaxDepth levels,
// budget bytes hashed in all, and files of at most MaxFileSize hashed.
type scanner struct {
	ctx     context.Context
	out     map[string]scanned
	entries int
	budget  int64
}

// scan walks the view opened as root.
func scan(ctx context.Context, root *os.File, budget int64) (map[string]scanned, error) {
	s := &scanner{ctx: ctx, out: map[string]scanned{}, budget: budget}
	return s.out, s.walk(root, "", 0)
}

func (s *scanner) walk(dir *os.File, rel string, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("%w: %s is more than %d folders deep", errTooMany, rel, MaxDepth)
	}
	for {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		names, err := dir.Readdirnames(1024)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, name := range names {
			s.entries++
			if s.entries > MaxEntries {
				return fmt.Errorf("%w: more than %d entries", errTooMany, MaxEntries)
			}
			if err := s.entry(dir, rel, name, depth); err != nil {
				return err
			}
		}
	}
}

func (s *scanner) entry(dir *os.File, rel, name string, depth int) error {
	p := name
	if rel != "" {
		p = path.Join(rel, name)
	}
	var st unix.Stat_t
	if err := rawFD(dir, func(fd int) error { return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) }); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // gone meanwhile
		}
		return &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	m := fileMode(&st)
	switch {
	case m.IsDir():
		sub, err := openAt(dir, name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			// Swapped for something else since the lstat: record what
			// it is now.
			s.out[p] = scanned{typ: TypeOther, mode: m}
			return nil
		}
		defer sub.Close()
		return s.walk(sub, p, depth+1)
	case m&fs.ModeSymlink != 0:
		t, err := readlinkAt(dir, name)
		if err != nil {
			s.out[p] = scanned{typ: TypeOther, mode: m}
			return nil
		}
		s.out[p] = scanned{typ: TypeSymlink, mode: m, size: int64(len(t)), hash: hashBytes([]byte(t))}
	case m.IsRegular():
		if st.Size > MaxFileSize {
			// Not read: a sparse file can claim any size.
			s.out[p] = scanned{typ: TypeFile, mode: m, size: st.Size}
			return nil
		}
		f, err := openAt(dir, name, unix.O_RDONLY)
		if err != nil {
			s.out[p] = scanned{typ: TypeOther, mode: m}
			return nil
		}
		defer f.Close()
		fst, err := f.Stat()
		if err != nil {
			return err
		}
		if !fst.Mode().IsRegular() {
			s.out[p] = scanned{typ: TypeOther, mode: fst.Mode()}
			return nil
		}
		if fst.Size() > MaxFileSize {
			s.out[p] = scanned{typ: TypeFile, mode: fst.Mode(), size: fst.Size()}
			return nil
		}
		s.budget -= fst.Size()
		if s.budget < 0 {
			return fmt.Errorf("%w: the view's files add up to more than its disk quota allows", errTooMany)
		}
		h, n, err := hashFile(s.ctx, f, MaxFileSize)
		if err != nil {
			if s.ctx.Err() != nil {
				return s.ctx.Err()
			}
			s.out[p] = scanned{typ: TypeFile, mode: fst.Mode(), size: MaxFileSize + 1}
			return nil
		}
		s.out[p] = scanned{typ: TypeFile, mode: fst.Mode(), size: n, hash: h}
	default:
		s.out[p] = scanned{typ: TypeOther, mode: m}
	}
	return nil
}
