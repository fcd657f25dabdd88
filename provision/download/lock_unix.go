//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package download

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockFile takes an exclusive advisory lock on f, polling so that ctx can
// interrupt the wait. flock locks belong to the open file description, so
// they exclude other Fetches in this process as well as other processes.
func lockFile(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for another download of %s: %w", f.Name(), context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
