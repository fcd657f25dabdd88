// Package kmod resolves Linux kernel modules and their dependencies from a
// kernel's modules tree without depmod or any other external tool, so the
// host can assemble a guest initramfs on Linux and macOS alike.
//
// Dependencies come from each module's own ELF ".modinfo" section
// ("depends="), not from modules.dep: distribution kernel packages (Debian's
// among them) generate modules.dep at install time and do not ship it.
// Soft dependencies ("softdep=") are not followed.
package kmod

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/ulikunitz/xz"
)

// ErrNotFound is returned (wrapped) when a wanted module, or a dependency of
// one, is neither a module file in the tree nor built into the kernel.
var ErrNotFound = errdefs.Class(errdefs.ErrNotFound, "kernel module not found")

// Module is a loadable kernel module ready to be handed to finit_module.
type Module struct {
	// Name is the module's canonical name from its .modinfo ("virtio_pci").
	Name string
	// Data is the uncompressed ELF object.
	Data []byte
}

// GuestModules returns the modules the sandbox guest needs on a modular
// kernel such as Debian's cloud kernel, where the virtio transports are
// modules (ext4 is built in there). Their dependencies (virtio, virtio_ring,
// failover, fuse, vsock, ...) are added by Resolve.
func GuestModules() []string {
	return []string{
		"virtio_pci",
		"virtio_blk",
		"virtio_net",
		"virtio_console",
		"virtiofs",
		"vmw_vsock_virtio_transport",
		// Entropy early in boot, before the agent generates keys or tokens.
		"virtio_rng",
	}
}

// OptionalGuestModules are loaded when the kernel ships them as modules and
// skipped when it doesn't: the root filesystem's driver and the crc32c
// implementation ext4 asks for only as a soft dependency (which Resolve
// does not follow).
//
// The network policy's modules are here too: veth for each agent's own
// network namespace, nftables with NAT and reject for its rules, and the
// nft log expression with NFLOG for the log of refused connections. A
// kernel without them still boots; the guest agent then refuses any
// policy but none (or records only the proxy's refusals), saying why.
func OptionalGuestModules() []string {
	return []string{"crc32c_generic", "ext4",
		"veth", "nf_tables", "nft_chain_nat", "nft_masq", "nft_reject_inet",
		"nft_log", "nfnetlink_log"}
}

// ErrBadName: a module name from an image is not a kernel module name.
var ErrBadName = errdefs.Class(errdefs.ErrInvalid, "invalid module name")

// CheckName accepts what the kernel does as a module name (letters,
// digits, '_' and '-', at most 55 bytes) and nothing else. Module names
// come from images, which may be hostile, and become file names on the
// host, so nothing that could be a path or a control character gets by.
func CheckName(name string) error {
	if name == "" || len(name) > 55 {
		return fmt.Errorf("%w: %q: want 1 to 55 characters", ErrBadName, name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q: only letters, digits, '_' and '-' are allowed", ErrBadName, name)
		}
	}
	return nil
}

// NormalizeName returns the canonical spelling of a module name: the kernel
// treats '-' and '_' in module names as the same character.
func NormalizeName(name string) string {
	return strings.ReplaceAll(name, "-", "_")
}

// Resolve finds the named modules in modulesRoot (the contents of a
// lib/modules/<version> directory) and returns them together with all their
// dependencies in load order: every module comes after the modules it depends
// on, and none appears twice. Modules built into the kernel (listed in
// modules.builtin or modules.builtin.modinfo) are left out without error.
func Resolve(modulesRoot fs.FS, names ...string) ([]Module, error) {
	builtin, err := readBuiltin(modulesRoot)
	if err != nil {
		return nil, err
	}
	idx, err := newIndex(modulesRoot)
	if err != nil {
		return nil, err
	}
	r := &resolver{
		fsys:    modulesRoot,
		builtin: builtin,
		idx:     idx,
		state:   map[string]visit{},
	}
	for _, n := range names {
		if err := r.add(NormalizeName(n), nil); err != nil {
			return nil, err
		}
	}
	return r.out, nil
}

type visit int

