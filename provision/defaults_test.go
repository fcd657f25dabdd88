package provision_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/provision/download"
	pt "github.com/osaurus/osaurus-sandbox/provision/provisiontest"
)

var alpineArch = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}

func TestBuiltinAlpineManifests(t *testing.T) {
	parts := strings.Split(provision.AlpineRelease, ".")
	if len(parts) != 3 {
		t.Fatalf("AlpineRelease %q is not x.y.z", provision.AlpineRelease)
	}
	branch := "v" + parts[0] + "." + parts[1]
	for arch, a := range alpineArch {
		t.Run(arch, func(t *testing.T) {
			m, ok, err := provision.BuiltinManifestFor(provision.BuiltinAlpine, arch)
			if !ok || err != nil {
				t.Fatalf("BuiltinManifestFor = %v, %v", ok, err)
			}
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			if m.Arch != arch || m.Distro != "alpine" {
				t.Errorf("arch %q distro %q", m.Arch, m.Distro)
			}
			dir := fmt.Sprintf("/alpine/%s/releases/%s/", branch, a)
			netboot := fmt.Sprintf("alpine-netboot-%s-%s.tar.gz", provision.AlpineRelease, a)
			rootfs := fmt.Sprintf("alpine-minirootfs-%s-%s.tar.gz", provision.AlpineRelease, a)
			for _, c := range []struct {
				field string
				a     *provision.Artifact
				file  string
			}{{"kernel", &m.Kernel, netboot}, {"modules", m.Modules, netboot}, {"rootfs", &m.Rootfs, rootfs}} {
				u, err := url.Parse(c.a.URL)
				if err != nil || u.Scheme != "https" || u.Path != dir+c.file {
					t.Errorf("%s url %s, want https://…%s%s", c.field, c.a.URL, dir, c.file)
				}
				if c.a.ChecksumURL != c.a.URL+".sha256" {
					t.Errorf("%s checksumUrl %s, want the .sha256 beside %s", c.field, c.a.ChecksumURL, c.a.URL)
				}
				if c.a.SHA256 != "" {
					t.Errorf("%s has a sha256 that nobody here could have checked", c.field)
				}
			}
			if m.Kernel.Member != "boot/vmlinuz-virt" || m.Modules.Member != "boot/modloop-virt" ||
				m.Modules.MemberFormat != provision.FormatSquashfs {
				t.Errorf("kernel member %q, modules member %q (%s)", m.Kernel.Member, m.Modules.Member, m.Modules.MemberFormat)
			}
			if ok, _ := path.Match(m.Modules.Dir, "modules/6.12.13-0-virt"); !ok {
				t.Errorf("modules dir %q does not match a virt kernel's modules", m.Modules.Dir)
			}
			if ok, _ := path.Match(m.Modules.Dir, "modules/firmware"); ok {
				t.Errorf("modules dir %q matches the modloop's firmware dir too", m.Modules.Dir)
			}
		})
	}
}

func TestBuiltinResolution(t *testing.T) {
	if _, ok, err := provision.BuiltinManifest("https://example.com/manifest.json"); ok || err != nil {
		t.Errorf("an https URL was taken as built-in: %v, %v", ok, err)
	}
	if _, ok, err := provision.BuiltinManifest("builtin:debian"); !ok || !errors.Is(err, provision.ErrNoBuiltin) {
		t.Errorf("builtin:debian = %v, %v; want ErrNoBuiltin", ok, err)
	}
	if _, _, err := provision.BuiltinManifestFor(provision.BuiltinAlpine, "riscv64"); !errors.Is(err, provision.ErrNoBuiltin) {
		t.Errorf("riscv64: %v, want ErrNoBuiltin", err)
	}
	got := provision.DefaultManifestURL()
	if _, supported := alpineArch[runtime.GOARCH]; supported != (got == provision.BuiltinAlpine) {
		t.Errorf("DefaultManifestURL() = %q on %s", got, runtime.GOARCH)
	}
	if m, ok, err := provision.BuiltinManifest(provision.DefaultManifestURL()); got != "" && (!ok || err != nil || m.Arch != runtime.GOARCH) {
		t.Errorf("the default does not resolve for this machine: %v, %v, %v", m, ok, err)
	}
}

