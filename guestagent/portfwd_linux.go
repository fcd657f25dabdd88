//go:build linux

package guestagent

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
)

// portDialTimeout bounds connecting to the agent's own loopback.
const portDialTimeout = 5 * time.Second

// PortDial connects to port on the loopback of user's own network
// namespace, for the host's preview relay: the connection is made from a
// thread inside that namespace, so it reaches only what that agent
// listens on, and no other agent's namespace is ever entered.
func (s *Service) PortDial(ctx context.Context, req *agentproto.PortDialRequest) (net.Conn, error) {
	if !account.ValidUserName(req.User) {
		return nil, fmt.Errorf("%w: user %q", agentproto.ErrInvalid, req.User)
	}
	if req.Port < 1 || req.Port > 65535 {
		return nil, fmt.Errorf("%w: port %d, want 1–65535", agentproto.ErrInvalid, req.Port)
	}
	a, err := s.account(req.User)
	if err != nil {
		return nil, err
	}
	if a.UID == 0 {
		return nil, fmt.Errorf("%w: previews are of agents' ports, not root's", agentproto.ErrPermission)
	}
	if s.cfg.NetPolicy == nil {
		return nil, fmt.Errorf("%w: this guest agent runs agents without network namespaces", agentproto.ErrUnsupported)
	}
	ns, ok := s.cfg.NetPolicy.AgentNetns(req.User)
	if !ok {
		return nil, fmt.Errorf("%w: %s listens on nothing: it has run no process since the VM started", agentproto.ErrNotFound, req.User)
	}
	defer ns.Close()
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread joins the agent's namespace for good: never
		// unlocked, it ends with this goroutine.
		runtime.LockOSThread()
		if err := unix.Setns(int(ns), unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("%w: joining %s's network namespace: %v", agentproto.ErrInternal, req.User, err)}
			return
		}
		d := net.Dialer{Timeout: portDialTimeout}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(req.Port)))
		if err != nil {
			err = fmt.Errorf("%w: nothing of %s's answers on port %d: %v", agentproto.ErrNotFound, req.User, req.Port, err)
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

func (r recovering) PortDial(ctx context.Context, req *agentproto.PortDialRequest) (_ net.Conn, err error) {
	defer r.catch(agentproto.OpPortDial, time.Now(), &err)
	return r.s.PortDial(ctx, req)
}
