package provision

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/pkgname"
)

// ErrPackages: the package manager could not install the manifest's
// packages, so the provision is not complete.
var ErrPackages = agentproto.Class(agentproto.ErrUpstream, "installing the image's packages failed")

// PackageTimeout bounds each package-manager command of a provision (the
// built-in toolset is a few hundred megabytes on a slow link).
const PackageTimeout = 30 * time.Minute

// Limits on what is kept from the guest's package cache: the cache is read
// back from the guest, so its names and sizes are checked like any guest
// input.
const (
	maxCacheFile  = 1 << 30
	maxCacheTotal = 4 << 30
)

// Packages installs a provision's packages in its running guest, as root,
// with the distro's package manager. The packages it downloads are kept in
// CacheDir on the host, and put back into a fresh guest before the next
// install, so a Reset installs them again without the network where the
// package manager allows it (apk's cache, apt's archives and lists).
type Packages struct {
	Agent *agentproto.Client
	// Distro decides the package manager: alpine (apk) or debian (apt).
	Distro   string
	CacheDir string
	Progress func(Progress)
	Logf     func(format string, args ...any)
}

// cacheArea is one folder of the guest's package cache.
type cacheArea struct {
	name  string // sub-folder of the host's cache
	guest string // the folder in the guest
	keep  func(file string) bool
}

