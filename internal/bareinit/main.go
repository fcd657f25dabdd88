//go:build linux

// Command bareinit is the boot benchmark's stand-in for the guest agent:
// run by the kernel as /init of a minimal initramfs, it only reports on the
// console that it started (with the guest uptime and the kernel's release)
// and powers the VM off.
// Booting it with the product's QEMU flags and kernel measures the limit
// the product's boot is compared with.
package main

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Marker starts the line the benchmark waits for on the serial console.
const Marker = "osaurus-bare-init started uptime="

func main() {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	out := os.Stdout // the kernel hands /init the console
	if f, err := os.OpenFile("/dev/console", os.O_WRONLY|unix.O_NOCTTY, 0); err == nil {
		out = f
	}
	var u unix.Utsname
	unix.Uname(&u)
	fmt.Fprintf(out, "\n%s%.6f release=%s\n", Marker, float64(ts.Nano())/1e9, unix.ByteSliceToString(u.Release[:]))
	unix.Sync()
	// An x86 guest without ACPI (QEMU's microvm) can't power off, only
	// halt; a reset ends QEMU on every machine type, since it runs with
	// -no-reboot.
	cmd := unix.LINUX_REBOOT_CMD_POWER_OFF
	if runtime.GOARCH == "amd64" {
		cmd = unix.LINUX_REBOOT_CMD_RESTART
	}
	unix.Reboot(cmd)
	select {} // PID 1 must not return
}
