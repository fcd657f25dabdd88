//go:build linux

package files

import (
	"os"

	"github.com/osaurus/osaurus-sandbox/guestagent/account"
)

// What the exec package and the user operations share with the file
// operations.

// Space is where one operation's paths resolve, for the exec package's
// working directory and log file: the same confinement as the file
// operations.
type Space struct{ sp *space }

// Name turns a request path into a name for FS (see space.name).
func (s Space) Name(p string) (string, error) { return s.sp.name(p) }

// Root is the clean absolute root, or "" when unconfined.
func (s Space) Root() string { return s.sp.root }

// FS opens names beneath Root.
func (s Space) FS() FS { return s.sp.fs }

// InSpace runs fn with a's credentials and the path space of root.
func InSpace[T any](a *account.Account, root string, fn func(sp Space) (T, error)) (T, error) {
	return inSpace(a, root, func(sp *space) (T, error) { return fn(Space{sp}) })
}

// FileMode converts a wire mode (Unix permission and setuid/setgid/sticky
// bits) to an os.FileMode.
func FileMode(m uint32) os.FileMode { return fileMode(m) }
