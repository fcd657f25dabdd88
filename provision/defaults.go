package provision

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/builtinimage"
)

// Built-in images: manifests compiled into the app, named by a
// "builtin:<name>" URL. "builtin:alpine" is the default on amd64 and arm64.
const (
	BuiltinPrefix = builtinimage.Prefix
	BuiltinAlpine = builtinimage.Alpine
)

// AlpineRelease is the Alpine Linux release the built-in image comes from:
// the newest stable point release at the time of writing (3.24.2, September
// 2026). Alpine keeps every release's files under /alpine/v<branch>/releases,
// so these URLs stay valid after newer releases appear.
const (
	AlpineRelease = "3.24.2"
	alpineBranch  = "v3.24"
	alpineMirror  = "https://dl-cdn.alpinelinux.org/alpine"
)

// ErrNoBuiltin: a "builtin:" URL names no image, or none for this
// architecture.
var ErrNoBuiltin = agentproto.Class(agentproto.ErrNotFound, "no such built-in image")

// alpineArch maps Go architecture names to Alpine's.
var alpineArch = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}

// DefaultManifestURL is the built-in image for this machine's
// architecture, or "" when there is none.
func DefaultManifestURL() string { return builtinimage.Default() }

// BuiltinManifest resolves a "builtin:" URL for this machine's
// architecture. ok is false when url is not a "builtin:" URL (fetch it
// instead); an unknown name is an error wrapping ErrNoBuiltin.
func BuiltinManifest(url string) (m *Manifest, ok bool, err error) {
	return BuiltinManifestFor(url, runtime.GOARCH)
}

// BuiltinManifestFor is BuiltinManifest for the given architecture
// (amd64 or arm64).
func BuiltinManifestFor(url, arch string) (*Manifest, bool, error) {
	if !strings.HasPrefix(url, BuiltinPrefix) {
		return nil, false, nil
	}
	if url != BuiltinAlpine {
		return nil, true, fmt.Errorf("%w: %q (the built-in image is %s)", ErrNoBuiltin, url, BuiltinAlpine)
	}
	m := alpineManifest(arch)
	if m == nil {
		return nil, true, fmt.Errorf("%w: %s has no image for %s; set one with `osaurus-sandbox config set imageManifest URL`", ErrNoBuiltin, url, arch)
	}
	return m, true, nil
}

// alpineManifest is the built-in Alpine image for arch, or nil.
//
// Kernel and modules come from the release's netboot tarball: its
// boot/vmlinuz-virt is the "virt" kernel, which ships VIRTIO_BLK,
// VIRTIO_NET, VIRTIO_FS, FUSE, VSOCKETS and VIRTIO_VSOCKETS (and ext4) as
// modules, and boot/modloop-virt is the SquashFS image holding them under
// modules/<version>-virt. On arm64 vmlinuz-virt is an EFI zboot image with
// a gzip'd Image inside, which provisioning unpacks for Apple's
// Virtualization framework. The root filesystem is the release's
// minirootfs. Alpine publishes a .sha256 file beside each; the digest seen
// at the first download is recorded and enforced from then on.
func alpineManifest(arch string) *Manifest {
	a, ok := alpineArch[arch]
	if !ok {
		return nil
	}
	base := fmt.Sprintf("%s/%s/releases/%s/", alpineMirror, alpineBranch, a)
	netboot := base + fmt.Sprintf("alpine-netboot-%s-%s.tar.gz", AlpineRelease, a)
	rootfs := base + fmt.Sprintf("alpine-minirootfs-%s-%s.tar.gz", AlpineRelease, a)
	return &Manifest{
		SchemaVersion: 1,
		Arch:          arch,
		Distro:        "alpine",
		Kernel: Artifact{
			URL: netboot, ChecksumURL: netboot + ".sha256",
			Format: FormatTarGz, Member: "boot/vmlinuz-virt",
		},
		Modules: &Artifact{
			URL: netboot, ChecksumURL: netboot + ".sha256",
			Format: FormatTarGz, Member: "boot/modloop-virt", MemberFormat: FormatSquashfs,
			// The modloop also holds modules/firmware; match only the kernel's.
			Dir: "modules/*-virt",
		},
		Rootfs: Artifact{
			URL: rootfs, ChecksumURL: rootfs + ".sha256",
			Format: FormatTarGz,
		},
		Packages: slices.Clone(AlpineToolset),
	}
}

// AlpineToolset is what the built-in image installs at its first boot:
// what the sandbox_* tools run (ripgrep for search, bash, python3 and pip,
// node and npm) and what agents expect of a dev machine. The minirootfs
// has none of it.
var AlpineToolset = []string{
	"ripgrep", "bash", "python3", "py3-pip", "nodejs", "npm", "git", "curl",
	"ca-certificates", "procps", "findutils", "coreutils",
}
