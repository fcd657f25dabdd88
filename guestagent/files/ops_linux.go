//go:build linux

package files

import (
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
)

// Config configures Ops.
type Config struct {
	// Users names the account files requests are resolved in.
	Users account.UserDB
	// Limit, when set, fails for a user the host has blocked; writes and
	// directory changes check it.
	Limit func(user string) error
}

// Ops runs the agentproto file operations.
type Ops struct {
	cfg   Config
	users account.UserDB
}

// New returns Ops for cfg.
func New(cfg Config) *Ops {
	return &Ops{cfg: cfg, users: cfg.Users.WithDefaults()}
}

// account resolves the user an operation runs as.
func (s *Ops) account(user string) (*account.Account, error) {
	a, err := s.users.Lookup(user)
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// checkLimit fails when the host blocked user.
func (s *Ops) checkLimit(user string) error {
	if s.cfg.Limit == nil {
		return nil
	}
	return s.cfg.Limit(user)
}
