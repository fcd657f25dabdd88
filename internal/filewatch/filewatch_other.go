//go:build !linux

package filewatch

import (
	"context"
	"time"
)

// start polls: without inotify the callers keep their former intervals.
func start(ctx context.Context, poll time.Duration, _ []Target) *Watcher {
	w := newWatcher()
	ctx, cancel := context.WithCancel(ctx)
	exited := make(chan struct{})
	w.stop = func() { cancel(); <-exited }
	go func() { defer close(exited); w.pollLoop(ctx.Done(), poll) }()
	return w
}
