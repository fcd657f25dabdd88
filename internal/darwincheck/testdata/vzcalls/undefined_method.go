//go:build darwin

package vz

import "github.com/Code-Hex/vz/v3"

func brokenCall(machine *vz.VirtualMachine) error {
	return machine.Shutdown() // no such method
}
