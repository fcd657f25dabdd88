package guestagent

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"github.com/mdlayher/vsock"
)

// hardening is the kernel settings every guest runs with. Each closes a
// way for one agent to reach another's data or the kernel's secrets.
var hardening = []struct {
	key, value string
	optional   bool // absent on some kernels (Yama, Debian's userns knob)
}{
	// Another user's file or FIFO in a sticky world-writable directory
	// (/tmp, /workspace/shared) is never opened with O_CREAT.
	{"fs/protected_regular", "2", false},
	{"fs/protected_fifos", "2", false},
	{"fs/protected_symlinks", "1", false},
	{"fs/protected_hardlinks", "1", false},
	// Kernel addresses stay hidden from every user.
	{"kernel/kptr_restrict", "2", false},
	{"kernel/dmesg_restrict", "1", false},
	// Only a parent may ptrace its children.
	{"kernel/yama/ptrace_scope", "1", true},
}

// userNSKnobs turn off user namespaces for unprivileged users: the first
// present one is used. Debian's kernels have the first, which leaves root
// able to create them; elsewhere the limit applies to everyone, root
// included, which the agent doesn't need.
var userNSKnobs = []string{"kernel/unprivileged_userns_clone", "user/max_user_namespaces"}

// hardenKernel writes the settings under sysctlDir (/proc/sys). A missing
// required setting is an error, a missing optional one is not.
func HardenKernel(sysctlDir string) error {
	var errs []error
	for _, h := range hardening {
		err := writeSysctl(filepath.Join(sysctlDir, h.key), h.value)
		if err != nil && !(h.optional && errors.Is(err, fs.ErrNotExist)) {
			errs = append(errs, fmt.Errorf("sysctl %s=%s: %w", h.key, h.value, err))
		}
	}
	done := false
	for _, k := range userNSKnobs {
		err := writeSysctl(filepath.Join(sysctlDir, k), "0")
		if err == nil {
			done = true
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("sysctl %s=0: %w", k, err))
		}
	}
	if !done && userNamespaces() {
		errs = append(errs, errors.New("no way to turn off unprivileged user namespaces on this kernel"))
	}
	return errors.Join(errs...)
}

// userNamespaces reports whether the kernel has user namespaces at all
// (the product's own kernel has none, so there is nothing to turn off).
var userNamespaces = func() bool {
	_, err := os.Stat("/proc/self/ns/user")
	return err == nil
}

// writeSysctl sets an existing setting; it never creates a file, so a
// setting the kernel lacks reads as fs.ErrNotExist.
func writeSysctl(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	return errors.Join(err, f.Close())
}

// fromHost reports whether a vsock peer is the host (CID 2): other VMs on
// the same host must not reach the agent.
func fromHost(a net.Addr) bool {
	va, ok := a.(*vsock.Addr)
	return ok && va.ContextID == vsock.Host
}
