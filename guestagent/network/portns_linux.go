//go:build linux

package network

import (
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// AgentNetns returns a duplicate of user's own network namespace (not a
// plugin's), which the caller closes, or false when user has none yet (it
// has run nothing since the VM started).
func (n *NetPolicy) AgentNetns(user string) (netns.NsHandle, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	an := n.nets[user]
	if an == nil {
		return netns.None(), false
	}
	fd, err := unix.FcntlInt(uintptr(an.ns), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return netns.None(), false
	}
	return netns.NsHandle(fd), true
}
