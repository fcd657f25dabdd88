//go:build !linux

package provision

import (
	"errors"
	"os"
)

// cloneInto is a no-op stand-in off Linux: the extent copy is used. (On
// macOS, APFS's clonefile(2) needs a path that does not exist yet, which
// the atomic temp-file dance does not give; the extent copy keeps holes.)
func cloneInto(dst, src *os.File) error {
	return errors.ErrUnsupported
}
