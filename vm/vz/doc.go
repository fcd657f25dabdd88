// Package vz is the vm.Driver for macOS, on Apple's Virtualization
// framework through github.com/Code-Hex/vz/v3.
//
// It only makes the framework calls; the checks, the kernel command line
// and the lifecycle are in vm/vz/core, which is tested on every OS. The
// framework needs cgo and macOS, so this package is empty elsewhere; on
// Linux its darwin files are type-checked by internal/darwincheck.
//
// The binary must be signed with the com.apple.security.virtualization
// entitlement (see entitlements.plist and `make run`).
package vz
