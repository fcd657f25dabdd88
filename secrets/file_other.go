//go:build !unix

package secrets

import "errors"

// File is the file secret store; the app ships for Linux and macOS, and
// the checks that keep the file safe (owner, mode, no links) are Unix's.
type File struct{ Path, Lock string }

var errNoFileStore = &storeError{msg: "secret store: the file store is available on Linux and macOS only"}

type storeError struct {
	msg string
	err error
}

func (e *storeError) Error() string { return e.msg }
func (e *storeError) Unwrap() error { return e.err }
func (e *storeError) Is(target error) bool {
	return target == ErrUnavailable || errors.Is(ErrUnavailable, target)
}

func (f File) Where() string                    { return "the secrets file " + f.Path }
func (File) Get(string, string) (string, error) { return "", errNoFileStore }
func (File) Set(string, string, string) error   { return errNoFileStore }
func (File) Delete(string, string) error        { return errNoFileStore }