const (
	unvisited visit = iota
	visiting
	done
)

type resolver struct {
	fsys    fs.FS
	builtin map[string]bool
	idx     *index
	state   map[string]visit
	out     []Module
}

// add appends name after its dependencies (depth-first, post-order). chain
// is the path of modules that led here, for error messages.
func (r *resolver) add(name string, chain []string) error {
	switch r.state[name] {
	case done:
		return nil
	case visiting:
		return fmt.Errorf("kernel module dependency cycle: %s -> %s", strings.Join(chain, " -> "), name)
	}
	if r.builtin[name] {
		r.state[name] = done
		return nil
	}
	// Dependency names come from the image's .modinfo.
	if err := CheckName(name); err != nil {
		if len(chain) > 0 {
			return fmt.Errorf("a dependency of %s: %w", chain[len(chain)-1], err)
		}
		return err
	}
	p, err := r.idx.lookup(name)
	if err != nil {
		if len(chain) > 0 {
			return fmt.Errorf("module %q (needed by %s): %w", name, chain[len(chain)-1], err)
		}
		return fmt.Errorf("module %q: %w", name, err)
	}
	r.state[name] = visiting

	data, err := readModule(r.fsys, p)
	if err != nil {
		return err
	}
	info, err := parseModinfo(data)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	canonical := name
	if info.name != "" {
		if err := CheckName(info.name); err != nil {
			return fmt.Errorf("%s: .modinfo: %w", p, err)
		}
		canonical = NormalizeName(info.name)
	}
	chain = append(chain, name)
	for _, d := range info.depends {
		if err := r.add(d, chain); err != nil {
			return err
		}
	}
	r.state[name] = done
	if canonical != name {
		// Guard against listing the same object twice under two names.
		if r.state[canonical] == done {
			return nil
		}
		r.state[canonical] = done
	}
	r.out = append(r.out, Module{Name: canonical, Data: data})
	return nil
}

// readBuiltin returns the set of module names built into the kernel. Both
// files are optional; either is enough.
func readBuiltin(fsys fs.FS) (map[string]bool, error) {
	set := map[string]bool{}
	b, err := fs.ReadFile(fsys, "modules.builtin")
	switch {
	case err == nil:
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				set[nameFromPath(line)] = true
			}
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read modules.builtin: %w", err)
	}
	// NUL-separated "module.key=value" records; it also names built-in code
	// that has no entry in modules.builtin, such as built-in parameters.
	b, err = fs.ReadFile(fsys, "modules.builtin.modinfo")
	switch {
	case err == nil:
		for rec := range bytes.SplitSeq(b, []byte{0}) {
			if i := bytes.IndexByte(rec, '.'); i > 0 {
				set[NormalizeName(string(rec[:i]))] = true
			}
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read modules.builtin.modinfo: %w", err)
	}
	return set, nil
}

// moduleSuffixes are the file name endings of module files, longest first.
var moduleSuffixes = [...]string{".ko.zst", ".ko.xz", ".ko.gz", ".ko"}

// nameFromPath derives the module name from a module file path; the kernel
// build names every module after its object file.
func nameFromPath(p string) string {
	base := path.Base(p)
	for _, s := range moduleSuffixes {
		if strings.HasSuffix(base, s) {
			base = strings.TrimSuffix(base, s)
			break
		}
	}
	return NormalizeName(base)
}

