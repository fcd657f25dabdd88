//go:build darwin

package vz

import "github.com/Code-Hex/vz/v3"

func brokenCall() error {
	_, err := vz.NewDiskImageStorageDeviceAttachmentWithCacheAndSync("disk.img", false,
		vz.DiskImageSynchronizationModeFsync, vz.DiskImageCachingModeCached) // order swapped
	return err
}
