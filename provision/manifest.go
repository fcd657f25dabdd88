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
	"slices"
)

// Artifact formats.
const (
	FormatRaw   = "raw"
	FormatGzip  = "gzip"
	FormatXz    = "xz"
	FormatTar   = "tar"
	FormatTarGz = "tar.gz"
	FormatTarXz = "tar.xz"
)

var formats = []string{FormatRaw, FormatGzip, FormatXz, FormatTar, FormatTarGz, FormatTarXz}

// Artifact is one downloadable file.
type Artifact struct {
	URL string `json:"url"`
	// SHA256 pins the file. When the publisher's digest can't be known in
	// advance, ChecksumURL names its checksum file instead and the digest
	// seen at the first download is recorded and enforced from then on.
	SHA256      string `json:"sha256,omitempty"`
	ChecksumURL string `json:"checksumUrl,omitempty"`
	Format      string `json:"format"`
	// Member is the file to take out of a tar (kernel).
	Member string `json:"member,omitempty"`
	// Dir is the subtree to take out of a tar (modules: lib/modules/<ver>).
	Dir string `json:"dir,omitempty"`
}

// Manifest describes one guest image for one architecture.
type Manifest struct {
	SchemaVersion int       `json:"schemaVersion"`
	Arch          string    `json:"arch"`   // amd64 or arm64
	Distro        string    `json:"distro"` // alpine or debian: decides the package manager
	Kernel        Artifact  `json:"kernel"`
	Modules       *Artifact `json:"modules,omitempty"` // absent when everything is built in
	Rootfs        Artifact  `json:"rootfs"`
}

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
	check := func(field string, a *Artifact, needMember, needDir bool) error {
		if a.URL == "" {
			return fmt.Errorf("manifest: %s.url: required", field)
		}
		if !slices.Contains(formats, a.Format) {
			return fmt.Errorf("manifest: %s.format: %q, want one of %v", field, a.Format, formats)
		}
		if a.SHA256 == "" && a.ChecksumURL == "" {
			return fmt.Errorf("manifest: %s: sha256 or checksumUrl required (downloads are always verified)", field)
		}
		if a.SHA256 != "" && !isHex64(a.SHA256) {
			return fmt.Errorf("manifest: %s.sha256: %q is not 64 hex digits", field, a.SHA256)
		}
		isTar := a.Format == FormatTar || a.Format == FormatTarGz || a.Format == FormatTarXz
		if needMember && isTar && a.Member == "" {
			return fmt.Errorf("manifest: %s.member: required for a tar", field)
		}
		if needDir && (!isTar || a.Dir == "") {
			return fmt.Errorf("manifest: %s: modules must be a tar with dir set", field)
		}
		return nil
	}
	if err := check("kernel", &m.Kernel, true, false); err != nil {
		return err
	}
	if m.Modules != nil {
		if err := check("modules", m.Modules, false, true); err != nil {
			return err
		}
	}
	if err := check("rootfs", &m.Rootfs, false, false); err != nil {
		return err
	}
	switch m.Rootfs.Format {
	case FormatTar, FormatTarGz, FormatTarXz:
	default:
		return fmt.Errorf("manifest: rootfs.format: %q, want a tar, tar.gz or tar.xz", m.Rootfs.Format)
	}
	return nil
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
