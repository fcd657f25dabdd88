package provision_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/provision"
	pt "github.com/osaurus/osaurus-sandbox/provision/provisiontest"
	"github.com/osaurus/osaurus-sandbox/provision/squashfs"
)

// modulesTree is a kernel's modules directory under prefix in which every
// module the guest needs is built in except virtio_rng, a module file that
// depends on another (rng_core).
func modulesTree(prefix string) []file {
	builtin := strings.Join([]string{
		"kernel/drivers/virtio/virtio_pci.ko", "kernel/drivers/block/virtio_blk.ko",
		"kernel/drivers/net/virtio_net.ko", "kernel/drivers/char/virtio_console.ko",
		"kernel/fs/fuse/virtiofs.ko", "kernel/net/vmw_vsock/vmw_vsock_virtio_transport.ko",
	}, "\n") + "\n"
	return []file{
		{Name: prefix + "/modules.builtin", Data: builtin},
		{Name: prefix + "/kernel/drivers/char/hw_random/virtio-rng.ko", Data: string(pt.Module("virtio_rng", "rng_core"))},
		{Name: prefix + "/kernel/drivers/char/hw_random/rng-core.ko", Data: string(pt.Module("rng_core"))},
	}
}

var wantModules = []string{"rng_core", "virtio_rng"}

func TestModulesSources(t *testing.T) {
	ctx := testContext(t)
	const kver = "6.12.13-0-virt"
	// Alpine's modloop: modules/<kver> beside modules/firmware, xz with the
	// x86 BCJ filter as Alpine's update-kernel builds it.
	modloop := pt.Squashfs(t, append(modulesTree("modules/"+kver), file{Name: "modules/firmware/fw.bin", Data: "firmware"}),
		"-comp", "xz", "-Xbcj", "x86")
	kernel, _ := kernelFor(t, "amd64")
	netboot := pt.TarGz(t,
		file{Name: "boot/"}, file{Name: "boot/vmlinuz-lts", Data: "another flavour"}, file{Name: "boot/modloop-lts", Data: "not squashfs"},
		file{Name: "boot/vmlinuz-virt", Data: string(kernel)}, file{Name: "boot/modloop-virt", Data: string(modloop)})
	// Alpine's linux-virt package: a tar.gz with lib/modules/<kver>.
	apk := pt.TarGz(t, append([]file{{Name: ".PKGINFO", Data: "pkgname = linux-virt\n"}, {Name: "boot/vmlinuz-virt", Data: string(kernel)}},
		modulesTree("lib/modules/"+kver)...)...)
	twoKernels := pt.TarGz(t, append(modulesTree("lib/modules/6.1.0"), modulesTree("lib/modules/6.2.0")...)...)
	rootfs := pt.TarGz(t, file{Name: "etc/os-release", Data: "ID=alpine\n"})
	_, base := artifacts(t, map[string][]byte{
		"netboot.tar.gz": netboot, "modloop-virt": modloop, "linux-virt.apk": apk,
		"two.tar.gz": twoKernels, "rootfs.tar.gz": rootfs, "vmlinuz": kernel,
	})
	art := func(name, format string) provision.Artifact {
		data := map[string][]byte{"netboot.tar.gz": netboot, "modloop-virt": modloop, "linux-virt.apk": apk, "two.tar.gz": twoKernels}[name]
		return provision.Artifact{URL: base + name, SHA256: sha(data), Format: format}
	}
	squashMember := func(member, dir string) provision.Artifact {
		a := art("netboot.tar.gz", provision.FormatTarGz)
		a.Member, a.MemberFormat, a.Dir = member, provision.FormatSquashfs, dir
		return a
	}
	withDir := func(a provision.Artifact, dir string) provision.Artifact { a.Dir = dir; return a }

	tests := []struct {
		name    string
		modules provision.Artifact
		wantErr error
		wantMsg string
	}{
		{"squashfs member (Alpine netboot)", squashMember("boot/modloop-virt", "modules/*-virt"), nil, ""},
		{"pattern also matching firmware", squashMember("boot/modloop-virt", "modules/*"), provision.ErrAmbiguousDir, "modules/firmware"},
		{"bare squashfs", withDir(art("modloop-virt", provision.FormatSquashfs), "modules/[0-9]*"), nil, ""},
		{"package tar with *", withDir(art("linux-virt.apk", provision.FormatTarGz), "lib/modules/*"), nil, ""},
		{"literal dir", withDir(art("linux-virt.apk", provision.FormatTarGz), "lib/modules/"+kver), nil, ""},
		{"two kernels", withDir(art("two.tar.gz", provision.FormatTarGz), "lib/modules/*"), provision.ErrAmbiguousDir, "lib/modules/6.2.0"},
		{"nothing matches", withDir(art("linux-virt.apk", provision.FormatTarGz), "lib/modules/7.*"), nil, `no files under "lib/modules/7.*"`},
		{"member missing", squashMember("boot/modloop-edge", "modules/*-virt"), nil, `member "boot/modloop-edge" not found`},
		{"member not squashfs", squashMember("boot/modloop-lts", "modules/*"), squashfs.ErrFormat, "boot/modloop-lts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newProvisioner(t, t.TempDir())
			mods := tt.modules
			m := &provision.Manifest{
				SchemaVersion: 1, Arch: "amd64", Distro: "alpine",
				Kernel:  provision.Artifact{URL: base + "vmlinuz", SHA256: sha(kernel), Format: provision.FormatRaw},
				Modules: &mods,
				Rootfs:  provision.Artifact{URL: base + "rootfs.tar.gz", SHA256: sha(rootfs), Format: provision.FormatTarGz},
			}
			st, err := p.Provision(ctx, m)
			if tt.wantErr != nil || tt.wantMsg != "" {
				if err == nil {
					t.Fatal("provisioned; want an error")
				}
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Errorf("error %v, want %v", err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %q does not mention %q", err, tt.wantMsg)
				}
				left, _ := filepath.Glob(filepath.Join(p.Layout.Cache(), "modules-*"))
				if len(left) != 0 {
					t.Errorf("a failed extraction left %v", left)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(st.Modules, wantModules) {
				t.Errorf("modules %v, want %v (dependencies first)", st.Modules, wantModules)
			}
			order, err := os.ReadFile(filepath.Join(p.Layout.Modules(), "order"))
			if err != nil || !strings.Contains(string(order), "virtio_rng") {
				t.Errorf("saved modules order %q, %v", order, err)
			}
		})
	}
}
