// Package errdefs defines the error classes every package of the module
// shares (containerd's errdefs is the model): a sentinel per class, and
// Class to make a package's own sentinel of one of them. It imports only
// the standard library, so a leaf package classes its errors without the
// wire protocol; agentproto maps each class to its wire code, and the
// host's edges (CLI exit codes, tool envelopes, the bridge's HTTP
// statuses, the control socket, internal/explain) test classes only.
// docs/architecture.md ("One error vocabulary") has the table of what
// each edge answers for each class.
package errdefs

import "errors"

// The classes. Errors that cross the agent protocol or the control socket
// keep their class, so errors.Is(err, errdefs.ErrNotFound) holds for a
// failure reported by the guest or the owner.
var (
	ErrNotFound     = errors.New("not found")
	ErrExists       = errors.New("already exists")
	ErrPermission   = errors.New("permission denied")
	ErrInvalid      = errors.New("invalid argument")
	ErrEscape       = errors.New("path escapes its root")
	ErrIsDir        = errors.New("is a directory")
	ErrNotDir       = errors.New("not a directory")
	ErrNotEmpty     = errors.New("directory not empty")
	ErrTooLarge     = errors.New("too large")
	ErrNoSuchUser   = errors.New("no such user")
	ErrUnsupported  = errors.New("unsupported")
	ErrTimeout      = errors.New("timed out")
	ErrProtocol     = errors.New("protocol error")
	ErrVersion      = errors.New("protocol version mismatch")
	ErrInternal     = errors.New("internal error")
	ErrSessionEnded = errors.New("agent session ended")
	ErrUnavailable  = errors.New("unavailable")
	// ErrQuota: the user is over a disk limit the host set (UserLimit);
	// the message names the limit and the fix. Host stores over their
	// quota (bridge config, plugins an agent created) are of this class.
	ErrQuota = errors.New("disk quota exceeded")
	// ErrBusy: too many calls or tasks at once, or in a window; the same
	// request may succeed later. Host errors only.
	ErrBusy = errors.New("busy")
	// ErrUpstream: a service the host relies on (a model server) failed.
	// Host errors only.
	ErrUpstream = errors.New("upstream service failed")
)

// Classes is every class, the most specific first: an error wrapping two
// of them is of the first listed (agentproto's wire codes keep this order).
var Classes = []error{
	ErrEscape, ErrNoSuchUser, ErrQuota, ErrNotFound, ErrExists, ErrPermission,
	ErrIsDir, ErrNotDir, ErrNotEmpty, ErrTooLarge, ErrInvalid, ErrUnsupported,
	ErrTimeout, ErrProtocol, ErrVersion, ErrSessionEnded, ErrUnavailable,
	ErrBusy, ErrUpstream, ErrInternal,
}

// Class returns a new sentinel error with message msg that belongs to
// class: errors.Is(err, class) holds for it and for every error wrapping
// it, and it crosses a wire with its class's code. Every exported
// sentinel of the host packages is made with Class (the completeness test
// in internal/errclass checks the source).
func Class(class error, msg string) error { return &classError{msg: msg, class: class} }

type classError struct {
	msg   string
	class error
}

func (e *classError) Error() string        { return e.msg }
func (e *classError) Is(target error) bool { return target == e.class }

// Of returns the class of err (the first of Classes it is), or nil for an
// error of none.
func Of(err error) error {
	if err == nil {
		return nil
	}
	for _, c := range Classes {
		if errors.Is(err, c) {
			return c
		}
	}
	return nil
}
