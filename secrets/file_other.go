//go:build !unix

package secrets

// File is the file secret store; the app ships for Linux and macOS, and
// the checks that keep the file safe (owner, mode, no links) are Unix's.
type File struct{ Path, Lock string }

var errNoFileStore = &storeError{msg: "secret store: the file store is available on Linux and macOS only"}

func (f File) Where() string                    { return "the secrets file " + f.Path }
func (File) Get(string, string) (string, error) { return "", errNoFileStore }
func (File) Set(string, string, string) error   { return errNoFileStore }
func (File) Delete(string, string) error        { return errNoFileStore }
