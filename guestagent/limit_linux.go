//go:build linux

package guestagent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
)

// limitTable holds the users the host has blocked (over their disk quota
// or the host's free-space floor) with the reason the host gave.
type limitTable struct {
	mu      sync.Mutex
	blocked map[string]string
}

// checkLimit fails with ErrQuota when user is blocked. Root (the empty
// user) never is.
func (s *Service) checkLimit(user string) error {
	if user == "" || user == "root" {
		return nil
	}
	s.limits.mu.Lock()
	reason, ok := s.limits.blocked[user]
	s.limits.mu.Unlock()
	if ok {
		return fmt.Errorf("%w: %s", agentproto.ErrQuota, reason)
	}
	return nil
}

// Exec runs a command unless the user is blocked. A command that ends
// because the host blocked its user meanwhile (its processes are killed)
// reports the block instead of a bare "killed".
func (s *Service) Exec(ctx context.Context, req *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
	if err := s.checkLimit(req.User); err != nil {
		return agentproto.ExitStatus{}, err
	}
	st, err := s.Processes.Exec(ctx, req, eio)
	if lerr := s.checkLimit(req.User); lerr != nil {
		return st, lerr
	}
	return st, err
}

// UserLimit blocks or unblocks a user. Blocking first records the block,
// so nothing new starts, then kills every process of the user.
func (s *Service) UserLimit(ctx context.Context, req *agentproto.UserLimitRequest) (*agentproto.Empty, error) {
	if !account.ValidUserName(req.Name) || req.Name == "root" {
		return nil, fmt.Errorf("%w: user %q", agentproto.ErrInvalid, req.Name)
	}
	if len(req.Reason) > agentproto.MaxLimitReason || !utf8.ValidString(req.Reason) {
		return nil, fmt.Errorf("%w: reason longer than %d bytes or not UTF-8", agentproto.ErrInvalid, agentproto.MaxLimitReason)
	}
	if req.TmpMaxBytes < 0 {
		return nil, fmt.Errorf("%w: tmp_max_bytes %d, want 0 or more", agentproto.ErrInvalid, req.TmpMaxBytes)
	}
	if t := account.ActiveTmps(); t != nil && req.TmpMaxBytes > 0 {
		t.SetCap(req.Name, req.TmpMaxBytes)
	}
	if !req.Blocked {
		s.limits.mu.Lock()
		delete(s.limits.blocked, req.Name)
		s.limits.mu.Unlock()
		return &agentproto.Empty{}, nil
	}
	a, err := s.users.Lookup(req.Name)
	if err != nil {
		return nil, err
	}
	if a.UID < minReusedUID || a.UID == nobodyUID {
		return nil, fmt.Errorf("%w: %s (uid %d) is a system account", agentproto.ErrPermission, a.Name, a.UID)
	}
	reason := strings.TrimSpace(req.Reason)
	if reason == "" {
		reason = "the host blocked this user"
	}
	s.limits.mu.Lock()
	if s.limits.blocked == nil {
		s.limits.blocked = map[string]string{}
	}
	_, was := s.limits.blocked[req.Name]
	s.limits.blocked[req.Name] = reason
	s.limits.mu.Unlock()
	if err := killUser(ctx, s.cfg.ProcDir, a.UID); err != nil {
		return nil, err
	}
	if !was {
		s.log.Printf("user %s blocked: %s", req.Name, reason)
	}
	return &agentproto.Empty{}, nil
}
