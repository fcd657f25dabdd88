//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package agents

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockFile takes an exclusive flock on path, creating it, and returns the
// release func. It polls so a stuck holder turns into an error instead of
// a hang. flock belongs to the open file description, so it excludes other
// Registries in this process as well as other processes.
func lockFile(path string, timeout time.Duration) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock %s: another osaurus-sandbox process has held it for over %s", path, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
