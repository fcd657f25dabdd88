package network

import (
	"context"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// Bounds of the refusal log. Each agent has a share of its own, so one
// agent flooding refusals pushes out only its own older entries, never
// another agent's; a run of identical refusals in a row is one entry with
// a count, so repeating a refused connection costs no space at all.
const (
	netLogMax     = 4096
	netLogPerUser = 1024
)

// netLog is the guest's record of refused connections. Only the guest
// agent writes it, from the proxy's decisions and the kernel's packet log;
// agents have no way to add, change or remove entries.
type netLog struct {
	mu       sync.Mutex
	entries  []agentproto.NetRefusal // in Seq order
	seq      uint64
	dropped  uint64
	warnings []string
	changed  chan struct{} // closed and replaced on every change
	now      func() time.Time
}

func newNetLog() *netLog {
	return &netLog{changed: make(chan struct{}), now: time.Now}
}

// add records one refusal.
func (l *netLog) add(r agentproto.NetRefusal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.Time.IsZero() {
		r.Time = l.now()
	}
	r.Count = 1
	// The same refusal again right after the agent's previous one: count
	// it on that entry, which moves to the end so followers see it.
	for i := len(l.entries) - 1; i >= 0; i-- {
		e := l.entries[i]
		if e.User != r.User {
			continue
		}
		if e.Dest == r.Dest && e.Port == r.Port && e.Proto == r.Proto && e.By == r.By && e.Reason == r.Reason {
			l.entries = append(l.entries[:i], l.entries[i+1:]...)
			e.Count++
			e.Last = r.Time
			r = e
		}
		break
	}
	l.seq++
	r.Seq = l.seq
	l.entries = append(l.entries, r)
	n := 0
	for _, e := range l.entries {
		if e.User == r.User {
			n++
		}
	}
	if n > netLogPerUser {
		for i, e := range l.entries {
			if e.User == r.User {
				l.entries = append(l.entries[:i], l.entries[i+1:]...)
				l.dropped++
				break
			}
		}
	}
	if len(l.entries) > netLogMax {
		l.entries = l.entries[1:]
		l.dropped++
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// warn records something the log can't capture, once.
func (l *netLog) warn(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.warnings {
		if w == msg {
			return
		}
	}
	l.warnings = append(l.warnings, msg)
}

// read answers a net_log call, waiting up to req.WaitMillis for an entry
// newer than req.After.
func (l *netLog) read(ctx context.Context, req *agentproto.NetLogRequest) *agentproto.NetLogResponse {
	max := req.Max
	if max <= 0 || max > agentproto.MaxNetLogEntries {
		max = agentproto.MaxNetLogEntries
	}
	wait := time.Duration(req.WaitMillis) * time.Millisecond
	if wait > agentproto.MaxNetLogWait {
		wait = agentproto.MaxNetLogWait
	}
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		l.mu.Lock()
		after := req.After
		if after > l.seq {
			after = 0 // a cursor from before the guest rebooted: start over
		}
		resp := &agentproto.NetLogResponse{Next: after, Dropped: l.dropped,
			Warnings: append([]string(nil), l.warnings...), Entries: []agentproto.NetRefusal{}}
		for _, e := range l.entries {
			if e.Seq > after && len(resp.Entries) < max {
				resp.Entries = append(resp.Entries, e)
				resp.Next = e.Seq
			}
		}
		changed := l.changed
		l.mu.Unlock()
		if len(resp.Entries) > 0 || timeout == nil {
			return resp
		}
		select {
		case <-changed:
		case <-timeout:
			return resp
		case <-ctx.Done():
			return resp
		}
	}
}
