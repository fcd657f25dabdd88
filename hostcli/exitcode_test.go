package hostcli

import (
	"errors"
	"fmt"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

// exitOfClass is the CLI's exit code for each class, the table
// docs/architecture.md shows: only "the VM (or its owner) is not there"
// has a code of its own.
var exitOfClass = map[error]int{
	agentproto.ErrUnavailable:  ExitNotRunning,
	agentproto.ErrSessionEnded: ExitNotRunning,
	agentproto.ErrNotFound:     ExitError,
	agentproto.ErrNoSuchUser:   ExitError,
	agentproto.ErrExists:       ExitError,
	agentproto.ErrPermission:   ExitError,
	agentproto.ErrEscape:       ExitError,
	agentproto.ErrInvalid:      ExitError,
	agentproto.ErrTooLarge:     ExitError,
	agentproto.ErrQuota:        ExitError,
	agentproto.ErrBusy:         ExitError,
	agentproto.ErrUpstream:     ExitError,
	agentproto.ErrTimeout:      ExitError,
	agentproto.ErrUnsupported:  ExitError,
	agentproto.ErrInternal:     ExitError,
	agentproto.ErrIsDir:        ExitError,
	agentproto.ErrNotDir:       ExitError,
	agentproto.ErrNotEmpty:     ExitError,
	agentproto.ErrProtocol:     ExitError,
	agentproto.ErrVersion:      ExitError,
}

// exitOfSentinel are the sentinels whose exit code is not their
// class's: no keychain is of class unavailable, but exit 3 promises "the
// VM is not running" (docs/cli.md).
var exitOfSentinel = map[error]int{
	secrets.ErrUnavailable: ExitError,
}

// A sentinel of every class exits as its class says, wrapped as commands wrap
// it and after crossing the control socket from the owner.
func TestExitCodeIsByClass(t *testing.T) {
	for _, class := range errdefs.Classes { // a package's sentinel of each class
		s := struct {
			Name       string
			Err, Class error
		}{class.Error(), errdefs.Class(class, "a sentinel of "+class.Error()), class}
		want, ok := exitOfClass[s.Class]
		if !ok {
			t.Fatalf("%s: class %v has no exit code in the table", s.Name, s.Class)
		}
		err := fmt.Errorf("--agent: %w", s.Err)
		if got := exitCode(err); got != want {
			t.Errorf("%s: exit %d, want %d", s.Name, got, want)
		}
		w := agentproto.ToWire(err)
		if got := exitCode(&agentproto.RemoteError{Op: "ctl.status", Code: w.Code, Message: w.Message}); got != want {
			t.Errorf("%s from the owner: exit %d, want %d", s.Name, got, want)
		}
	}
	for class, want := range exitOfClass {
		if got := exitCode(class); got != want {
			t.Errorf("class %v: exit %d, want %d", class, got, want)
		}
	}
	for sentinel, want := range exitOfSentinel {
		if got := exitCode(fmt.Errorf("--agent: %w", sentinel)); got != want {
			t.Errorf("%v: exit %d, want %d", sentinel, got, want)
		}
	}
	if got := exitCode(errors.New("plain")); got != ExitError {
		t.Errorf("an unclassed error: exit %d", got)
	}
}
