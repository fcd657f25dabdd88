package envelope_test

import (
	"fmt"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// kindOfClass is the envelope kind of each class, the table
// docs/architecture.md shows.
var kindOfClass = map[error]envelope.Kind{
	agentproto.ErrNotFound:     envelope.NotFound,
	agentproto.ErrInvalid:      envelope.InvalidArgs,
	agentproto.ErrPermission:   envelope.Rejected,
	agentproto.ErrEscape:       envelope.Rejected,
	agentproto.ErrQuota:        envelope.Rejected,
	agentproto.ErrBusy:         envelope.Rejected,
	agentproto.ErrTimeout:      envelope.Timeout,
	agentproto.ErrUnavailable:  envelope.Unavailable,
	agentproto.ErrSessionEnded: envelope.Unavailable,
	agentproto.ErrNoSuchUser:   envelope.ExecutionError,
	agentproto.ErrExists:       envelope.ExecutionError,
	agentproto.ErrTooLarge:     envelope.ExecutionError,
	agentproto.ErrUpstream:     envelope.ExecutionError,
	agentproto.ErrUnsupported:  envelope.ExecutionError,
	agentproto.ErrInternal:     envelope.ExecutionError,
	agentproto.ErrIsDir:        envelope.ExecutionError,
	agentproto.ErrNotDir:       envelope.ExecutionError,
	agentproto.ErrNotEmpty:     envelope.ExecutionError,
	agentproto.ErrProtocol:     envelope.ExecutionError,
	agentproto.ErrVersion:      envelope.ExecutionError,
}

// A sentinel of every class a tool runs into becomes its class's kind, wrapped
// or after crossing the control socket, keeping its message.
func TestFromErrorIsByClass(t *testing.T) {
	for _, class := range errdefs.Classes { // a package's sentinel of each class
		s := struct {
			Name       string
			Err, Class error
		}{class.Error(), errdefs.Class(class, "a sentinel of "+class.Error()), class}
		want, ok := kindOfClass[s.Class]
		if !ok {
			t.Fatalf("%s: class %v has no kind in the table", s.Name, s.Class)
		}
		err := fmt.Errorf("context: %w", s.Err)
		e := envelope.FromError("sandbox_x", err)
		if e.OK || e.Kind != want {
			t.Errorf("%s: %+v, want kind %s", s.Name, e, want)
		}
		w := agentproto.ToWire(err)
		if e := envelope.FromError("sandbox_x", &agentproto.RemoteError{Op: "x", Code: w.Code, Message: w.Message}); e.Kind != want {
			t.Errorf("%s from the wire: kind %s, want %s", s.Name, e.Kind, want)
		}
	}
	for class, want := range kindOfClass {
		if e := envelope.FromError("sandbox_x", class); e.Kind != want {
			t.Errorf("class %v: kind %s, want %s", class, e.Kind, want)
		}
	}
}
