//go:build linux

package oserr

import (
	"errors"
	"syscall"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// mappedError keeps the original message and adds the agentproto sentinel
// that tells the host what kind of failure it was.
type mappedError struct {
	err  error
	kind error
}

func (e *mappedError) Error() string   { return e.err.Error() }
func (e *mappedError) Unwrap() []error { return []error{e.kind, e.err} }

// Map gives err the sentinel agentproto.ToWire turns into a wire code.
// Errors that already carry one, and unknown errors, pass unchanged.
func Map(err error) error {
	if err == nil || agentproto.ToWire(err).Code != "internal" {
		return err
	}
	if kind := classify(err); kind != nil {
		return &mappedError{err: err, kind: kind}
	}
	return err
}

func classify(err error) error {
	if isEscape(err) {
		return agentproto.ErrEscape
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return nil
	}
	switch errno {
	case syscall.ENOENT, syscall.ESRCH:
		return agentproto.ErrNotFound
	case syscall.EACCES, syscall.EPERM, syscall.EROFS:
		return agentproto.ErrPermission
	case syscall.EEXIST:
		return agentproto.ErrExists
	case syscall.EISDIR:
		return agentproto.ErrIsDir
	case syscall.ENOTDIR:
		return agentproto.ErrNotDir
	case syscall.ENOTEMPTY:
		return agentproto.ErrNotEmpty
	case syscall.EFBIG, syscall.E2BIG:
		return agentproto.ErrTooLarge
	case syscall.EINVAL, syscall.ENAMETOOLONG, syscall.ELOOP:
		return agentproto.ErrInvalid
	}
	return nil
}

// escapeMessage is the text of os.Root's unexported "escapes" error; it is
// the only way to recognise it. TestRootEscape guards against a change.
const escapeMessage = "path escapes from parent"

func isEscape(err error) bool {
	for err != nil {
		if err.Error() == escapeMessage {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if isEscape(e) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
