package envelope

import (
	"context"
	"errors"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/sandboxpath"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
)

// Error is an error that already knows how it should be reported. Tools
// return one (possibly wrapped) when FromError's mapping would guess wrong,
// e.g. a user_denied or a tool-specific invalid argument.
type Error struct {
	Kind     Kind
	Field    string // optional: the offending argument
	Expected string // optional: what it should look like
	Err      error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of the given kind; the format supports %w.
func Errorf(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// ArgErrorf returns an invalid_args *Error about the argument field.
func ArgErrorf(field, expected, format string, args ...any) error {
	return &Error{Kind: InvalidArgs, Field: field, Expected: expected, Err: fmt.Errorf(format, args...)}
}

// FromError turns the error a tool ran into into its envelope. A nil error
// is a success with a null result. Apart from the types that carry their
// own fields, it reads the error's class only (agentproto.Class): every
// host sentinel has one, so no package's sentinels are listed here. The
// mapping, first match wins:
//
//	*Error                          its own kind, field and expected
//	*sandboxpath.Rejection          invalid_args with field and expected
//	*limit.Rejected                 rejected (its message says when to retry)
//	agentproto.ErrSessionEnded      unavailable (the VM went away)
//	agentproto.ErrUnavailable       unavailable (not running, no owner, keychain...)
//	context.Canceled                unavailable
//	context.DeadlineExceeded        timeout
//	agentproto.ErrTimeout           timeout
//	agentproto.ErrQuota             rejected (over a disk limit; the message says which)
//	agentproto.ErrBusy              rejected (too many at once; retry later)
//	agentproto.ErrEscape            rejected (a symlink leads out of the root)
//	agentproto.ErrPermission        rejected
//	agentproto.ErrNotFound          not_found
//	agentproto.ErrInvalid           invalid_args (sandboxpath.ErrRejected is of this class)
//	anything else                   execution_error
func FromError(tool string, err error) Envelope {
	if err == nil {
		return OK(tool, nil)
	}
	var (
		own *Error
		rej *sandboxpath.Rejection
		lim *limit.Rejected
	)
	switch {
	case errors.As(err, &own):
		e := Fail(tool, own.Kind, own.Error())
		e.Field, e.Expected = own.Field, own.Expected
		return e
	case errors.As(err, &rej):
		return InvalidArg(tool, rej.Field, rej.Expected, rej.Error())
	case errors.As(err, &lim):
		return Fail(tool, Rejected, lim.Error())
	case errors.Is(err, agentproto.ErrSessionEnded):
		return Fail(tool, Unavailable, "the sandbox VM is not reachable (it stopped or is restarting); retry once it is running: "+detail(err))
	case errors.Is(err, agentproto.ErrUnavailable):
		return Fail(tool, Unavailable, detail(err))
	case errors.Is(err, context.Canceled):
		return Fail(tool, Unavailable, "the call was cancelled before it finished: "+detail(err))
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, agentproto.ErrTimeout):
		return Fail(tool, Timeout, "timed out: "+detail(err))
	case errors.Is(err, agentproto.ErrQuota):
		return Fail(tool, Rejected, detail(err))
	case errors.Is(err, agentproto.ErrBusy):
		return Fail(tool, Rejected, "busy, retry later: "+detail(err))
	case errors.Is(err, agentproto.ErrEscape):
		return Fail(tool, Rejected, "access refused: the path leads outside the directories this agent may use "+
			"(your home and /workspace/shared), through a symbolic link. Use a path that doesn't pass through that link: "+detail(err))
	case errors.Is(err, agentproto.ErrPermission):
		return Fail(tool, Rejected, "permission denied: the agent's Linux user may not access this. "+
			"Other agents' files are off-limits; work in your home or /workspace/shared: "+detail(err))
	case errors.Is(err, agentproto.ErrNotFound):
		return Fail(tool, NotFound, detail(err))
	case errors.Is(err, agentproto.ErrInvalid):
		return Fail(tool, InvalidArgs, detail(err))
	}
	return Fail(tool, ExecutionError, detail(err))
}

// detail is the most useful text of err: the guest's own message when the
// guest reported it ("agent read_file: ..." would be confusing to a model
// that is itself the agent), else the whole chain.
func detail(err error) string {
	var re *agentproto.RemoteError
	if errors.As(err, &re) && re.Message != "" {
		return re.Message
	}
	return err.Error()
}
