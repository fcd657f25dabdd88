//go:build darwin

package vz

import "github.com/Code-Hex/vz/v3"

func brokenCall(boot vz.BootLoader, cpus int) error {
	_, err := vz.NewVirtualMachineConfiguration(boot, cpus, 1<<30) // wants uint
	return err
}
