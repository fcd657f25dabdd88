// Package filelock is the one exclusive file lock the host packages share:
// an flock on a file, taken by polling so a context can end the wait (flock
// itself has no timeout).
//
// flock belongs to the open file description, so a lock excludes other
// holders in this process as well as other processes, and closing the file
// (or the process dying) releases it: a crashed holder never blocks the next.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/osaurus/osaurus-sandbox/errdefs"
)

// ErrLocked: TryLock found the lock held by someone else.
var ErrLocked = errdefs.Class(errdefs.ErrBusy, "file is locked by another process")

// pollInterval is how often Lock retries a held lock.
const pollInterval = 10 * time.Millisecond

// Lock is a held lock on a file. Unlock (or closing File) releases it.
type Lock struct{ f *os.File }

// File is the locked file, open read-write.
func (l *Lock) File() *os.File { return l.f }

// Unlock releases the lock by closing the file.
func (l *Lock) Unlock() error { return l.f.Close() }

// Acquire opens path (creating it 0600) and locks it, waiting until the lock
// is free or ctx ends. The error wraps context.Cause(ctx) when the wait is
// cut short.
func Acquire(ctx context.Context, path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := LockFile(ctx, f); err != nil {
		f.Close()
		return nil, err
	}
	return &Lock{f: f}, nil
}

// TryAcquire is Acquire without the wait: a held lock is ErrLocked.
func TryAcquire(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := tryLock(f); err != nil {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("lock %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// LockFile locks an already open f, waiting until the lock is free or ctx
// ends. Closing f releases it. For callers that must check, after the wait,
// that the path still names the locked inode.
func LockFile(ctx context.Context, f *os.File) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		err := tryLock(f)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errWouldBlock) {
			return fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lock %s: another osaurus-sandbox process holds it: %w", f.Name(), context.Cause(ctx))
		case <-tick.C:
		}
	}
}
