package provision

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ulikunitz/xz"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/provision/download"
	"github.com/osaurus/osaurus-sandbox/provision/ext4"
	"github.com/osaurus/osaurus-sandbox/provision/initramfs"
	"github.com/osaurus/osaurus-sandbox/provision/kmod"
)

// ErrNotProvisioned: there is no complete provision in the layout.
var ErrNotProvisioned = agentproto.Class(agentproto.ErrUnavailable, "the sandbox is not provisioned")

// Layout places the VM's files under one directory.
type Layout struct{ Dir string }

func (l Layout) Kernel() string    { return filepath.Join(l.Dir, "kernel", "vmlinuz") }
func (l Layout) Initramfs() string { return filepath.Join(l.Dir, "initfs.cpio") }
func (l Layout) RootDisk() string  { return filepath.Join(l.Dir, "rootfs.ext4") }
func (l Layout) Modules() string   { return filepath.Join(l.Dir, "kernel", "modules") }
func (l Layout) Cache() string     { return filepath.Join(l.Dir, "cache") }
func (l Layout) Pins() string      { return filepath.Join(l.Dir, "pins.json") }
func (l Layout) StateFile() string { return filepath.Join(l.Dir, "provisioned.json") }

// State records a finished provision. It is written last: its presence
// means every file it names is complete.
type State struct {
	Arch         string `json:"arch"`
	Distro       string `json:"distro"`
	KernelSHA256 string `json:"kernelSha256"`
	// RootfsSHA256 is the root filesystem tarball's digest, or for an OCI
	// image "oci:sha256:<hex>" of the platform image's manifest.
	RootfsSHA256 string   `json:"rootfsSha256"`
	AgentSHA256  string   `json:"agentSha256"` // the agent inside the initramfs
	Modules      []string `json:"modules,omitempty"`
	// Packages are the manifest's packages, installed by the package
	// manager at the first boot; the state is only written once they are.
	Packages []string  `json:"packages,omitempty"`
	At       time.Time `json:"at"`

	// PendingPackages is set by Provision when the manifest has packages:
	// the files are built, but the provision is complete (and the state
	// written, by Commit) only once they are installed in the guest.
	PendingPackages []string `json:"-"`
	// FreshDisk: the root disk was made anew from the pristine image, so
	// nothing but provisioning has run on it yet.
	FreshDisk bool `json:"-"`
}

// Progress reports provisioning work: downloads in bytes, building in
// bytes of input consumed.
type Progress = download.Progress

// Provisioner builds the VM's files from a manifest.
type Provisioner struct {
	Layout   Layout
	Download *download.Client
	// Agent returns the static guest agent for an architecture.
	Agent func(arch string) ([]byte, error)
	// DiskSize of a new root disk; ext4.DefaultSize (8 GiB) when zero.
	DiskSize int64
	// Progress, when set, receives progress events.
	Progress func(Progress)
}

func (p *Provisioner) progress(ev Progress) {
	if p.Progress != nil {
		p.Progress(ev)
	}
}

// Load returns the state of a finished provision, or ErrNotProvisioned.
func (p *Provisioner) Load() (*State, error) {
	b, err := os.ReadFile(p.Layout.StateFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotProvisioned
	}
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%w: %s is damaged (%v); provision again", ErrNotProvisioned, p.Layout.StateFile(), err)
	}
	for _, f := range []string{p.Layout.Kernel(), p.Layout.Initramfs(), p.Layout.RootDisk()} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%w: %s is missing", ErrNotProvisioned, f)
		}
	}
	return &st, nil
}

