// Command bootinit is a stand-in guest agent for the QEMU boot test: as PID 1
// it loads the modules listed in /lib/modules/order the way the real agent
// must, reports which virtio drivers bound a device, and powers off.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

func main() {
	if err := run(); err != nil {
		fmt.Println("BOOTINIT FAIL:", err)
	} else {
		fmt.Println("MODULES OK")
	}
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

func run() error {
	if err := unix.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
		return fmt.Errorf("mount /sys: %w", err)
	}
	f, err := os.Open("/lib/modules/order")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name := strings.TrimSpace(sc.Text())
		if name == "" {
			continue
		}
		if err := load(filepath.Join("/lib/modules", name)); err != nil {
			return fmt.Errorf("load %s: %w", name, err)
		}
		fmt.Println("loaded", name)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	// Each driver directory holds one symlink per bound device.
	drivers, _ := filepath.Glob("/sys/bus/virtio/drivers/*/virtio*")
	for _, d := range drivers {
		fmt.Println("bound", filepath.Base(filepath.Dir(d)), filepath.Base(d))
	}
	return nil
}

func load(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	err = unix.FinitModule(int(f.Fd()), "", 0)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	return err
}
