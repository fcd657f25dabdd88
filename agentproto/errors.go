package agentproto

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors that cross the wire keep their code, so a host
// caller can test errors.Is(err, agentproto.ErrNotFound) on a guest failure.
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

// Class returns a sentinel error for a package above this one that also
// belongs to one of the classes above (errdefs-style): errors.Is(err,
// class) holds for it and for every error wrapping it, and it crosses the
// wire with its class's code. So the host's edges (the CLI's exit codes,
// tool envelopes, the bridge's HTTP statuses, the control socket) test the
// classes only, not every package's sentinels. Every exported sentinel of
// the host packages is made with Class; docs/architecture.md has the
// table of what each edge answers for each class.
func Class(class error, msg string) error { return &classError{msg: msg, class: class} }

type classError struct {
	msg   string
	class error
}

func (e *classError) Error() string        { return e.msg }
func (e *classError) Is(target error) bool { return target == e.class }

// codes is ordered: the most specific sentinel comes first, so an error
// wrapping two of them gets a stable code.
var codes = []struct {
	code string
	err  error
}{
	{"escape", ErrEscape},
	{"no_user", ErrNoSuchUser},
	{"quota", ErrQuota},
	{"not_found", ErrNotFound},
	{"exists", ErrExists},
	{"permission", ErrPermission},
	{"is_dir", ErrIsDir},
	{"not_dir", ErrNotDir},
	{"not_empty", ErrNotEmpty},
	{"too_large", ErrTooLarge},
	{"invalid", ErrInvalid},
	{"unsupported", ErrUnsupported},
	{"timeout", ErrTimeout},
	{"protocol", ErrProtocol},
	{"version", ErrVersion},
	{"session_ended", ErrSessionEnded},
	{"unavailable", ErrUnavailable},
	{"busy", ErrBusy},
	{"upstream", ErrUpstream},
	{"internal", ErrInternal},
}

// WireError is an error as it travels in a Response frame.
type WireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// RemoteError is a failure reported by the peer. It unwraps to the sentinel
// named by its code.
type RemoteError struct {
	Op      string
	Code    string
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("agent %s: %s", e.Op, e.Message)
}

func (e *RemoteError) Unwrap() error {
	for _, c := range codes {
		if c.code == e.Code {
			return c.err
		}
	}
	return ErrInternal
}

// ToWire turns a local error into its wire form, keeping the code of the
// first sentinel it wraps.
func ToWire(err error) *WireError {
	if err == nil {
		return nil
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return &WireError{Code: c.code, Message: err.Error()}
		}
	}
	return &WireError{Code: "internal", Message: err.Error()}
}
