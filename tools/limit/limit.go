// Package limit holds the per-agent limiters of the sandbox tools: an exec
// limiter that caps commands per turn, and a sliding-window rate limiter per
// agent and service. Both refuse with a *Rejected error, which tool
// envelopes report as kind "rejected" (not retryable).
//
// Both are safe for concurrent use, take an injectable clock, and forget an
// agent's state once it can no longer affect a decision, so memory stays
// bounded by the number of recently active agents.
package limit

import (
	"errors"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// ErrLimited matches every *Rejected with errors.Is; its class is
// agentproto.ErrBusy.
var ErrLimited = agentproto.Class(agentproto.ErrBusy, "limit exceeded")

// Rejected is a refusal by a limiter.
type Rejected struct {
	Agent   string
	Service string // "exec" for the exec limiter
	Used    int    // commands or calls counted so far
	Limit   int
	// RetryAfter is how long the caller has to wait for the limiter to
	// admit it again, assuming it makes no further attempts meanwhile.
	RetryAfter time.Duration
	msg        string
}

func (e *Rejected) Error() string { return e.msg }

// Is makes errors.Is(err, ErrLimited) true, and so errors.Is(err,
// agentproto.ErrBusy), its class.
func (e *Rejected) Is(target error) bool {
	return target == ErrLimited || errors.Is(ErrLimited, target)
}

// roundUp renders a wait in whole seconds, never promising less than the
// real wait.
func roundUp(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

func clock(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}
