package bridge

import (
	"errors"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// Per-agent bounds of the host-side stores behind the bridge, so no agent
// can fill the host's disk or the owner's memory through them. The README
// ("Host-side stores and their limits") lists them with the other stores'.
const (
	// MaxConfigKeys is how many config keys an agent may have.
	MaxConfigKeys = 256
	// MaxConfigValue is the largest config value, in bytes.
	MaxConfigValue = 64 << 10
	// MaxConfigBytes bounds an agent's config file: keys and values.
	MaxConfigBytes = 1 << 20
	// MaxLogLine is the largest log message, in bytes.
	MaxLogLine = 16 << 10
	// DefaultLogBytes is an agent's log buffer; past it the oldest half
	// goes (LogStore.MaxBytes).
	DefaultLogBytes = 1 << 20
)

var (
	// ErrTooLarge: one value is over its size limit (HTTP 413).
	ErrTooLarge = agentproto.Class(agentproto.ErrTooLarge, "too large")
	// ErrQuota: the agent's store is full (HTTP 507).
	ErrQuota = agentproto.Class(agentproto.ErrQuota, "quota full")
)

// LimitError is a write refused by a bound; its message names the limit
// and what to do.
type LimitError struct {
	Kind error // ErrTooLarge or ErrQuota
	Msg  string
}

func (e *LimitError) Error() string        { return e.Msg }
func (e *LimitError) Is(target error) bool { return target == e.Kind || errors.Is(e.Kind, target) }

func tooLarge(format string, args ...any) error {
	return &LimitError{Kind: ErrTooLarge, Msg: fmt.Sprintf(format, args...)}
}

func quotaFull(format string, args ...any) error {
	return &LimitError{Kind: ErrQuota, Msg: fmt.Sprintf(format, args...)}
}
