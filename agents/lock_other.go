//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package agents

import "time"

// lockFile is a no-op where flock is unavailable; only one process should
// then modify the registry at a time.
func lockFile(string, time.Duration) (func(), error) { return func() {}, nil }
