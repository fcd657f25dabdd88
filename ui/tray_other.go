//go:build !linux

package ui

// hasTrayHost: macOS always has the menu bar for the status item.
func hasTrayHost() bool { return true }
