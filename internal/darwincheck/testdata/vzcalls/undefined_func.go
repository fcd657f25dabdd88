//go:build darwin

package vz

import "github.com/Code-Hex/vz/v3"

func brokenCall() error {
	_, err := vz.NewVirtioSocketDevice() // the constructor is NewVirtioSocketDeviceConfiguration
	return err
}
