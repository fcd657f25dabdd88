//go:build linux

package guestagent

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netns"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// The network policy's hook in the process start path: netnsFor picks the
// namespace (and proxy environment) of a process before it is spawned,
// and spawnIn starts it there. Kept apart from exec_linux.go so the spawn
// path stays readable.

// netnsFor applies the request's network policy for a non-root user and
// returns the namespace to start in (netns.None(): the guest's own) and
// the environment to add. Root's processes (installs, the host's own
// maintenance) stay in the guest's namespace. A non-root process without
// a policy gets none: a forgotten policy fails closed.
func (s *Service) netnsFor(a *Account, req *agentproto.ExecRequest) (netns.NsHandle, []string, error) {
	if s.cfg.NetPolicy == nil || a.UID == 0 {
		return netns.None(), nil, nil
	}
	setting := req.Network
	if setting == "" {
		setting = netpolicy.SettingNone
	}
	ns, env, err := s.cfg.NetPolicy.Prepare(a.Name, req.NetScope, setting)
	if err != nil {
		var pe *netpolicy.Error
		if errors.As(err, &pe) {
			return netns.None(), nil, fmt.Errorf("%w: %v", agentproto.ErrInvalid, err)
		}
		return netns.None(), nil, fmt.Errorf("%w: %v", agentproto.ErrUnsupported, err)
	}
	return ns, env, nil
}

// spawnIn wraps fork so it runs in ns when one is set. The zero handle
// (a command built without netnsFor) counts as unset, like netns.None().
func spawnIn(ns netns.NsHandle, fork func() (int, error)) func() (int, error) {
	if int(ns) <= 0 {
		return fork
	}
	return func() (int, error) { return forkInNetns(ns, fork) }
}