// cacheFileName is what a cached file may be called: plain names, no
// folders, nothing a tar would read as a path.
var cacheFileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+~%:=-]{0,250}$`)

func cacheAreas(pm string) []cacheArea {
	switch pm {
	case "apk":
		// A folder at /etc/apk/cache turns apk's cache on; it keeps the
		// packages and the repositories' indexes, both signed, and apk
		// checks the signatures when it installs from the cache.
		return []cacheArea{{"apk", "/etc/apk/cache", func(f string) bool {
			return strings.HasSuffix(f, ".apk") || strings.HasPrefix(f, "APKINDEX.")
		}}}
	case "apt":
		// apt checks a cached .deb against the hash in its lists; the lists
		// are kept too, so an install needs no download at all.
		return []cacheArea{
			{"apt-archives", "/var/cache/apt/archives", func(f string) bool { return strings.HasSuffix(f, ".deb") }},
			{"apt-lists", "/var/lib/apt/lists", func(f string) bool { return f != "lock" }},
		}
	}
	return nil
}

// staleIndex matches package-manager output that a refreshed index may fix.
var staleIndex = regexp.MustCompile(`Unable to locate package|has no installation candidate|Failed to fetch|404 +Not Found|` +
	`unable to select packages|temporary error|UNTRUSTED signature|No such file or directory.*APKINDEX|Hash Sum mismatch`)

func (p *Packages) progress(phase string) {
	if p.Progress != nil {
		p.Progress(Progress{Phase: phase, Total: -1})
	}
}

func (p *Packages) logf(format string, args ...any) {
	if p.Logf != nil {
		p.Logf(format, args...)
	}
}

// Install installs pkgs. saveCache says the guest's root disk is fresh (only
// provisioning has run on it), so what its package manager downloaded may
// be kept for the next provision; a disk agents have used is never read
// into the cache.
func (p *Packages) Install(ctx context.Context, pkgs []string, saveCache bool) error {
	pm := pkgname.Manager(p.Distro)
	re, _, err := pkgname.For(pm)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPackages, err)
	}
	for _, n := range pkgs {
		if !re.MatchString(n) {
			return fmt.Errorf("%w: %q is not a valid %s package name", ErrPackages, n, p.Distro)
		}
	}
	p.progress("package-cache")
	restored, err := p.restoreCache(ctx, pm)
	if err != nil {
		// The cache only saves downloads: without it, download.
		p.logf("provision: the package cache was not restored (%v); downloading instead", err)
	}
	var install, update []string
	switch pm {
	case "apk":
		install = append([]string{"apk", "add"}, pkgs...)
		update = []string{"apk", "update"}
	case "apt":
		install = append([]string{"apt-get", "install", "-y", "-q", "--no-install-recommends",
			"-o", "DPkg::Lock::Timeout=60", "-o", "APT::Keep-Downloaded-Packages=true"}, pkgs...)
		update = []string{"apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=60"}
	}
	what := fmt.Sprintf("%s (%s)", strings.Join(pkgs, " "), install[0])
	p.progress("packages")
	if !restored[pm] {
		// No index in the guest yet (images ship without one).
		if out, err := p.run(ctx, update, nil); err != nil {
			return fmt.Errorf("%w: %s: refreshing the package index (%s) failed: %v: %s", ErrPackages, what, strings.Join(update, " "), err, tail(out))
		}
	}
	out, err := p.run(ctx, install, nil)
	if err != nil && restored[pm] && staleIndex.MatchString(out) {
		p.logf("provision: %s failed with the cached index; refreshing it and retrying", install[0])
		if out, err = p.run(ctx, update, nil); err == nil {
			out, err = p.run(ctx, install, nil)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v: %s", ErrPackages, what, err, tail(out))
	}
	if saveCache {
		p.progress("package-cache-save")
		if err := p.saveCache(ctx, pm); err != nil {
			p.logf("provision: keeping the downloaded packages failed (a Reset will download them again): %v", err)
		}
	}
	return nil
}

// run runs one command as root, confined to the guest's package mirror,
// and returns its combined output; a non-zero exit is an error.
func (p *Packages) run(ctx context.Context, argv []string, stdin io.Reader) (string, error) {
	w := &tailWriter{max: 64 << 10}
	out := w
	st, err := p.Agent.Exec(ctx, agentproto.ExecRequest{
		Argv: argv, Env: []string{"DEBIAN_FRONTEND=noninteractive"},
		Network: agentproto.NetworkPackageMirror, TimeoutMillis: PackageTimeout.Milliseconds(),
	}, stdin, w, w)
	p.logf("provision: %s: exit %d: %s", strings.Join(argv, " "), st.Code, lastLine(out.String()))
	switch {
	case err != nil:
		return out.String(), err
	case st.TimedOut:
		return out.String(), fmt.Errorf("%s did not finish within %s", argv[0], PackageTimeout)
	case st.Code != 0:
		return out.String(), fmt.Errorf("%s exited with code %d", argv[0], st.Code)
	}
	return out.String(), nil
}

// restoreCache copies the host's cache into the guest's package-manager
// folders. It reports, per package manager, whether an index came back
// (then the install may need no network at all).
func (p *Packages) restoreCache(ctx context.Context, pm string) (map[string]bool, error) {
	restored := map[string]bool{}
	for _, a := range cacheAreas(pm) {
		if _, err := p.run(ctx, []string{"mkdir", "-p", a.guest}, nil); err != nil {
			return restored, fmt.Errorf("mkdir %s: %w", a.guest, err)
		}
		files, err := cachedFiles(filepath.Join(p.CacheDir, a.name), a.keep)
		if err != nil || len(files) == 0 {
			continue
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeCacheTar(pw, filepath.Join(p.CacheDir, a.name), files)) }()
		out, err := p.run(ctx, []string{"tar", "-x", "-f", "-", "-C", a.guest}, pr)
		pr.Close()
		if err != nil {
			return restored, fmt.Errorf("restoring %s: %w: %s", a.guest, err, tail(out))
		}
		for _, f := range files {
			if (pm == "apk" && strings.HasPrefix(f, "APKINDEX.")) || (pm == "apt" && strings.HasSuffix(f, "_Packages")) {
				restored[pm] = true
			}
		}
		p.logf("provision: restored %d cached files into %s", len(files), a.guest)
	}
	return restored, nil
}

// cachedFiles lists the valid regular files of a host cache folder.
func cachedFiles(dir string, keep func(string) bool) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range ents {
		if e.Type().IsRegular() && cacheFileName.MatchString(e.Name()) && keep(e.Name()) {
			files = append(files, e.Name())
		}
	}
	slices.Sort(files)
	return files, nil
}

// writeCacheTar writes the files as a flat tar: plain names, regular files
// owned by root, so any tar extracts them only into the target folder.
func writeCacheTar(w io.Writer, dir string, files []string) error {
	tw := tar.NewWriter(w)
	for _, name := range files {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		st, err := f.Stat()
		if err == nil && !st.Mode().IsRegular() {
			err = fmt.Errorf("%s is not a regular file", name)
		}
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: st.Size(), Mode: 0o644, ModTime: st.ModTime()})
		}
		if err == nil {
			_, err = io.CopyN(tw, f, st.Size())
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// saveCache replaces the host's cache with the guest's package-manager
// folders. The guest's tar stream is hostile input: only regular files
// with plain names the area keeps are taken, within size limits.
func (p *Packages) saveCache(ctx context.Context, pm string) error {
	for _, a := range cacheAreas(pm) {
		dst := filepath.Join(p.CacheDir, a.name)
		tmp := dst + ".new"
		os.RemoveAll(tmp)
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return err
		}
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			err := readCacheTar(pr, tmp, a.keep)
			if err == nil {
				// tar pads its output past the end marker: read it all, or
				// the exec fails writing into a closed pipe.
				_, err = io.Copy(io.Discard, pr)
			}
			pr.CloseWithError(err)
			done <- err
		}()
		st, err := p.Agent.Exec(ctx, agentproto.ExecRequest{Argv: []string{"tar", "-c", "-f", "-", "-C", a.guest, "."},
			TimeoutMillis: PackageTimeout.Milliseconds()}, nil, pw, io.Discard)
		pw.Close()
		rerr := <-done
		if err == nil && st.Code != 0 {
			err = fmt.Errorf("tar exited with code %d", st.Code)
		}
		if err = errors.Join(err, rerr); err != nil {
			os.RemoveAll(tmp)
			return fmt.Errorf("%s: %w", a.guest, err)
		}
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
	}
	return nil
}

func readCacheTar(r io.Reader, dir string, keep func(string) bool) error {
	tr := tar.NewReader(r)
	var total int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(h.Name, "./")
		if h.Typeflag != tar.TypeReg || !cacheFileName.MatchString(name) || !keep(name) {
			continue // folders, links, sub-folders (partial downloads), locks
		}
		if h.Size > maxCacheFile || total+h.Size > maxCacheTotal {
			return fmt.Errorf("the package cache is over its limit (%s is %d bytes)", name, h.Size)
		}
		total += h.Size
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, err = io.CopyN(f, tr, h.Size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}

// tailWriter keeps the last max bytes written (stdout and stderr both).
type tailWriter struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, b...)
	if len(t.b) > 2*t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(b), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// lastLine is the last non-empty line of a command's output, for the log.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// tail keeps the end of a package manager's output, where its error is.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}
