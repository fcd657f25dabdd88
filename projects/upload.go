package projects

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/termsafe"
)

// A project of another machine (docs/projects.md, "Projects on another
// machine"): its command line walks the user's folder and streams it as
// a tar of plain files and folders (SendUpload); the owner here writes it
// into a folder of its own data folder (ReceiveUpload) and records that as
// the project. The user's folder is never reachable from here, and what
// arrives is treated as hostile: names are checked, nothing but files
// and folders is made, and sizes are bounded.

// Bounds on an upload: its files' bytes in all, and its entries.
const (
	MaxUploadBytes   = 2 << 30
	MaxUploadEntries = 100_000
)

// ErrTooBig: the folder is bigger than an upload may be.
var ErrTooBig = agentproto.Class(agentproto.ErrInvalid, "too big to upload")

// UploadStats says what SendUpload sent and left out.
type UploadStats struct {
	Files, Dirs int
	Bytes       int64
	// Skipped are the links, devices, fifos and sockets left out (links
	// are never followed), with why.
	Skipped []Skipped
}

// SendUpload writes dir as a tar to w: folders and regular files with
// their permission bits (set-uid and set-gid dropped), read through an
// os.Root with no link followed; links and special files are left out
// and listed. More than MaxUploadBytes or MaxUploadEntries fails before
// the rest is sent.
func SendUpload(ctx context.Context, dir string, w io.Writer) (UploadStats, error) {
	var st UploadStats
	src, err := os.OpenRoot(dir)
	if err != nil {
		return st, err
	}
	defer src.Close()
	tw := tar.NewWriter(w)
	err = fs.WalkDir(src.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if rel == "." {
			return nil
		}
		if st.Files+st.Dirs >= MaxUploadEntries {
			return fmt.Errorf("%w: %s holds more than %d files and folders; choose a smaller folder", ErrTooBig, dir, MaxUploadEntries)
		}
		switch {
		case d.IsDir():
			info, err := d.Info()
			if err != nil {
				return err
			}
			st.Dirs++
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: int64(info.Mode().Perm()), ModTime: info.ModTime()})
		case d.Type().IsRegular():
			f, err := src.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			info, err := f.Stat()
			if err != nil {
				return err
			}
			if !info.Mode().IsRegular() {
				st.Skipped = append(st.Skipped, Skipped{rel, "changed type while read"})
				return nil
			}
			if st.Bytes+info.Size() > MaxUploadBytes {
				return fmt.Errorf("%w: %s holds more than %d bytes; choose a smaller folder", ErrTooBig, dir, MaxUploadBytes)
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: int64(info.Mode().Perm()), Size: info.Size(), ModTime: info.ModTime()}); err != nil {
				return err
			}
			// A file that shrank while read fails the tar writer; one
			// that grew sends what its header said.
			if _, err := io.Copy(tw, io.LimitReader(ctxReader{ctx, f}, info.Size())); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			st.Files++
			st.Bytes += info.Size()
		case d.Type()&fs.ModeSymlink != 0:
			st.Skipped = append(st.Skipped, Skipped{rel, "a symbolic link: not followed, not uploaded"})
		default:
			st.Skipped = append(st.Skipped, Skipped{rel, "not a regular file (device, fifo or socket): not uploaded"})
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	return st, tw.Close()
}

// uploadPath reports whether name (from the network) is a path an
// upload may make: relative, clean, no "..", no NUL, bounded.
func uploadPath(name string) bool {
	if name == "" || name == "." || len(name) > 4096 || strings.HasPrefix(name, "/") || path.Clean(name) != name || strings.ContainsRune(name, 0) {
		return false
	}
	parts := strings.Split(name, "/")
	if len(parts) > MaxDepth {
		return false
	}
	for _, c := range parts {
		if c == ".." || c == "." || c == "" || len(c) > 255 {
			return false
		}
	}
	return true
}

// Uploads is the folder of a data folder's uploaded projects.
func Uploads(dataRoot string) string { return filepath.Join(dataRoot, "uploads") }

