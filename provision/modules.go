package provision

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/provision/kmod"
	"github.com/osaurus/osaurus-sandbox/provision/squashfs"
)

// ErrAmbiguousDir: a modules dir pattern matches more than one directory.
var ErrAmbiguousDir = agentproto.Class(agentproto.ErrInvalid, "modules dir pattern matches more than one directory")

// modules unpacks the modules subtree once per artifact (digest, member
// and dir) and resolves the modules the guest needs.
func (p *Provisioner) modules(ctx context.Context, file, sum string, a *Artifact) ([]kmod.Module, error) {
	key := sha256Hex([]byte(strings.Join([]string{sum, a.Member, a.MemberFormat, a.Dir}, "\x00")))
	dir := filepath.Join(p.Layout.Cache(), "modules-"+key[:16])
	if !fileExists(filepath.Join(dir, ".complete")) {
		if err := extractTree(ctx, file, a, dir); err != nil {
			return nil, fmt.Errorf("modules: %w", err)
		}
	}
	tree := os.DirFS(dir)
	names := kmod.GuestModules()
	// Some kernels build these as modules (Alpine's virt kernel has ext4 as
	// a module, and ext4 wants a crc32c implementation it only names as a
	// soft dependency); others build them in or lack them. Take them when
	// the kernel ships them.
	for _, opt := range kmod.OptionalGuestModules() {
		if _, err := kmod.Resolve(tree, opt); err == nil {
			names = append(names, opt)
		}
	}
	mods, err := kmod.Resolve(tree, names...)
	if err != nil {
		return nil, fmt.Errorf("modules: %w", err)
	}
	return mods, nil
}

// extractTree unpacks the regular files under the directory a.Dir matches
// into dst, from a tar, a SquashFS image, or a SquashFS member of a tar.
// It is built in a temp dir and renamed when complete.
func extractTree(ctx context.Context, file string, a *Artifact, dst string) error {
	pattern, err := dirPattern(a.Dir)
	if err != nil {
		return err
	}
	tmp := dst + ".tmp"
	os.RemoveAll(tmp)
	os.RemoveAll(dst)
	x := &treeWriter{ctx: ctx, pattern: pattern, dir: tmp}
	switch {
	case a.Format == FormatSquashfs:
		err = x.fromSquashfs(file)
	case a.MemberFormat == FormatSquashfs:
		err = x.fromSquashfsMember(file, a, dst+".member")
	default:
		err = x.fromTar(file, a.Format)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if x.files == 0 {
		os.RemoveAll(tmp)
		return fmt.Errorf("no files under %q in %s", a.Dir, describe(a))
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

func describe(a *Artifact) string {
	if a.Member != "" {
		return a.URL + " member " + a.Member
	}
	return a.URL
}

// treeWriter writes the files whose path lies under a directory matching
// pattern, relative to that directory.
type treeWriter struct {
	ctx     context.Context
	pattern []string
	dir     string
	matched string // the directory the pattern resolved to
	files   int
}

// rel reports where name goes below the matched directory. It is "" for a
// name outside every match.
func (x *treeWriter) rel(name string) (string, error) {
	parts := strings.Split(name, "/")
	if len(parts) <= len(x.pattern) {
		return "", nil
	}
	for i, p := range x.pattern {
		if ok, _ := path.Match(p, parts[i]); !ok {
			return "", nil
		}
	}
	prefix := path.Join(parts[:len(x.pattern)]...)
	switch x.matched {
	case "":
		x.matched = prefix
	case prefix:
	default:
		return "", fmt.Errorf("%w: %q matches %s and %s; make it name one (e.g. %s)",
			ErrAmbiguousDir, path.Join(x.pattern...), x.matched, prefix, x.matched)
	}
	return path.Join(parts[len(x.pattern):]...), nil
}

func (x *treeWriter) add(name string, r io.Reader) error {
	if err := x.ctx.Err(); err != nil {
		return err
	}
	rel, err := x.rel(name)
	if err != nil || rel == "" {
		return err
	}
	out := filepath.Join(x.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	x.files++
	return nil
}

func (x *treeWriter) fromTar(file, format string) error {
	rc, err := openArtifact(file, format)
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if err := x.add(cleanTarName(h.Name), tr); err != nil {
				return err
			}
		}
	}
}

// fromSquashfsMember copies the tar member out (SquashFS needs random
// access), reads it, and removes the copy.
func (x *treeWriter) fromSquashfsMember(file string, a *Artifact, tmp string) error {
	rc, err := openArtifact(file, a.Format)
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	want := cleanTarName(a.Member)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fmt.Errorf("member %q not found in %s", a.Member, a.URL)
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", a.URL, err)
		}
		if cleanTarName(h.Name) == want && h.Typeflag == tar.TypeReg {
			break
		}
	}
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	_, err = io.Copy(f, &ctxReader{ctx: x.ctx, r: tr})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := x.fromSquashfs(tmp); err != nil {
		return fmt.Errorf("%s: %w", describe(a), err)
	}
	return nil
}

func (x *treeWriter) fromSquashfs(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	sq, err := squashfs.Open(f)
	if err != nil {
		return err
	}
	defer sq.Close()
	return fs.WalkDir(sq, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Only descend along the pattern: a modloop also holds firmware.
			if p != "." && !x.onPath(p) {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		r, err := sq.Open(p)
		if err != nil {
			return err
		}
		defer r.Close()
		return x.add(p, r)
	})
}

// onPath reports whether directory p may lead to a match.
func (x *treeWriter) onPath(p string) bool {
	parts := strings.Split(p, "/")
	for i := 0; i < len(parts) && i < len(x.pattern); i++ {
		if ok, _ := path.Match(x.pattern[i], parts[i]); !ok {
			return false
		}
	}
	return true
}

// ctxReader stops a long copy when ctx is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}
