package initramfs

import (
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/provision/kmod"
)

// Paths inside the image shared with the guest agent. See Build.
const (
	// InitPath is where the guest agent binary is installed.
	InitPath = "/init"
	// ModulesDir holds the kernel modules, uncompressed.
	ModulesDir = "/lib/modules"
	// ModulesOrder lists the module file names of ModulesDir in load order.
	ModulesOrder = "/lib/modules/order"
)

// ErrNoInit is returned by Build when the Spec has no init binary.
var ErrNoInit = errdefs.Class(errdefs.ErrInvalid, "initramfs: spec has no init binary")

// File is an extra entry for the image.
type File struct {
	// Path is absolute or relative to the image root.
	Path string
	// Mode gives the permission bits and the type: a regular file by
	// default, a directory with fs.ModeDir, a symbolic link with
	// fs.ModeSymlink (Data then holds the link target).
	Mode fs.FileMode
	Data []byte
}

// Spec describes the contents of the guest initramfs.
type Spec struct {
	// Init is the static guest agent binary, run by the kernel as PID 1.
	Init []byte
	// Modules are kernel modules in load order, as returned by kmod.Resolve.
	Modules []kmod.Module
	// Files are added last; they may not replace the entries above.
	Files []File
	// Gzip compresses the image. Leave it off for images handed straight
	// to the VM: the kernel unpacks uncompressed archives fastest.
	Gzip bool
}

// Build writes the guest initramfs described by spec to w.
//
// The image layout is the interface with the guest agent (/init):
//
//   - /init: the agent itself, mode 0755.
//   - /dev/console: character device 5:1, so the kernel can hand /init a
//     console on stdin, stdout and stderr.
//   - /dev, /proc, /sys, /newroot (0755) and /tmp (1777): empty mount points.
//   - /lib/modules/NN-name.ko: each module, uncompressed, where NN is its
//     1-based position in the load order, zero-padded to at least 2 digits.
//   - /lib/modules/order: always present (empty without modules). One file
//     name per line, relative to /lib/modules, each line ending in "\n",
//     dependencies before the modules that need them.
//
// The agent loads the modules by reading /lib/modules/order and calling
// finit_module(fd, "", 0) for each file in that order, treating EEXIST as
// success; a module whose dependencies were not loaded first fails with
// ENOENT or "Unknown symbol" in the kernel log. Built-in modules are never
// listed. After loading modules the agent mounts the root disk on /newroot
// and switches into it.
func Build(w io.Writer, spec Spec) error {
	if len(spec.Init) == 0 {
		return ErrNoInit
	}
	var opts []Option
	if spec.Gzip {
		opts = append(opts, WithGzip(6))
	}
	cw := NewWriter(w, opts...)
	if err := build(cw, spec); err != nil {
		return err
	}
	return cw.Close()
}

func build(cw *Writer, spec Spec) error {
	for _, d := range []struct {
		path string
		mode fs.FileMode
	}{
		{"/dev", 0o755},
		{"/proc", 0o555},
		{"/sys", 0o555},
		{"/newroot", 0o755},
		{"/tmp", 0o777 | fs.ModeSticky},
		{"/lib", 0o755},
		{ModulesDir, 0o755},
	} {
		if err := cw.AddDir(d.path, d.mode); err != nil {
			return err
		}
	}
	if err := cw.AddCharDevice("/dev/console", 0o600, 5, 1); err != nil {
		return err
	}
	if err := cw.AddFile(InitPath, 0o755, spec.Init); err != nil {
		return err
	}

	width := max(2, len(fmt.Sprint(len(spec.Modules))))
	var order strings.Builder
	for i, m := range spec.Modules {
		if err := kmod.CheckName(m.Name); err != nil {
			return fmt.Errorf("initramfs: %w", err)
		}
		file := fmt.Sprintf("%0*d-%s.ko", width, i+1, m.Name)
		if err := cw.AddFile(ModulesDir+"/"+file, 0o644, m.Data); err != nil {
			return err
		}
		order.WriteString(file + "\n")
	}
	if err := cw.AddFile(ModulesOrder, 0o644, []byte(order.String())); err != nil {
		return err
	}

	for _, f := range spec.Files {
		var err error
		switch f.Mode.Type() {
		case 0:
			err = cw.AddFile(f.Path, f.Mode, f.Data)
		case fs.ModeDir:
			err = cw.AddDir(f.Path, f.Mode)
		case fs.ModeSymlink:
			err = cw.AddSymlink(f.Path, string(f.Data))
		default:
			err = fmt.Errorf("initramfs: %s: unsupported file type %v", f.Path, f.Mode.Type())
		}
		if err != nil {
			return err
		}
	}
	return nil
}