// ReceiveUpload reads a tar SendUpload made from r into a new folder of
// the data folder (Uploads/NAME, closed to everyone else) and records it
// as project name, uploaded from from (a description of the other
// machine's folder, shown only). The tar is written beneath an os.Root of
// a staging folder, each name checked first; only folders and regular
// files are made, and the bounds SendUpload keeps are kept here again.
// The project appears only once the whole upload arrived.
func ReceiveUpload(ctx context.Context, r io.Reader, listPath, dataRoot, name, from string) (Project, error) {
	if !agents.ValidProjectName(name) {
		return Project{}, fmt.Errorf("%w: name: %q, want %s (set it with --name)", ErrInvalid, name, agents.ProjectNameRule)
	}
	if p, err := Get(listPath, name); err == nil {
		return Project{}, fmt.Errorf("%w: the name %q is taken by %s; choose another with --name", ErrExists, name, termsafe.Line(p.Path))
	} else if !errors.Is(err, ErrNotFound) {
		return Project{}, err
	}
	up := Uploads(dataRoot)
	if err := os.MkdirAll(up, 0o700); err != nil {
		return Project{}, err
	}
	if err := os.Chmod(up, 0o700); err != nil {
		return Project{}, err
	}
	tmp, err := os.MkdirTemp(up, ".incoming-")
	if err != nil {
		return Project{}, err
	}
	defer os.RemoveAll(tmp)
	out, err := os.OpenRoot(tmp)
	if err != nil {
		return Project{}, err
	}
	defer out.Close()
	tr := tar.NewReader(r)
	var bytes int64
	entries := 0
	for {
		if ctx.Err() != nil {
			return Project{}, ctx.Err()
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Project{}, fmt.Errorf("%w: the upload: %v", ErrInvalid, err)
		}
		rel := strings.TrimSuffix(h.Name, "/")
		if !uploadPath(rel) {
			return Project{}, fmt.Errorf("%w: the upload names %q, not a relative path in the folder", ErrInvalid, termsafe.Line(h.Name))
		}
		if entries++; entries > MaxUploadEntries {
			return Project{}, fmt.Errorf("%w: more than %d files and folders", ErrTooBig, MaxUploadEntries)
		}
		// Permission bits only: no set-uid, set-gid or sticky file is
		// made from the network.
		mode := fs.FileMode(h.Mode).Perm()
		if dir := path.Dir(rel); dir != "." {
			if err := out.MkdirAll(dir, 0o700); err != nil {
				return Project{}, err
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := out.Mkdir(rel, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return Project{}, err
			}
			if err := out.Chmod(rel, mode|0o700); err != nil {
				return Project{}, err
			}
		case tar.TypeReg:
			if h.Size < 0 || bytes+h.Size > MaxUploadBytes {
				return Project{}, fmt.Errorf("%w: more than %d bytes", ErrTooBig, MaxUploadBytes)
			}
			bytes += h.Size
			w, err := out.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
			if err != nil {
				return Project{}, err
			}
			n, err := io.Copy(w, io.LimitReader(ctxReader{ctx, tr}, h.Size))
			if err == nil && n != h.Size {
				err = fmt.Errorf("%w: %s ended after %d of %d bytes", ErrInvalid, termsafe.Line(rel), n, h.Size)
			}
			if err == nil {
				err = w.Chmod(mode | 0o600)
			}
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return Project{}, err
			}
		default:
			return Project{}, fmt.Errorf("%w: the upload holds %s of type %q: only folders and regular files are uploaded", ErrInvalid, termsafe.Line(rel), string(h.Typeflag))
		}
	}
	if err := out.Chmod(".", 0o700); err != nil {
		return Project{}, err
	}
	dst := filepath.Join(up, name)
	// No project has the name (checked above): what is there is left
	// from an upload that failed to register.
	if err := os.RemoveAll(dst); err != nil {
		return Project{}, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return Project{}, err
	}
	p, err := add(listPath, dst, name, dataRoot, from)
	if err != nil {
		os.RemoveAll(dst)
		return Project{}, err
	}
	return p, nil
}

// RemoveUpload deletes the owner's copy of an uploaded project (after
// Remove forgot it); a project of this machine's own folder is never
// touched.
func RemoveUpload(p Project, dataRoot string) error {
	if p.UploadedFrom == "" {
		return nil
	}
	dst := filepath.Join(Uploads(dataRoot), p.Name)
	real, _ := filepath.EvalSymlinks(dst)
	if p.Path != dst && p.Path != real {
		return nil // not where an upload goes: never delete it
	}
	return os.RemoveAll(dst)
}
