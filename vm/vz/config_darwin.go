//go:build darwin

package vz

import (
	"fmt"

	"github.com/Code-Hex/vz/v3"

	"github.com/osaurus/osaurus-sandbox/vm/vz/core"
)

// configure builds the framework's configuration for a checked plan. Each
// device's minimum macOS is in the error when the host lacks it.
func configure(p core.Plan) (*vz.VirtualMachineConfiguration, error) {
	boot, err := vz.NewLinuxBootLoader(p.Kernel, vz.WithInitrd(p.Initrd), vz.WithCommandLine(p.Cmdline))
	if err != nil {
		return nil, needs(err, "the Linux boot loader", 11)
	}
	config, err := vz.NewVirtualMachineConfiguration(boot, p.CPUs, p.MemoryBytes)
	if err != nil {
		return nil, needs(err, "a VM configuration", 11)
	}

	disk, err := rootDisk(p.RootDisk)
	if err != nil {
		return nil, err
	}
	config.SetStorageDevicesVirtualMachineConfiguration([]vz.StorageDeviceConfiguration{disk})

	if len(p.Shares) > 0 {
		var shares []vz.DirectorySharingDeviceConfiguration
		for _, sh := range p.Shares {
			fs, err := share(sh.Tag, sh.HostPath)
			if err != nil {
				return nil, err
			}
			shares = append(shares, fs)
		}
		config.SetDirectorySharingDevicesVirtualMachineConfiguration(shares)
	}

	if p.NAT {
		nat, err := vz.NewNATNetworkDeviceAttachment()
		if err != nil {
			return nil, needs(err, "NAT networking", 11)
		}
		nic, err := vz.NewVirtioNetworkDeviceConfiguration(nat)
		if err != nil {
			return nil, needs(err, "a virtio network device", 11)
		}
		config.SetNetworkDevicesVirtualMachineConfiguration([]*vz.VirtioNetworkDeviceConfiguration{nic})
	}

	sock, err := vz.NewVirtioSocketDeviceConfiguration()
	if err != nil {
		return nil, needs(err, "a vsock device", 11)
	}
	config.SetSocketDevicesVirtualMachineConfiguration([]vz.SocketDeviceConfiguration{sock})

	if p.ConsoleLog != "" {
		// hvc0: the first virtio console port, appended to the log file.
		log, err := vz.NewFileSerialPortAttachment(p.ConsoleLog, true)
		if err != nil {
			return nil, needs(err, "the console log "+p.ConsoleLog, 11)
		}
		console, err := vz.NewVirtioConsoleDeviceSerialPortConfiguration(log)
		if err != nil {
			return nil, needs(err, "a virtio console", 11)
		}
		config.SetSerialPortsVirtualMachineConfiguration([]*vz.VirtioConsoleDeviceSerialPortConfiguration{console})
	}

	entropy, err := vz.NewVirtioEntropyDeviceConfiguration()
	if err != nil {
		return nil, needs(err, "an entropy device", 11)
	}
	config.SetEntropyDevicesVirtualMachineConfiguration([]*vz.VirtioEntropyDeviceConfiguration{entropy})

	balloon, err := vz.NewVirtioTraditionalMemoryBalloonDeviceConfiguration()
	if err != nil {
		return nil, needs(err, "a memory balloon", 11)
	}
	config.SetMemoryBalloonDevicesVirtualMachineConfiguration([]vz.MemoryBalloonDeviceConfiguration{balloon})
	return config, nil
}

// rootDisk attaches the raw image read-write on virtio-blk (/dev/vda).
// Cached mode: with the default (automatic) mode data corruption was
// reported on Apple Silicon. Fsync mode passes a guest flush on as fsync,
// which survives a crash of the app or the VM, without paying for
// F_FULLFSYNC's drive-cache flush on every guest flush.
func rootDisk(path string) (*vz.VirtioBlockDeviceConfiguration, error) {
	att, err := vz.NewDiskImageStorageDeviceAttachmentWithCacheAndSync(path, false,
		vz.DiskImageCachingModeCached, vz.DiskImageSynchronizationModeFsync)
	if err != nil {
		return nil, needs(err, fmt.Sprintf("the root disk %s with cached caching mode", path), 12)
	}
	dev, err := vz.NewVirtioBlockDeviceConfiguration(att)
	if err != nil {
		return nil, needs(err, "a virtio block device", 11)
	}
	return dev, nil
}

// share exposes a host directory read-write over VirtioFS under tag.
func share(tag, dir string) (*vz.VirtioFileSystemDeviceConfiguration, error) {
	fs, err := vz.NewVirtioFileSystemDeviceConfiguration(tag)
	if err != nil {
		return nil, needs(err, "VirtioFS share "+tag, 12)
	}
	sd, err := vz.NewSharedDirectory(dir, false)
	if err != nil {
		return nil, needs(err, "VirtioFS share "+tag, 12)
	}
	single, err := vz.NewSingleDirectoryShare(sd)
	if err != nil {
		return nil, needs(err, "VirtioFS share "+tag, 12)
	}
	fs.SetDirectoryShare(single)
	return fs, nil
}
