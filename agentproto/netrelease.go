package agentproto

import (
	"context"
	"net"
)

// OpNetRelease frees a user's network namespace for a scope (a plugin's,
// on uninstall) in the guest (protocol 2.6). A guest that predates it
// answers ErrUnsupported ("unknown op"); it frees them at user removal.
const OpNetRelease = "net_release"

// NetReleaseRequest names the namespace to free: User's for Scope (the
// plugin id an ExecRequest's NetScope named).
type NetReleaseRequest struct {
	User  string `json:"user"`
	Scope string `json:"scope"`
}

// NetReleaseService is implemented by a guest that frees namespaces on
// request; a separate interface so older fakes still satisfy Service.
type NetReleaseService interface {
	NetRelease(context.Context, *NetReleaseRequest) (*Empty, error)
}

// NetRelease frees the namespace req names; freeing one that does not
// exist succeeds.
func (c *Client) NetRelease(ctx context.Context, req NetReleaseRequest) error {
	_, err := call[Empty](ctx, c, OpNetRelease, req)
	return err
}

// maxHostAddrs bounds the addresses a hello names.
const maxHostAddrs = 64

// hostAddrs are this machine's own interface addresses, sent in hello so
// the guest denies them to agents: under a user-mode NAT a guest reaches
// the host's listeners on any of them. Loopback is denied already.
func hostAddrs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, ipn.IP.String())
		if len(out) == maxHostAddrs {
			break
		}
	}
	return out
}
