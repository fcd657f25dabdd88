//go:build linux

// Package osthread runs work on a throwaway OS thread: one the work may
// leave in another namespace, with other credentials or under a seccomp
// filter, none of which must reach the rest of the guest agent.
package osthread

import (
	"fmt"
	"runtime"

	"github.com/osaurus/osaurus-sandbox/errdefs"
)

// Throwaway runs fn on a locked OS thread of its own and returns what it
// returns. The thread is never unlocked, so the runtime destroys it when
// fn returns instead of reusing it: whatever fn changed about the thread
// (setns, unshare, credentials, a seccomp filter) ends with it. Threads
// the runtime starts meanwhile are cloned from its template thread, not
// from this one. fn must not hand its work to other goroutines: they run
// on ordinary threads. A panic in fn is an ErrInternal error.
func Throwaway[T any](fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		defer func() {
			if p := recover(); p != nil {
				ch <- result{err: fmt.Errorf("%w: panic on a throwaway thread: %v", errdefs.ErrInternal, p)}
			}
		}()
		v, err := fn()
		ch <- result{v, err}
	}()
	r := <-ch
	return r.v, r.err
}
