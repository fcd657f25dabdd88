// Package testwait is the one poll loop tests use to wait for a condition:
// a deadline instead of a sleep, so a test neither races what it waits for
// nor hangs when it never comes.
package testwait

import (
	"testing"
	"time"
)

// Eventually checks cond every interval (or back to back when interval is
// 0, for a cond that paces itself, such as a guest round trip) until it
// holds; it fails t naming what when it hasn't within limit.
func Eventually(t testing.TB, what string, limit, interval time.Duration, cond func() bool) {
	t.Helper()
	if !Within(limit, interval, cond) {
		t.Fatalf("timed out after %s waiting for %s", limit, what)
	}
}

// Within is Eventually for a caller that handles the timeout itself: it
// reports whether cond held within limit.
func Within(limit, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	var tick <-chan time.Time
	if interval > 0 {
		tk := time.NewTicker(interval)
		defer tk.Stop()
		tick = tk.C
	}
	for !cond() {
		if !time.Now().Before(deadline) {
			return false
		}
		if tick != nil {
			<-tick
		}
	}
	return true
}
