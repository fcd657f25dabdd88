// Package provision turns an image manifest into the files the VM boots
// from: a kernel, an initramfs holding the guest agent and the kernel
// modules it needs, and an ext4 root disk. Every download is verified
// before use and every result is placed atomically, so an interrupted
// provision never leaves something that looks usable.
package provision

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/pkgname"
)

// Artifact formats.
const (
	FormatRaw   = "raw"
	FormatGzip  = "gzip"
	FormatXz    = "xz"
	FormatTar   = "tar"
	FormatTarGz = "tar.gz"
	FormatTarXz = "tar.xz"
	// FormatSquashfs is a SquashFS image (modules only), either the
	// downloaded file itself or, as MemberFormat, a member of a tar.
	FormatSquashfs = "squashfs"
	// FormatOCI is a root filesystem pulled from an OCI registry (rootfs only).
	FormatOCI = "oci"
)

// ErrImageNotPinned: an OCI image reference names a tag, not a digest.
var ErrImageNotPinned = agentproto.Class(agentproto.ErrInvalid, "image reference is not pinned by digest")

// Artifact is one downloadable file, or for a root filesystem an OCI image.
type Artifact struct {
	URL string `json:"url,omitempty"`
	// SHA256 pins the file. When the publisher's digest can't be known in
	// advance, ChecksumURL names its checksum file instead and the digest
	// seen at the first download is recorded and enforced from then on.
	SHA256      string `json:"sha256,omitempty"`
	ChecksumURL string `json:"checksumUrl,omitempty"`
	Format      string `json:"format"`
	// Member is the file to take out of a tar: the kernel image, or the
	// module image when MemberFormat is set.
	Member string `json:"member,omitempty"`
	// MemberFormat is "squashfs" when Member is a SquashFS module image
	// (Alpine's boot/modloop-virt); empty for a plain file.
	MemberFormat string `json:"memberFormat,omitempty"`
	// Dir is the modules subtree, e.g. lib/modules/6.1.0-56-cloud-amd64.
	// Each path element may be a path.Match pattern ("modules/*-virt"); the
	// pattern must match exactly one directory holding files.
	Dir string `json:"dir,omitempty"`
	// OCI names the image when Format is "oci".
	OCI *OCIImage `json:"oci,omitempty"`
}

// OCIImage is a root filesystem image in an OCI registry.
type OCIImage struct {
	// Ref is pinned by digest: registry/repo@sha256:<hex> (a tag may
	// precede the digest but is ignored). The image for linux/<arch> is
	// taken from an image index.
	Ref string `json:"ref"`
}

// Manifest describes one guest image for one architecture.
type Manifest struct {
	SchemaVersion int       `json:"schemaVersion"`
	Arch          string    `json:"arch"`   // amd64 or arm64
	Distro        string    `json:"distro"` // alpine or debian: decides the package manager
	Kernel        Artifact  `json:"kernel"`
	Modules       *Artifact `json:"modules,omitempty"` // absent when everything is built in
	Rootfs        Artifact  `json:"rootfs"`
	// Packages are installed with the distro's package manager, as root,
	// at the first boot after provisioning and before the VM is reported
	// ready (names as sandbox_install takes them).
	Packages []string `json:"packages,omitempty"`
}

// MaxManifestPackages bounds a manifest's package list.
const MaxManifestPackages = 200

