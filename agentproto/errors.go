package agentproto

import (
	"errors"
	"fmt"
	"strings"

	"github.com/osaurus/osaurus-sandbox/errdefs"
)

// The error classes, defined in errdefs (which leaf packages import
// without the wire protocol) and kept here under their old names. Errors
// that cross the wire keep their code, so a host caller can test
// errors.Is(err, agentproto.ErrNotFound) on a guest failure.
var (
	ErrNotFound     = errdefs.ErrNotFound
	ErrExists       = errdefs.ErrExists
	ErrPermission   = errdefs.ErrPermission
	ErrInvalid      = errdefs.ErrInvalid
	ErrEscape       = errdefs.ErrEscape
	ErrIsDir        = errdefs.ErrIsDir
	ErrNotDir       = errdefs.ErrNotDir
	ErrNotEmpty     = errdefs.ErrNotEmpty
	ErrTooLarge     = errdefs.ErrTooLarge
	ErrNoSuchUser   = errdefs.ErrNoSuchUser
	ErrUnsupported  = errdefs.ErrUnsupported
	ErrTimeout      = errdefs.ErrTimeout
	ErrProtocol     = errdefs.ErrProtocol
	ErrVersion      = errdefs.ErrVersion
	ErrInternal     = errdefs.ErrInternal
	ErrSessionEnded = errdefs.ErrSessionEnded
	ErrUnavailable  = errdefs.ErrUnavailable
	ErrQuota        = errdefs.ErrQuota
	ErrBusy         = errdefs.ErrBusy
	ErrUpstream     = errdefs.ErrUpstream
)

// Class is errdefs.Class, kept for the packages that class their errors
// through agentproto.
func Class(class error, msg string) error { return errdefs.Class(class, msg) }

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
	// The owner's control ops ("ctl.…") answer a front end: their
	// messages are sentences for the user, and "agent ctl.x:" would name
	// neither the agent nor anything the user typed.
	if strings.HasPrefix(e.Op, "ctl.") {
		return e.Message
	}
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
