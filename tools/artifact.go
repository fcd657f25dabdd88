package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// MaxKeptArtifacts bounds the bytes of one agent's kept artifacts (the
// host's verified copies); the oldest go first when a share passes it.
const MaxKeptArtifacts = 1 << 30

// ErrArtifactChanged: an artifact under /output is no longer the file
// that was shared (a symlink, not a regular file, other bytes).
var ErrArtifactChanged = agentproto.Class(agentproto.ErrPermission, "the artifact changed since it was shared")

// OpenArtifact opens the artifact /output/<slug>/<name> in the host's
// output folder as the host may read it: beneath outputDir (no path
// string is resolved in the agent's tree), not through a symlink, without
// blocking (a FIFO), a regular file of at most MaxShareBytes whose bytes
// hash to sum (hex SHA-256, as recorded at share time). The file is read
// whole to check it and returned at offset 0; anything else is refused
// with ErrArtifactChanged. /output/<slug> is the agent's: it can replace
// an artifact at any time, with a link to the user's files too.
func OpenArtifact(ctx context.Context, outputDir, slug, name, sum string) (*os.File, error) {
	if !validArtifactName(slug) || !validArtifactName(name) {
		return nil, fmt.Errorf("artifact %q of %q: not a plain file name", name, slug)
	}
	root, err := os.OpenRoot(outputDir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	rel := slug + "/" + name
	// Lstat then open, then the open file's own stat: the link check and
	// the descriptor are of one file, or the open is refused. os.Root keeps
	// a link swapped in between from leading out of outputDir, and the
	// hash check below any in-tree substitute with other bytes.
	li, err := root.Lstat(rel)
	if err != nil {
		return nil, err
	}
	if !li.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is a %s, not the regular file shared", ErrArtifactChanged, rel, typeName(li.Mode()))
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrArtifactChanged, rel, err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case !fi.Mode().IsRegular() || !os.SameFile(li, fi):
		return nil, fmt.Errorf("%w: %s was replaced while it was opened", ErrArtifactChanged, rel)
	case fi.Size() > MaxShareBytes:
		return nil, fmt.Errorf("%w: %s is %d bytes, over the %d shared at most", ErrArtifactChanged, rel, fi.Size(), MaxShareBytes)
	}
	got, err := hashReader(ctx, io.LimitReader(f, MaxShareBytes+1), io.Discard)
	if err != nil {
		return nil, err
	}
	if got != sum {
		return nil, fmt.Errorf("%w: %s holds other bytes (SHA-256 %s, shared %s)", ErrArtifactChanged, rel, got, sum)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	ok = true
	return f, nil
}

// keepArtifact copies the artifact just shared, checked by OpenArtifact,
// into keepDir/<slug>/<name>: the host file the result's host_path and
// resource link name. keepDir is the host's alone (not shared with the
// VM), so what a client opens later is what was shared, whatever the
// agent does to /output afterwards. It returns the copy's path.
func keepArtifact(ctx context.Context, outputDir, keepDir, slug, name, sum string) (string, error) {
	src, err := OpenArtifact(ctx, outputDir, slug, name, sum)
	if err != nil {
		return "", err
	}
	defer src.Close()
	dir := filepath.Join(keepDir, slug)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".keep-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	// Hashed again as copied: the bytes written are the bytes checked.
	got, err := hashReader(ctx, io.LimitReader(src, MaxShareBytes+1), tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	if got != sum {
		return "", fmt.Errorf("%w: %s/%s changed while it was copied", ErrArtifactChanged, slug, name)
	}
	dst := filepath.Join(dir, name)
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", err
	}
	pruneKept(dir, dst)
	return dst, nil
}

// pruneKept removes dir's oldest copies (never keep) while they pass
// MaxKeptArtifacts.
func pruneKept(dir, keep string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type kept struct {
		path string
		fi   os.FileInfo
	}
	var all []kept
	var total int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || strings.HasPrefix(e.Name(), ".keep-") {
			continue
		}
		all = append(all, kept{filepath.Join(dir, e.Name()), fi})
		total += fi.Size()
	}
	sort.Slice(all, func(i, j int) bool { return all[i].fi.ModTime().Before(all[j].fi.ModTime()) })
	for _, k := range all {
		if total <= MaxKeptArtifacts {
			return
		}
		if k.path != keep && os.Remove(k.path) == nil {
			total -= k.fi.Size()
		}
	}
}

// hashReader copies r to w and returns the hex SHA-256 of what passed,
// stopping when ctx ends.
func hashReader(ctx context.Context, r io.Reader, w io.Writer) (string, error) {
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, err := r.Read(buf)
		if n > 0 {
			h.Write(buf[:n])
			if _, werr := w.Write(buf[:n]); werr != nil {
				return "", werr
			}
		}
		if errors.Is(err, io.EOF) {
			return hex.EncodeToString(h.Sum(nil)), nil
		}
		if err != nil {
			return "", err
		}
	}
}

func validArtifactName(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) <= 255 && !strings.ContainsAny(s, "/\x00")
}

func typeName(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "symlink"
	case m.IsDir():
		return "directory"
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	}
	return "special file"
}
