//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package plugins

import (
	"context"
	"sync"
)

var processLock sync.Mutex

// lockFile only excludes this process where flock is unavailable.
func lockFile(ctx context.Context, _ string) (func(), error) {
	processLock.Lock()
	return processLock.Unlock, nil
}