// ParseManifest decodes and checks a manifest. Relative URLs are resolved
// against base (the manifest's own URL), so a folder of artifacts with a
// manifest beside them can be served as is.
func ParseManifest(data []byte, base string) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	b, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("manifest base URL %q: %w", base, err)
	}
	for _, a := range m.artifacts() {
		for _, u := range []*string{&a.URL, &a.ChecksumURL} {
			if *u == "" {
				continue
			}
			ref, err := url.Parse(*u)
			if err != nil {
				return nil, fmt.Errorf("manifest: url %q: %w", *u, err)
			}
			*u = b.ResolveReference(ref).String()
		}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

func (m *Manifest) artifacts() []*Artifact {
	a := []*Artifact{&m.Kernel, &m.Rootfs}
	if m.Modules != nil {
		a = append(a, m.Modules)
	}
	return a
}

// Validate names the first field that is wrong and what it should be.
func (m *Manifest) Validate() error {
	if m.SchemaVersion != 1 {
		return fmt.Errorf("manifest: schemaVersion: %d, want 1", m.SchemaVersion)
	}
	if m.Arch != "amd64" && m.Arch != "arm64" {
		return fmt.Errorf("manifest: arch: %q, want amd64 or arm64", m.Arch)
	}
	if m.Distro != "alpine" && m.Distro != "debian" {
		return fmt.Errorf("manifest: distro: %q, want alpine or debian", m.Distro)
	}
	if err := m.Kernel.check("kernel", FormatRaw, FormatGzip, FormatXz, FormatTar, FormatTarGz, FormatTarXz); err != nil {
		return err
	}
	if isTar(m.Kernel.Format) && m.Kernel.Member == "" {
		return fmt.Errorf("manifest: kernel.member: required for a tar")
	}
	if m.Kernel.MemberFormat != "" || m.Kernel.Dir != "" {
		return fmt.Errorf("manifest: kernel: memberFormat and dir are for modules")
	}
	if m.Modules != nil {
		if err := m.Modules.checkModules(); err != nil {
			return err
		}
	}
	if err := m.checkPackages(); err != nil {
		return err
	}
	if err := m.Rootfs.check("rootfs", FormatTar, FormatTarGz, FormatTarXz, FormatOCI); err != nil {
		return err
	}
	if m.Rootfs.Member != "" || m.Rootfs.MemberFormat != "" || m.Rootfs.Dir != "" {
		return fmt.Errorf("manifest: rootfs: member, memberFormat and dir are not used for a root filesystem")
	}
	return nil
}

// checkPackages applies sandbox_install's naming rules to the packages.
func (m *Manifest) checkPackages() error {
	if len(m.Packages) > MaxManifestPackages {
		return fmt.Errorf("manifest: packages: %d names, at most %d", len(m.Packages), MaxManifestPackages)
	}
	re, example, err := pkgname.For(pkgname.Manager(m.Distro))
	if err != nil {
		return fmt.Errorf("manifest: packages: %w", err)
	}
	for i, p := range m.Packages {
		if !re.MatchString(p) {
			return fmt.Errorf("manifest: packages[%d]: %q is not a valid %s package name (names like %s)", i, p, m.Distro, example)
		}
	}
	return nil
}

// check validates the source of an artifact: a verified URL, or for the
// "oci" format an image pinned by digest.
func (a *Artifact) check(field string, allowed ...string) error {
	if !slices.Contains(allowed, a.Format) {
		return fmt.Errorf("manifest: %s.format: %q, want one of %v", field, a.Format, allowed)
	}
	if a.Format == FormatOCI {
		if a.URL != "" || a.SHA256 != "" || a.ChecksumURL != "" {
			return fmt.Errorf("manifest: %s: an oci image has oci.ref instead of url, sha256 and checksumUrl", field)
		}
		if a.OCI == nil || a.OCI.Ref == "" {
			return fmt.Errorf("manifest: %s.oci.ref: required for format oci", field)
		}
		_, err := pinnedRef(a.OCI.Ref)
		if err != nil {
			return fmt.Errorf("manifest: %s.oci.ref: %w", field, err)
		}
		return nil
	}
	if a.OCI != nil {
		return fmt.Errorf("manifest: %s.oci: only for format oci", field)
	}
	if a.URL == "" {
		return fmt.Errorf("manifest: %s.url: required", field)
	}
	if a.SHA256 == "" && a.ChecksumURL == "" {
		return fmt.Errorf("manifest: %s: sha256 or checksumUrl required (downloads are always verified)", field)
	}
	if a.SHA256 != "" && !isHex64(a.SHA256) {
		return fmt.Errorf("manifest: %s.sha256: %q is not 64 hex digits", field, a.SHA256)
	}
	return nil
}

func (a *Artifact) checkModules() error {
	if err := a.check("modules", FormatTar, FormatTarGz, FormatTarXz, FormatSquashfs); err != nil {
		return err
	}
	switch {
	case a.MemberFormat == FormatSquashfs:
		if !isTar(a.Format) || a.Member == "" {
			return fmt.Errorf("manifest: modules: memberFormat squashfs needs a tar format and the member's path")
		}
	case a.MemberFormat != "":
		return fmt.Errorf("manifest: modules.memberFormat: %q, want squashfs or none", a.MemberFormat)
	case a.Member != "":
		return fmt.Errorf("manifest: modules.member: only with memberFormat squashfs (a tar's modules are taken by dir)")
	}
	if a.Dir == "" {
		return fmt.Errorf("manifest: modules.dir: required (the modules tree, e.g. lib/modules/<version>)")
	}
	if _, err := dirPattern(a.Dir); err != nil {
		return fmt.Errorf("manifest: modules.dir: %w", err)
	}
	return nil
}

// dirPattern splits a modules dir into path.Match patterns, one a level.
func dirPattern(dir string) ([]string, error) {
	clean := path.Clean(strings.TrimPrefix(dir, "/"))
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return nil, fmt.Errorf("%q is not a path inside the archive", dir)
	}
	parts := strings.Split(clean, "/")
	for _, p := range parts {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("%q: %w", dir, err)
		}
	}
	return parts, nil
}

// pinnedRef parses an image reference and insists on a digest.
func pinnedRef(ref string) (name.Digest, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return name.Digest{}, err
	}
	d, ok := r.(name.Digest)
	if !ok {
		return name.Digest{}, fmt.Errorf("%w: %q names a tag, which can move; pin it as %s@sha256:<digest> "+
			"(`crane digest %s` or `docker buildx imagetools inspect %s` prints the digest)",
			ErrImageNotPinned, ref, r.Context().Name(), ref, ref)
	}
	return d, nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