// Provision downloads and builds everything. An existing root disk made
// from the same root filesystem is kept: it holds what the agents
// installed. Downloads already in the cache are reused, so a second
// provision works offline.
func (p *Provisioner) Provision(ctx context.Context, m *Manifest) (*State, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	agent, err := p.Agent(m.Arch)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{p.Layout.Dir, p.Layout.Cache(), filepath.Dir(p.Layout.Kernel())} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	old, _ := p.Load()
	// A provision in progress is not a provision: drop the marker first so
	// a crash halfway leaves "not provisioned", never a mix.
	if err := os.Remove(p.Layout.StateFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}

	kernelFile, kernelSHA, err := p.fetch(ctx, "kernel", &m.Kernel)
	if err != nil {
		return nil, err
	}
	var modulesFile, modulesSHA string
	if m.Modules != nil {
		if modulesFile, modulesSHA, err = p.fetch(ctx, "modules", m.Modules); err != nil {
			return nil, err
		}
	}
	rootfs, err := p.rootfs(ctx, m)
	if err != nil {
		return nil, err
	}

	p.progress(Progress{Phase: "kernel-extract", Total: -1})
	if err := extractKernel(kernelFile, &m.Kernel, m.Arch, p.Layout.Kernel()); err != nil {
		return nil, err
	}
	var mods []kmod.Module
	if m.Modules != nil {
		p.progress(Progress{Phase: "modules", Total: -1})
		if mods, err = p.modules(ctx, modulesFile, modulesSHA, m.Modules); err != nil {
			return nil, err
		}
	}
	if err := saveModules(p.Layout.Modules(), mods); err != nil {
		return nil, err
	}
	p.progress(Progress{Phase: "initramfs", Total: -1})
	if err := writeInitramfs(p.Layout.Initramfs(), agent, mods); err != nil {
		return nil, err
	}
	keepDisk := old != nil && old.RootfsSHA256 == rootfs.id && fileExists(p.Layout.RootDisk())
	if !keepDisk {
		if err := p.buildDisk(ctx, rootfs, agent); err != nil {
			return nil, err
		}
	}
	st := &State{
		Arch: m.Arch, Distro: m.Distro,
		KernelSHA256: kernelSHA, RootfsSHA256: rootfs.id,
		AgentSHA256: sha256Hex(agent), At: time.Now().UTC(),
	}
	for _, mod := range mods {
		st.Modules = append(st.Modules, mod.Name)
	}
	st.FreshDisk = !keepDisk
	if len(m.Packages) > 0 {
		// Not provisioned until the packages are in: the caller boots
		// the guest, installs them and calls Commit.
		st.PendingPackages = slices.Clone(m.Packages)
		return st, nil
	}
	if err := p.Commit(st); err != nil {
		return nil, err
	}
	return st, nil
}

// Commit records a finished provision (after its packages, if any, are
// installed): from now on Load finds it.
func (p *Provisioner) Commit(st *State) error {
	if len(st.PendingPackages) > 0 {
		st.Packages, st.PendingPackages = st.PendingPackages, nil
	}
	if err := writeState(p.Layout.StateFile(), st); err != nil {
		return err
	}
	p.progress(Progress{Phase: "done", Done: 1, Total: 1})
	return nil
}

// RefreshAgent rebuilds the initramfs when the app carries a different
// guest agent than the one provisioned, so an app update reaches the guest
// without a new provision. Modules are taken from the current initramfs.
func (p *Provisioner) RefreshAgent(st *State) error {
	agent, err := p.Agent(st.Arch)
	if err != nil {
		return err
	}
	sum := sha256Hex(agent)
	if sum == st.AgentSHA256 {
		return nil
	}
	mods, err := readModules(p.Layout.Modules())
	if err != nil {
		return err
	}
	if err := writeInitramfs(p.Layout.Initramfs(), agent, mods); err != nil {
		return err
	}
	st.AgentSHA256 = sum
	return writeState(p.Layout.StateFile(), st)
}

// fetch downloads an artifact into the cache, verified.
func (p *Provisioner) fetch(ctx context.Context, phase string, a *Artifact) (file, sum string, err error) {
	dest := filepath.Join(p.Layout.Cache(), cacheName(a.URL))
	pins := &download.Pins{Path: p.Layout.Pins()}
	want, err := download.ExpectedDigest(ctx, p.Download, pins, a.URL, a.SHA256, a.ChecksumURL)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", phase, err)
	}
	sum, err = p.Download.Fetch(ctx, download.Request{URL: a.URL, SHA256: want, Dest: dest, Phase: phase}, p.Progress)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", phase, err)
	}
	if a.SHA256 == "" {
		if err := pins.Record(a.URL, sum); err != nil {
			return "", "", fmt.Errorf("%s: %w", phase, err)
		}
	}
	return dest, sum, nil
}

