//go:build linux

package network

import "github.com/vishvananda/netns"

// SpawnIn wraps fork so it runs in ns when one is set. The zero handle
// (a command built without netnsFor) counts as unset, like netns.None().
func SpawnIn(ns netns.NsHandle, fork func() (int, error)) func() (int, error) {
	if int(ns) <= 0 {
		return fork
	}
	return func() (int, error) { return ForkInNetns(ns, fork) }
}
