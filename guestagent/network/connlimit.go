package network

import (
	"fmt"
	"sync"
)

// connLimiter caps the connections one agent holds open to a server of
// PID 1 at once, and all agents' together: each one holds descriptors in
// PID 1, which serves every agent, so no agent may hoard them.
type connLimiter struct {
	what     string // the server, for messages
	perAgent int
	total    int

	mu  sync.Mutex
	n   map[string]int
	all int
}

func NewConnLimiter(what string, perAgent, total int) *connLimiter {
	return &connLimiter{what: what, perAgent: perAgent, total: total, n: map[string]int{}}
}

// errTooManyConns is the refusal of a connection over a cap; its message
// names the limit.
type errTooManyConns struct{ msg string }

func (e *errTooManyConns) Error() string { return e.msg }

// Acquire counts one more connection of agent ("" for a caller that is
// no agent) and returns its release, or an error naming the cap it would
// pass.
func (l *connLimiter) Acquire(agent string) (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[agent] >= l.perAgent {
		who := agent
		if who == "" {
			who = "a caller that is no agent"
		}
		return nil, &errTooManyConns{fmt.Sprintf("%s already has %d connections open to the %s, the limit per agent; close some and retry", who, l.perAgent, l.what)}
	}
	if l.all >= l.total {
		return nil, &errTooManyConns{fmt.Sprintf("the %s already has %d connections open, the limit for all agents together; retry later", l.what, l.total)}
	}
	l.n[agent]++
	l.all++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.all--
			if l.n[agent]--; l.n[agent] <= 0 {
				delete(l.n, agent)
			}
		})
	}, nil
}
