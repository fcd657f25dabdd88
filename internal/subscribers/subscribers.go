// Package subscribers is the one subscriber list the host packages share:
// callbacks added and removed at any time, called with each change.
package subscribers

import "sync"

// List holds callbacks taking a T. The zero value is ready to use; a List
// must not be copied after first use. Its methods are safe for concurrent
// use and never call a callback while holding the List's lock, so a
// callback may add or cancel subscriptions.
type List[T any] struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(T)
}

// Add subscribes fn until the returned cancel is called (more than once is
// harmless).
func (l *List[T]) Add(fn func(T)) (cancel func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fns == nil {
		l.fns = map[int]func(T){}
	}
	id := l.next
	l.next++
	l.fns[id] = fn
	return func() {
		l.mu.Lock()
		delete(l.fns, id)
		l.mu.Unlock()
	}
}

// Snapshot returns the callbacks subscribed now, for a caller that must
// choose them under its own lock and call them after releasing it.
func (l *List[T]) Snapshot() []func(T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fns := make([]func(T), 0, len(l.fns))
	for _, fn := range l.fns {
		fns = append(fns, fn)
	}
	return fns
}

// Notify calls every callback subscribed now with v, on this goroutine.
func (l *List[T]) Notify(v T) {
	for _, fn := range l.Snapshot() {
		fn(v)
	}
}
