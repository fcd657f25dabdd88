package secrets

import "errors"

// storeError is a failure of a store other than the keychain. Callers
// treat it as ErrUnavailable (the secrets can't be had now), but it
// carries its own message: ErrUnavailable's speaks of the keychain.
type storeError struct {
	msg string
	err error
}

func (e *storeError) Error() string { return e.msg }
func (e *storeError) Unwrap() error { return e.err }
func (e *storeError) Is(target error) bool {
	return target == ErrUnavailable || errors.Is(ErrUnavailable, target)
}
