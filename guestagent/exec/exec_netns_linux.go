//go:build linux

package exec

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netns"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"github.com/osaurus/osaurus-sandbox/guestagent/network"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// The network policy's hook in the process start path: netnsFor picks the
// namespace (and proxy environment) of a process before it is spawned,
// and network.SpawnIn starts it there. Kept apart from exec_linux.go so the spawn
// path stays readable.

// netnsFor applies the request's network policy for a non-root user and
// returns the namespace to start in (netns.None(): the guest's own) and
// the environment to add. A non-root process without a policy gets none:
// a forgotten policy fails closed. Root's processes stay in the guest's
// namespace (the host's own maintenance), except installs, which ask for
// NetworkPackageMirror: a namespace of their own that reaches only the
// hosts the package sources name, through the proxy.
func (s *Processes) netnsFor(a *account.Account, req *agentproto.ExecRequest) (netns.NsHandle, []string, error) {
	if s.cfg.NetPolicy == nil {
		return netns.None(), nil, nil
	}
	setting, scope := req.Network, req.NetScope
	if a.UID == 0 {
		switch setting {
		case "":
			return netns.None(), nil, nil
		case agentproto.NetworkPackageMirror:
			hosts, err := network.PackageMirrorHosts(s.cfg.SystemRoot)
			if err != nil {
				return netns.None(), nil, fmt.Errorf("%w: %v", agentproto.ErrUnsupported, err)
			}
			setting, scope = strings.Join(hosts, ","), "install"
		}
	}
	if setting == "" {
		setting = netpolicy.SettingNone
	}
	ns, env, err := s.cfg.NetPolicy.Prepare(a.Name, scope, setting)
	if err != nil {
		var pe *netpolicy.Error
		if errors.As(err, &pe) {
			return netns.None(), nil, fmt.Errorf("%w: %v", agentproto.ErrInvalid, err)
		}
		return netns.None(), nil, fmt.Errorf("%w: %v", agentproto.ErrUnsupported, err)
	}
	return ns, env, nil
}
