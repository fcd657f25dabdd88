//go:build darwin

// The same calls as the broken files, made correctly: the check passes.
package vz

import "github.com/Code-Hex/vz/v3"

func goodCalls(boot vz.BootLoader, cpus uint, machine *vz.VirtualMachine) error {
	if _, err := vz.NewVirtioSocketDeviceConfiguration(); err != nil {
		return err
	}
	if _, err := vz.NewVirtualMachineConfiguration(boot, cpus, 1<<30); err != nil {
		return err
	}
	disk, err := vz.NewDiskImageStorageDeviceAttachmentWithCacheAndSync("disk.img", false,
		vz.DiskImageCachingModeCached, vz.DiskImageSynchronizationModeFsync)
	if err != nil {
		return err
	}
	if _, err := vz.NewVirtioBlockDeviceConfiguration(disk); err != nil {
		return err
	}
	if _, err := machine.RequestStop(); err != nil {
		return err
	}
	return machine.Stop()
}
