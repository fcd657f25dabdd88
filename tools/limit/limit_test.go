package limit

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a settable clock safe for concurrent readers.
type fakeClock struct{ ns atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func mustAllowN(t *testing.T, n int, f func() error) {
	t.Helper()
	for i := range n {
		if err := f(); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
}

func rejected(t *testing.T, err error) *Rejected {
	t.Helper()
	var r *Rejected
	if !errors.As(err, &r) || !errors.Is(err, ErrLimited) {
		t.Fatalf("err = %v, want *Rejected", err)
	}
	return r
}

func TestExecLimiterCountsPerTurn(t *testing.T) {
	c := newClock()
	l := NewExecLimiter(ExecOptions{Now: c.Now})
	allow := func() error { c.Advance(time.Second); return l.Allow("bob", 3) }
	mustAllowN(t, 3, allow)
	r := rejected(t, allow())
	if r.Used != 3 || r.Limit != 3 || r.Service != "exec" || r.Agent != "bob" || r.RetryAfter != 15*time.Second {
		t.Fatalf("rejection = %+v", r)
	}
	want := "command limit reached: 3 of 3 commands used this turn (maxCommandsPerTurn). " +
		"The count resets when the next turn starts, or after 15s with no commands."
	if !strings.HasPrefix(r.Error(), want) {
		t.Fatalf("message = %q\nwant prefix %q", r.Error(), want)
	}
	if got := l.Used("bob"); got != 3 {
		t.Fatalf("Used = %d, want 3", got)
	}
	// Another agent has its own count.
	if err := l.Allow("alice", 3); err != nil {
		t.Fatalf("alice: %v", err)
	}
}

func TestExecLimiterIdleGapEndsTurn(t *testing.T) {
	c := newClock()
	l := NewExecLimiter(ExecOptions{Now: c.Now})
	mustAllowN(t, 2, func() error { return l.Allow("bob", 2) })
	c.Advance(14 * time.Second)
	rejected(t, l.Allow("bob", 2)) // refused attempt keeps the turn alive
	c.Advance(14 * time.Second)
	rejected(t, l.Allow("bob", 2))
	c.Advance(15 * time.Second)
	if got := l.Used("bob"); got != 0 {
		t.Fatalf("Used after idle gap = %d, want 0", got)
	}
	mustAllowN(t, 2, func() error { return l.Allow("bob", 2) })
}

func TestExecLimiterEndTurn(t *testing.T) {
	c := newClock()
	l := NewExecLimiter(ExecOptions{Now: c.Now, IdleGap: time.Hour})
	mustAllowN(t, 1, func() error { return l.Allow("bob", 1) })
	rejected(t, l.Allow("bob", 1))
	l.EndTurn("alice") // other agents' boundaries don't matter
	rejected(t, l.Allow("bob", 1))
	l.EndTurn("bob")
	mustAllowN(t, 1, func() error { return l.Allow("bob", 1) })
}

func TestExecLimiterLimitChangesApplyAtOnce(t *testing.T) {
	l := NewExecLimiter(ExecOptions{Now: newClock().Now})
	mustAllowN(t, 2, func() error { return l.Allow("bob", 5) })
	rejected(t, l.Allow("bob", 2)) // the user lowered the limit mid-turn
	if err := l.Allow("bob", 10); err != nil {
		t.Fatal(err)
	}
	rejected(t, l.Allow("bob", 0))
}

func TestExecLimiterForgetsIdleAgents(t *testing.T) {
	c := newClock()
	l := NewExecLimiter(ExecOptions{Now: c.Now})
	for i := range 1000 {
		if err := l.Allow(fmt.Sprint("agent", i), 10); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(16 * time.Second)
	_ = l.Allow("bob", 10)
	if n := l.tracked(); n != 1 {
		t.Fatalf("tracking %d agents after the idle gap, want 1", n)
	}
}

func TestRateLimiterQuotas(t *testing.T) {
	tests := []struct {
		service string
		limit   int
	}{
		{ServiceInference, 60},
		{ServiceHTTP, 120},
		{ServiceDispatch, 10},
		{"memory", 120},
		{"", 120},
	}
	for _, tt := range tests {
		t.Run(tt.service, func(t *testing.T) {
			c := newClock()
			r := NewRateLimiter(RateOptions{Now: c.Now})
			mustAllowN(t, tt.limit, func() error { return r.Allow("bob", tt.service) })
			rej := rejected(t, r.Allow("bob", tt.service))
			if rej.Limit != tt.limit || rej.Used != tt.limit || rej.Service != tt.service {
				t.Fatalf("rejection = %+v", rej)
			}
			if err := r.Allow("alice", tt.service); err != nil {
				t.Fatalf("alice shares bob's quota: %v", err)
			}
			if err := r.Allow("bob", tt.service+"-other"); err != nil {
				t.Fatalf("services share a quota: %v", err)
			}
		})
	}
}

// A setting that names some services (rateLimits "events=8") leaves the
// others at Osaurus's quotas, as docs/settings.md says.
func TestRateLimiterSettingKeepsOtherQuotas(t *testing.T) {
	r := NewRateLimiter(RateOptions{Limits: map[string]int{"events": 8, ServiceInference: 5}})
	for service, want := range map[string]int{"events": 8, ServiceInference: 5, ServiceDispatch: 10, ServiceHTTP: 120, "exec": 120} {
		if got := r.Limit(service); got != want {
			t.Errorf("%s: quota %d, want %d", service, got, want)
		}
	}
}

func TestRateLimiterSlidingWindow(t *testing.T) {
	c := newClock()
	r := NewRateLimiter(RateOptions{Now: c.Now})
	// 10 dispatches spread over 45 s: t=0,5,...,45.
	for i := range 10 {
		if i > 0 {
			c.Advance(5 * time.Second)
		}
		if err := r.Allow("bob", ServiceDispatch); err != nil {
			t.Fatalf("dispatch %d: %v", i, err)
		}
	}
	c.Advance(10 * time.Second) // t=55
	rej := rejected(t, r.Allow("bob", ServiceDispatch))
	if rej.RetryAfter != 5*time.Second {
		t.Fatalf("RetryAfter = %v, want 5s (the call at t=0 expires at t=60)", rej.RetryAfter)
	}
	want := "rate limit reached for dispatch: 10 calls in the last 1m0s, the limit is 10. Retry after 5s."
	if rej.Error() != want {
		t.Fatalf("message = %q\nwant      %q", rej.Error(), want)
	}
	c.Advance(5 * time.Second) // t=60: the first call left the window
	if err := r.Allow("bob", ServiceDispatch); err != nil {
		t.Fatal(err)
	}
	rej = rejected(t, r.Allow("bob", ServiceDispatch))
	if rej.RetryAfter != 5*time.Second {
		t.Fatalf("RetryAfter = %v, want 5s (t=5 expires at t=65)", rej.RetryAfter)
	}
}

func TestRateLimiterRefusalsAreNotRecorded(t *testing.T) {
	c := newClock()
	r := NewRateLimiter(RateOptions{Now: c.Now, Limits: map[string]int{"x": 1}})
	mustAllowN(t, 1, func() error { return r.Allow("bob", "x") })
	for range 50 {
		c.Advance(time.Second)
		rejected(t, r.Allow("bob", "x"))
	}
	c.Advance(10 * time.Second)
	if err := r.Allow("bob", "x"); err != nil {
		t.Fatalf("refused calls extended the wait: %v", err)
	}
}

func TestRateLimiterBoundedMemory(t *testing.T) {
	c := newClock()
	r := NewRateLimiter(RateOptions{Now: c.Now})
	for i := range 500 {
		for range 200 {
			_ = r.Allow(fmt.Sprint("agent", i%5), fmt.Sprint("svc", i))
		}
	}
	for k, h := range r.hits {
		if len(h) > r.Limit(k.service) {
			t.Fatalf("%v holds %d records, over its quota", k, len(h))
		}
	}
	c.Advance(61 * time.Second)
	_ = r.Allow("bob", ServiceHTTP)
	if n := r.tracked(); n != 1 {
		t.Fatalf("tracking %d keys after the window, want 1", n)
	}
	r.Forget("bob")
	if n := r.tracked(); n != 0 {
		t.Fatalf("tracking %d keys after Forget, want 0", n)
	}
}

func TestConcurrentAdmissionsNeverExceedLimits(t *testing.T) {
	c := newClock()
	el := NewExecLimiter(ExecOptions{Now: c.Now, IdleGap: time.Hour})
	rl := NewRateLimiter(RateOptions{Now: c.Now})
	var execOK, rateOK atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if el.Allow("bob", 25) == nil {
					execOK.Add(1)
				}
				if rl.Allow("bob", ServiceInference) == nil {
					rateOK.Add(1)
				}
				if i%50 == 0 {
					_ = el.Used("bob")
					_ = rl.Allow(fmt.Sprint("agent", g), "other")
				}
			}
		}()
	}
	wg.Wait()
	if execOK.Load() != 25 {
		t.Errorf("exec admitted %d, want exactly 25", execOK.Load())
	}
	if rateOK.Load() != 60 {
		t.Errorf("inference admitted %d, want exactly 60", rateOK.Load())
	}
}

func BenchmarkRateLimiterAllow(b *testing.B) {
	c := newClock()
	r := NewRateLimiter(RateOptions{Now: c.Now})
	for i := 0; b.Loop(); i++ {
		c.Advance(time.Second)
		_ = r.Allow("bob", ServiceHTTP)
	}
}