// alpineMirror serves stand-ins for the release files the built-in manifest
// names, at the same paths, with .sha256 files as Alpine publishes them.
type alpineMirror struct {
	root string
	srv  *pt.Server
}

func (am *alpineMirror) put(t *testing.T, rawURL string, data []byte) {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(am.root, filepath.FromSlash(u.Path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := fmt.Sprintf("%s  %s\n", sha(data), path.Base(u.Path))
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+".sha256", []byte(sum), 0o644); err != nil {
		t.Fatal(err)
	}
}

// local points an artifact at the mirror.
func (am *alpineMirror) local(a *provision.Artifact) {
	for _, s := range []*string{&a.URL, &a.ChecksumURL} {
		u, _ := url.Parse(*s)
		u.Scheme, u.Host = "http", strings.TrimPrefix(am.srv.URL, "http://")
		*s = u.String()
	}
}

// The built-in manifest, unchanged but for the host, provisions from files
// shaped like Alpine's: the kernel and the modloop's modules from the
// netboot tarball, pinned through the .sha256 files at first download.
func TestProvisionBuiltinAlpineShape(t *testing.T) {
	ctx := testContext(t)
	bcj := map[string][]string{"amd64": {"-Xbcj", "x86"}, "arm64": {"-Xbcj", "arm,armthumb"}}
	for arch := range alpineArch {
		t.Run(arch, func(t *testing.T) {
			m, _, err := provision.BuiltinManifestFor(provision.BuiltinAlpine, arch)
			if err != nil {
				t.Fatal(err)
			}
			am := &alpineMirror{root: t.TempDir()}
			am.srv = pt.Files(t, am.root)
			packed, booted := kernelFor(t, arch)
			modloop := pt.Squashfs(t, append(modulesTree("modules/6.12.13-0-virt"), file{Name: "modules/firmware/fw.bin", Data: "fw"}),
				append([]string{"-comp", "xz"}, bcj[arch]...)...)
			netboot := pt.TarGz(t, file{Name: "boot/"},
				file{Name: "boot/vmlinuz-lts", Data: "lts"}, file{Name: "boot/modloop-lts", Data: "lts modules"},
				file{Name: "boot/vmlinuz-virt", Data: string(packed)}, file{Name: "boot/modloop-virt", Data: string(modloop)})
			am.put(t, m.Kernel.URL, netboot)
			am.put(t, m.Rootfs.URL, pt.TarGz(t, file{Name: "etc/"}, file{Name: "etc/alpine-release", Data: provision.AlpineRelease + "\n"}))
			origNetboot := m.Kernel.URL
			for _, a := range []*provision.Artifact{&m.Kernel, m.Modules, &m.Rootfs} {
				am.local(a)
			}

			p, _ := newProvisioner(t, t.TempDir())
			st, err := p.Provision(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(p.Layout.Kernel()); err != nil || !bytes.Equal(got, booted) {
				t.Errorf("installed kernel: %d bytes, %v; want the %d-byte bootable image", len(got), err, len(booted))
			}
			if !slices.Equal(st.Modules, wantModules) || st.Distro != "alpine" {
				t.Errorf("state %+v", st)
			}
			mustDisk(t, p.Layout.RootDisk(), map[string]string{"/etc/alpine-release": provision.AlpineRelease + "\n"})
			pins := &download.Pins{Path: p.Layout.Pins()}
			if got, ok, err := pins.Get(m.Kernel.URL); err != nil || !ok || got != sha(netboot) {
				t.Errorf("netboot pin %q, %v, %v; want %s", got, ok, err, sha(netboot))
			}

			// Upstream replaces the file and its checksum: with the cache
			// gone, the recorded pin refuses the new bytes.
			am.put(t, origNetboot, append(netboot, 0))
			if err := os.RemoveAll(p.Layout.Cache()); err != nil {
				t.Fatal(err)
			}
			_, err = p.Provision(ctx, m)
			if !errors.Is(err, download.ErrChecksumMismatch) || !strings.Contains(err.Error(), sha(netboot)) {
				t.Fatalf("changed upstream file: %v; want a checksum mismatch naming the pinned digest", err)
			}
			if _, err := p.Load(); !errors.Is(err, provision.ErrNotProvisioned) {
				t.Errorf("Load after the refusal: %v", err)
			}
		})
	}
}
