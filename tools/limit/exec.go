package limit

import (
	"fmt"
	"sync"
	"time"
)

// DefaultIdleGap ends a turn after this long without exec attempts. It
// matches Osaurus.
const DefaultIdleGap = 15 * time.Second

// ExecLimiter caps the commands an agent runs per turn.
//
// A turn is one uninterrupted stretch of an agent's exec activity. It ends
// at whichever comes first:
//
//   - an explicit boundary: the server calls EndTurn(agent) when it learns
//     that a new turn began, for example a new MCP session or a request
//     that carries a new conversation or turn id;
//   - an idle gap: IdleGap (default 15 s) passes with no exec attempt by
//     that agent.
//
// The next command after the end starts a new turn with a zero count.
// Attempts the limiter refuses also count as activity: a model that keeps
// retrying is still inside the same turn, so it can't outwait the limit
// without actually pausing. MCP itself has no notion of turns, which is why
// the idle gap stays as the fallback.
type ExecLimiter struct {
	idle time.Duration
	now  func() time.Time

	mu        sync.Mutex
	turns     map[string]*turn
	lastSweep time.Time
}

type turn struct {
	used int
	last time.Time // last attempt, admitted or refused
}

// ExecOptions configure an ExecLimiter. The zero value is Osaurus's
// behaviour on the wall clock.
type ExecOptions struct {
	IdleGap time.Duration    // default DefaultIdleGap
	Now     func() time.Time // default time.Now
}

// NewExecLimiter returns an exec limiter.
func NewExecLimiter(o ExecOptions) *ExecLimiter {
	if o.IdleGap <= 0 {
		o.IdleGap = DefaultIdleGap
	}
	return &ExecLimiter{idle: o.IdleGap, now: clock(o.Now), turns: make(map[string]*turn)}
}

// Allow counts one command for agent in its current turn, or refuses it
// with a *Rejected when limit (the agent's maxCommandsPerTurn) commands
// already ran. A limit below 1 refuses everything.
func (l *ExecLimiter) Allow(agent string, limit int) error {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)

	t := l.turns[agent]
	if t == nil || now.Sub(t.last) >= l.idle {
		t = &turn{}
		l.turns[agent] = t
	}
	t.last = now
	if t.used >= limit {
		return &Rejected{
			Agent: agent, Service: "exec", Used: t.used, Limit: limit, RetryAfter: l.idle,
			msg: fmt.Sprintf("command limit reached: %d of %d commands used this turn (maxCommandsPerTurn). "+
				"The count resets when the next turn starts, or after %s with no commands. "+
				"Finish this turn with what you have, or ask the user to raise the limit.",
				t.used, limit, roundUp(l.idle)),
		}
	}
	t.used++
	return nil
}

// EndTurn ends agent's current turn; its next command starts a new one.
func (l *ExecLimiter) EndTurn(agent string) {
	l.mu.Lock()
	delete(l.turns, agent)
	l.mu.Unlock()
}

// Used reports how many commands agent ran in its current turn (0 when the
// turn has ended).
func (l *ExecLimiter) Used(agent string) int {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.turns[agent]
	if t == nil || now.Sub(t.last) >= l.idle {
		return 0
	}
	return t.used
}

// sweep drops turns that have ended by idleness, at most once per idle gap,
// so agents that went quiet cost nothing.
func (l *ExecLimiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < l.idle {
		return
	}
	l.lastSweep = now
	for a, t := range l.turns {
		if now.Sub(t.last) >= l.idle {
			delete(l.turns, a)
		}
	}
}

// tracked reports how many agents the limiter holds state for (tests).
func (l *ExecLimiter) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.turns)
}
