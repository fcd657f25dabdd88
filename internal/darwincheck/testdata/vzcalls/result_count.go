//go:build darwin

package vz

import "github.com/Code-Hex/vz/v3"

func brokenCall(machine *vz.VirtualMachine) error {
	err := machine.RequestStop() // returns (bool, error)
	return err
}
