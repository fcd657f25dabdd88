//go:build darwin

package vz

import "github.com/Code-Hex/vz/v3"

func brokenCall(log *vz.FileSerialPortAttachment) error {
	_, err := vz.NewVirtioBlockDeviceConfiguration(log) // a serial attachment is no disk
	return err
}
