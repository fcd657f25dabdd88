//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package download

import (
	"context"
	"os"
)

// lockFile is a no-op where flock is unavailable; concurrent Fetches of
// one Dest are then the caller's to avoid.
func lockFile(ctx context.Context, f *os.File) error { return ctx.Err() }