func isModuleFile(name string) bool {
	for _, s := range moduleSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// index maps module names to file paths. It starts from modules.dep when the
// tree has one and falls back to walking the tree, which is needed for trees
// straight out of a kernel package and for a stale modules.dep.
type index struct {
	fsys   fs.FS
	paths  map[string]string
	walked bool
}

func newIndex(fsys fs.FS) (*index, error) {
	idx := &index{fsys: fsys}
	b, err := fs.ReadFile(fsys, "modules.dep")
	if errors.Is(err, fs.ErrNotExist) {
		return idx, idx.walk()
	}
	if err != nil {
		return nil, fmt.Errorf("read modules.dep: %w", err)
	}
	idx.paths = map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		p, _, ok := strings.Cut(sc.Text(), ":")
		if !ok || !isModuleFile(p) {
			continue
		}
		// Paths in modules.dep are relative to the tree; old ones were absolute.
		p = strings.TrimPrefix(p, "/")
		if _, dup := idx.paths[nameFromPath(p)]; !dup {
			idx.paths[nameFromPath(p)] = p
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read modules.dep: %w", err)
	}
	return idx, nil
}

func (idx *index) lookup(name string) (string, error) {
	if p, ok := idx.paths[name]; ok {
		if _, err := fs.Stat(idx.fsys, p); err == nil || idx.walked {
			return p, nil
		}
	}
	if idx.walked {
		return "", ErrNotFound
	}
	if err := idx.walk(); err != nil {
		return "", err
	}
	if p, ok := idx.paths[name]; ok {
		return p, nil
	}
	return "", ErrNotFound
}

// walk indexes every module file in the tree. When a name occurs twice, a
// module under updates/ wins as with depmod's default search order;
// otherwise the first in lexical order does.
func (idx *index) walk() error {
	idx.walked = true
	idx.paths = map[string]string{}
	err := fs.WalkDir(idx.fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !isModuleFile(d.Name()) {
			return nil
		}
		n := nameFromPath(p)
		if old, dup := idx.paths[n]; !dup || (strings.HasPrefix(p, "updates/") && !strings.HasPrefix(old, "updates/")) {
			idx.paths[n] = p
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan kernel modules: %w", err)
	}
	return nil
}

// readModule reads a module file and decompresses it, recognizing the
// compression by its magic number rather than trusting the file name.
func readModule(fsys fs.FS, p string) ([]byte, error) {
	b, err := fs.ReadFile(fsys, p)
	if err != nil {
		return nil, fmt.Errorf("read module: %w", err)
	}
	out, err := decompress(b)
	if err != nil {
		return nil, fmt.Errorf("decompress %s: %w", p, err)
	}
	return out, nil
}

var (
	magicXZ   = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	magicZstd = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicGzip = []byte{0x1f, 0x8b}
)

func decompress(b []byte) ([]byte, error) {
	var rd io.Reader
	switch {
	case bytes.HasPrefix(b, []byte(elf.ELFMAG)):
		return b, nil
	case bytes.HasPrefix(b, magicXZ):
		xr, err := xz.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		rd = xr
	case bytes.HasPrefix(b, magicZstd):
		zr, err := zstd.NewReader(bytes.NewReader(b), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		rd = zr
	case bytes.HasPrefix(b, magicGzip):
		gr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		rd = gr
	default:
		return nil, errors.New("not an ELF object nor xz, zstd or gzip data")
	}
	var buf bytes.Buffer
	// Modules compress roughly 3:1; start there to avoid regrowing.
	buf.Grow(3 * len(b))
	if _, err := io.Copy(&buf, rd); err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte(elf.ELFMAG)) {
		return nil, errors.New("decompressed data is not an ELF object")
	}
	return buf.Bytes(), nil
}

type modinfo struct {
	name    string
	depends []string
}

// parseModinfo reads the NUL-separated key=value strings of the module's
// .modinfo section.
func parseModinfo(obj []byte) (modinfo, error) {
	f, err := elf.NewFile(bytes.NewReader(obj))
	if err != nil {
		return modinfo{}, fmt.Errorf("parse ELF: %w", err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return modinfo{}, errors.New("no .modinfo section: not a kernel module")
	}
	data, err := sec.Data()
	if err != nil {
		return modinfo{}, fmt.Errorf("read .modinfo: %w", err)
	}
	var mi modinfo
	for rec := range bytes.SplitSeq(data, []byte{0}) {
		k, v, ok := bytes.Cut(rec, []byte{'='})
		if !ok {
			continue
		}
		switch string(k) {
		case "name":
			mi.name = string(v)
		case "depends":
			for d := range strings.SplitSeq(string(v), ",") {
				if d = strings.TrimSpace(d); d != "" {
					mi.depends = append(mi.depends, NormalizeName(d))
				}
			}
		}
	}
	return mi, nil
}
