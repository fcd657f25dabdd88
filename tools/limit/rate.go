package limit

import (
	"fmt"
	"maps"
	"sync"
	"time"
)

// Services with their own quota. Any other service name gets DefaultLimit.
const (
	ServiceInference = "inference"
	ServiceHTTP      = "http"
	ServiceDispatch  = "dispatch"
)

const (
	// DefaultWindow is the sliding window of the rate limiter.
	DefaultWindow = 60 * time.Second
	// DefaultLimit applies to services without their own quota.
	DefaultLimit = 120
)

// DefaultLimits are Osaurus's per-window quotas.
func DefaultLimits() map[string]int {
	return map[string]int{ServiceInference: 60, ServiceHTTP: 120, ServiceDispatch: 10}
}

// RateLimiter admits at most a service's quota of calls per agent within
// any sliding window. It keeps the time of each admitted call (at most the
// quota per agent and service) and forgets them once they leave the window;
// refused calls are not recorded.
type RateLimiter struct {
	window time.Duration
	limits map[string]int
	def    int
	now    func() time.Time

	mu        sync.Mutex
	hits      map[rateKey][]time.Time // ascending
	lastSweep time.Time
}

type rateKey struct{ agent, service string }

// RateOptions configure a RateLimiter. The zero value is Osaurus's quotas
// on the wall clock.
type RateOptions struct {
	Window  time.Duration    // default DefaultWindow
	Limits  map[string]int   // per service, over DefaultLimits()
	Default int              // services not in Limits; default DefaultLimit
	Now     func() time.Time // default time.Now
}

// NewRateLimiter returns a rate limiter.
func NewRateLimiter(o RateOptions) *RateLimiter {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	// A setting names the services it changes; the rest keep Osaurus's
	// quotas.
	limits := DefaultLimits()
	maps.Copy(limits, o.Limits)
	if o.Default <= 0 {
		o.Default = DefaultLimit
	}
	return &RateLimiter{
		window: o.Window,
		limits: limits,
		def:    o.Default,
		now:    clock(o.Now),
		hits:   make(map[rateKey][]time.Time),
	}
}

// Limit is the quota of service per window.
func (r *RateLimiter) Limit(service string) int {
	if n, ok := r.limits[service]; ok {
		return n
	}
	return r.def
}

// Allow records one call by agent to service, or refuses it with a
// *Rejected saying when the oldest call in the window expires.
func (r *RateLimiter) Allow(agent, service string) error {
	now := r.now()
	limit := r.Limit(service)
	k := rateKey{agent, service}

	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweep(now)

	h := r.prune(r.hits[k], now)
	if len(h) >= limit {
		r.hits[k] = h
		wait := h[len(h)-limit].Add(r.window).Sub(now)
		return &Rejected{
			Agent: agent, Service: service, Used: len(h), Limit: limit, RetryAfter: wait,
			msg: fmt.Sprintf("rate limit reached for %s: %d calls in the last %s, the limit is %d. Retry after %s.",
				service, len(h), roundUp(r.window), limit, roundUp(wait)),
		}
	}
	r.hits[k] = append(h, now)
	return nil
}

// Forget drops every record of agent, e.g. when it is removed.
func (r *RateLimiter) Forget(agent string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.hits {
		if k.agent == agent {
			delete(r.hits, k)
		}
	}
}

// prune drops the calls that left the window, reusing h's storage.
func (r *RateLimiter) prune(h []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(h) && now.Sub(h[i]) >= r.window {
		i++
	}
	if i == 0 {
		return h
	}
	n := copy(h, h[i:])
	return h[:n]
}

// sweep drops keys whose every call left the window, at most once per
// window.
func (r *RateLimiter) sweep(now time.Time) {
	if now.Sub(r.lastSweep) < r.window {
		return
	}
	r.lastSweep = now
	for k, h := range r.hits {
		if len(h) == 0 || now.Sub(h[len(h)-1]) >= r.window {
			delete(r.hits, k)
		}
	}
}

// tracked reports how many agent/service pairs hold records (tests).
func (r *RateLimiter) tracked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.hits)
}
