package initramfs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/image/kmod"
)

// TestBootQEMU boots the real kernel under QEMU (software emulation, no KVM
// needed) with an initramfs from Build and a stand-in agent
// (testdata/bootinit) that loads /lib/modules/order as the real agent does.
// It proves the image format, the module load order and the modules list
// against an actual kernel.
//
// OSAURUS_TEST_KERNEL_MODULES names the extracted lib/modules/<version>
// directory; the kernel is taken from boot/vmlinuz-<version> beside it (the
// layout of an extracted Debian linux-image package) unless
// OSAURUS_TEST_KERNEL names it.
func TestBootQEMU(t *testing.T) {
	modDir := os.Getenv("OSAURUS_TEST_KERNEL_MODULES")
	if modDir == "" {
		t.Fatal("OSAURUS_TEST_KERNEL_MODULES is not set: run `make test-guest` or set OSAURUS_TEST_KERNEL_MODULES " +
			"to an extracted kernel's lib/modules/<version> directory")
	}
	kernel := os.Getenv("OSAURUS_TEST_KERNEL")
	if kernel == "" {
		kernel = filepath.Join(modDir, "../../../boot/vmlinuz-"+filepath.Base(filepath.Clean(modDir)))
	}
	if _, err := os.Stat(kernel); err != nil {
		t.Fatalf("kernel image: %v (set OSAURUS_TEST_KERNEL to the vmlinuz matching the modules)", err)
	}
	qemu, console, machine := "qemu-system-x86_64", "ttyS0", []string{"-M", "q35"}
	if runtime.GOARCH == "arm64" {
		qemu, console, machine = "qemu-system-aarch64", "ttyAMA0", []string{"-M", "virt", "-cpu", "max"}
	}
	if _, err := exec.LookPath(qemu); err != nil {
		t.Fatalf("%s not found: install QEMU (`apt-get install -y qemu-system-x86` or qemu-system-arm; `brew install qemu` on macOS)", qemu)
	}

	dir := t.TempDir()
	initBin := filepath.Join(dir, "init")
	build := exec.Command("go", "build", "-o", initBin, "./testdata/bootinit")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build stand-in agent: %v\n%s", err, out)
	}
	agent, err := os.ReadFile(initBin)
	if err != nil {
		t.Fatal(err)
	}
	mods, err := kmod.Resolve(os.DirFS(modDir), kmod.GuestModules()...)
	if err != nil {
		t.Fatal(err)
	}
	img, err := os.Create(filepath.Join(dir, "initramfs.cpio"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Build(img, Spec{Init: agent, Modules: mods}); err != nil {
		t.Fatal(err)
	}
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append(machine,
		"-accel", "tcg", "-m", "512", "-nographic", "-no-reboot",
		"-kernel", kernel, "-initrd", img.Name(),
		"-append", "console="+console+" panic=-1 loglevel=4",
		// A device for each driver to bind. vsock and virtiofs need host
		// kernel or daemon support (vhost-vsock, virtiofsd), so those
		// modules are only loaded, not bound.
		"-device", "virtio-serial-pci",
		"-netdev", "user,id=n0,restrict=on", "-device", "virtio-net-pci,netdev=n0",
		"-drive", "if=none,id=d0,format=raw,file="+img.Name()+",readonly=on", "-device", "virtio-blk-pci,drive=d0",
		"-device", "virtio-rng-pci",
	)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, qemu, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	t.Logf("qemu ran %v; console:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if err != nil || !strings.Contains(out.String(), "MODULES OK") {
		t.Fatalf("boot failed (%v); console:\n%s", err, out.String())
	}
	for _, drv := range []string{"virtio_net", "virtio_blk", "virtio_console", "virtio_rng"} {
		if !strings.Contains(out.String(), "bound "+drv+" ") {
			t.Errorf("driver %s bound no device; console:\n%s", drv, out.String())
		}
	}
}
