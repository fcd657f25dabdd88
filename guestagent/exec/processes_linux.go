//go:build linux

package exec

import (
	"errors"
	"io"
	"log"

	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"github.com/osaurus/osaurus-sandbox/guestagent/network"
)

// Config configures Processes.
type Config struct {
	// Users names the account files requests are resolved in.
	Users account.UserDB
	// Reaper collects the exit status of every process started. Required.
	Reaper *Reaper
	// Cgroups, when set, runs every call in its own cgroup under its
	// user's limits.
	Cgroups *Cgroups
	// NetPolicy, when set, runs every non-root process in its user's
	// network namespace.
	NetPolicy *network.NetPolicy
	// SystemRoot is where package sources are read for installs.
	SystemRoot string
	// Limit, when set, fails for a user the host has blocked.
	Limit func(user string) error
	// Logger gets the package's messages; nil discards them.
	Logger *log.Logger
}

// Processes runs the agentproto exec operations: Exec, StartBackground,
// Wait and Signal.
type Processes struct {
	cfg    Config
	users  account.UserDB
	reaper *Reaper
	log    *log.Logger

	bg bgTable
}

// New returns Processes for cfg; cfg.Reaper is required.
func New(cfg Config) (*Processes, error) {
	if cfg.Reaper == nil {
		return nil, errors.New("exec: Config.Reaper is required")
	}
	if cfg.SystemRoot == "" {
		cfg.SystemRoot = "/"
	}
	lg := cfg.Logger
	if lg == nil {
		lg = log.New(io.Discard, "", 0)
	}
	return &Processes{
		cfg:    cfg,
		users:  cfg.Users.WithDefaults(),
		reaper: cfg.Reaper,
		log:    lg,
		bg:     bgTable{procs: map[int]*bgProc{}},
	}, nil
}

// account resolves the user an operation runs as.
func (s *Processes) account(user string) (*account.Account, error) {
	a, err := s.users.Lookup(user)
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// checkLimit fails when the host blocked user.
func (s *Processes) checkLimit(user string) error {
	if s.cfg.Limit == nil {
		return nil
	}
	return s.cfg.Limit(user)
}