// cacheName keeps the file name readable and distinct per URL.
func cacheName(u string) string {
	base := path.Base(u)
	if i := strings.IndexAny(base, "?#"); i >= 0 {
		base = base[:i]
	}
	return sha256Hex([]byte(u))[:12] + "-" + base
}

// openArtifact returns a reader over a downloaded artifact's decompressed
// content (a tar stream for tar formats).
func openArtifact(file, format string) (io.ReadCloser, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	var r io.Reader = f
	switch format {
	case FormatGzip, FormatTarGz:
		gz, err := gzip.NewReader(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		r = gz
	case FormatXz, FormatTarXz:
		xr, err := xz.NewReader(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		r = xr
	}
	return struct {
		io.Reader
		io.Closer
	}{r, f}, nil
}

func isTar(format string) bool {
	return format == FormatTar || format == FormatTarGz || format == FormatTarXz
}

func cleanTarName(n string) string {
	return strings.TrimPrefix(path.Clean("/"+n), "/")
}

func extractKernel(file string, a *Artifact, arch, dst string) error {
	rc, err := openArtifact(file, a.Format)
	if err != nil {
		return fmt.Errorf("kernel: %w", err)
	}
	defer rc.Close()
	var r io.Reader = rc
	if isTar(a.Format) {
		tr := tar.NewReader(rc)
		want := cleanTarName(a.Member)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return fmt.Errorf("kernel: member %q not found in %s", a.Member, a.URL)
			}
			if err != nil {
				return fmt.Errorf("kernel: reading %s: %w", a.URL, err)
			}
			if cleanTarName(h.Name) == want && h.Typeflag == tar.TypeReg {
				r = tr
				break
			}
		}
	}
	if arch != "arm64" {
		// Streamed to the file: a whole kernel in memory would stay in
		// the owner's resident set after provisioning.
		var n int64
		err := atomicfile.Write(dst, 0o644, func(w io.Writer) (err error) {
			n, err = io.Copy(w, io.LimitReader(r, maxKernel+1))
			switch {
			case err != nil:
				return err
			case n > maxKernel:
				return fmt.Errorf("%s member %q is larger than %d bytes", a.URL, a.Member, maxKernel)
			case n < minKernel:
				return fmt.Errorf("%s member %q is only %d bytes; not a kernel", a.URL, a.Member, n)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("kernel: %w", err)
		}
		return nil
	}
	// arm64 needs the whole file: the Image is found and unpacked from
	// inside it (EFI zboot, gzip).
	data, err := io.ReadAll(io.LimitReader(r, maxKernel+1))
	if err != nil {
		return fmt.Errorf("kernel: %w", err)
	}
	if data, err = arm64Image(data); err != nil {
		return fmt.Errorf("kernel: %s member %q: %w", a.URL, a.Member, err)
	}
	if len(data) < minKernel {
		return fmt.Errorf("kernel: %s member %q is only %d bytes; not a kernel", a.URL, a.Member, len(data))
	}
	return atomicfile.WriteFile(dst, data, 0o644)
}

// minKernel is the size below which a file is not taken for a kernel.
const minKernel = 4096

func writeInitramfs(dst string, agent []byte, mods []kmod.Module) error {
	return atomicfile.Write(dst, 0o644, func(w io.Writer) error {
		return initramfs.Build(w, initramfs.Spec{Init: agent, Modules: mods})
	})
}

// AgentPathOnDisk is where the root disk carries a copy of the guest agent
// (the host bridge CLI is the same binary).
const AgentPathOnDisk = "usr/local/bin/sandbox-agent"

// rootfsSource is a root filesystem ready to be read as one tar stream.
type rootfsSource struct {
	id    string // State.RootfsSHA256
	total int64  // bytes the stream's progress counts towards, -1 if unknown
	open  func() (io.ReadCloser, error)
}

// rootfs fetches the root filesystem: a tarball download or an OCI pull.
func (p *Provisioner) rootfs(ctx context.Context, m *Manifest) (*rootfsSource, error) {
	if m.Rootfs.Format == FormatOCI {
		return p.pullImage(ctx, m.Rootfs.OCI, m.Arch)
	}
	file, sum, err := p.fetch(ctx, "rootfs", &m.Rootfs)
	if err != nil {
		return nil, err
	}
	src := &rootfsSource{id: sum, total: -1, open: func() (io.ReadCloser, error) { return openArtifact(file, m.Rootfs.Format) }}
	if m.Rootfs.Format == FormatTar {
		// Decompressed sizes are unknown: only a plain tar has a total.
		if st, err := os.Stat(file); err == nil {
			src.total = st.Size()
		}
	}
	return src, nil
}

// diskLabel is the root disk's ext4 label.
const diskLabel = "sandbox-root"

// buildDisk makes the root disk from src. Building ext4 from the root
// filesystem's tar stream takes most of a provision (seconds to minutes),
// so the pristine disk is kept in the cache keyed by its inputs, and a
// provision with the same inputs (a Reset) is a sparse copy of it.
func (p *Provisioner) buildDisk(ctx context.Context, src *rootfsSource, agent []byte) error {
	size := p.DiskSize
	if size == 0 {
		size = ext4.DefaultSize
	}
	cached := p.Layout.cachedDiskPath(diskCacheKey(src.id, agent, size))
	if !fileExists(cached) {
		if err := p.buildPristineDisk(ctx, cached, src, agent, size); err != nil {
			return err
		}
		p.Layout.pruneCachedDisks(cached)
	}
	p.progress(Progress{Phase: "disk-copy", Total: -1})
	if err := copySparse(ctx, p.Layout.RootDisk(), cached); err != nil {
		return fmt.Errorf("root disk: %w", err)
	}
	return nil
}

// buildPristineDisk builds the root disk from the tar stream into dst
// (atomically: a failed build leaves no file there).
func (p *Provisioner) buildPristineDisk(ctx context.Context, dst string, src *rootfsSource, agent []byte, size int64) error {
	rc, err := src.open()
	if err != nil {
		return fmt.Errorf("root disk: %w", err)
	}
	defer rc.Close()
	cr := &countingReader{r: rc, total: src.total, report: p.progress}
	_, err = ext4.BuildFromTar(ctx, dst, cr, ext4.Options{
		Size:  size,
		Label: diskLabel,
		Extra: []ext4.File{{Path: AgentPathOnDisk, Mode: 0o755, Data: agent}},
	})
	if err != nil {
		return fmt.Errorf("root disk: %w", err)
	}
	return nil
}

type countingReader struct {
	r      io.Reader
	n      int64
	total  int64
	last   time.Time
	report func(Progress)
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	if now := time.Now(); now.Sub(c.last) > 200*time.Millisecond || err == io.EOF {
		c.last = now
		c.report(Progress{Phase: "disk", Done: c.n, Total: c.total})
	}
	return n, err
}

func writeState(path string, st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o644)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// saveModules keeps the resolved modules beside the kernel, in load order,
// so the initramfs can be rebuilt for a new agent without the download cache.
func saveModules(dir string, mods []kmod.Module) error {
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	var order strings.Builder
	for i, m := range mods {
		if err := kmod.CheckName(m.Name); err != nil {
			return err
		}
		name := fmt.Sprintf("%02d-%s.ko", i+1, m.Name)
		if err := os.WriteFile(filepath.Join(tmp, name), m.Data, 0o644); err != nil {
			return err
		}
		order.WriteString(name + "\n")
	}
	if err := os.WriteFile(filepath.Join(tmp, "order"), []byte(order.String()), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

func readModules(dir string) ([]kmod.Module, error) {
	order, err := os.ReadFile(filepath.Join(dir, "order"))
	if err != nil {
		return nil, fmt.Errorf("%w: saved kernel modules: %v", ErrNotProvisioned, err)
	}
	var mods []kmod.Module
	for _, name := range strings.Fields(string(order)) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%w: saved kernel modules: %v", ErrNotProvisioned, err)
		}
		_, mod, _ := strings.Cut(strings.TrimSuffix(name, ".ko"), "-")
		mods = append(mods, kmod.Module{Name: mod, Data: data})
	}
	return mods, nil
}
