//go:build linux

package relay

import (
	"io"
	"log"

	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"github.com/osaurus/osaurus-sandbox/guestagent/network"
)

// Config configures a Relay.
type Config struct {
	// Users names the account file callers' uids are named from.
	Users account.UserDB
	// NetPolicy, when set, tells a plugin's caller from its agent's by
	// network namespace.
	NetPolicy *network.NetPolicy
	// Logger gets the relay's messages; nil discards them.
	Logger *log.Logger
}

// Relay relays the guest's bridge socket to the host.
type Relay struct {
	cfg   Config
	users account.UserDB
	log   *log.Logger
}

// New returns a Relay for cfg.
func New(cfg Config) *Relay {
	lg := cfg.Logger
	if lg == nil {
		lg = log.New(io.Discard, "", 0)
	}
	return &Relay{cfg: cfg, users: cfg.Users.WithDefaults(), log: lg}
}
