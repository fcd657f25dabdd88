package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/errdefs"
)

// statusOfClass is the bridge's answer to each class, the table
// docs/architecture.md shows.
var statusOfClass = map[error]int{
	agentproto.ErrNotFound:     http.StatusNotFound,
	agentproto.ErrNoSuchUser:   http.StatusNotFound,
	agentproto.ErrExists:       http.StatusConflict,
	agentproto.ErrPermission:   http.StatusForbidden,
	agentproto.ErrEscape:       http.StatusForbidden,
	agentproto.ErrInvalid:      http.StatusBadRequest,
	agentproto.ErrTooLarge:     http.StatusRequestEntityTooLarge,
	agentproto.ErrQuota:        http.StatusInsufficientStorage,
	agentproto.ErrBusy:         http.StatusTooManyRequests,
	agentproto.ErrUpstream:     http.StatusBadGateway,
	agentproto.ErrTimeout:      http.StatusGatewayTimeout,
	agentproto.ErrUnavailable:  http.StatusServiceUnavailable,
	agentproto.ErrUnsupported:  http.StatusServiceUnavailable,
	agentproto.ErrSessionEnded: http.StatusServiceUnavailable,
	agentproto.ErrInternal:     http.StatusInternalServerError,
	agentproto.ErrIsDir:        http.StatusInternalServerError,
	agentproto.ErrNotDir:       http.StatusInternalServerError,
	agentproto.ErrNotEmpty:     http.StatusInternalServerError,
	agentproto.ErrProtocol:     http.StatusInternalServerError,
	agentproto.ErrVersion:      http.StatusInternalServerError,
}

// A sentinel of every class gets its class's status, wrapped or after crossing
// the control socket, so routes answer alike for alike failures.
func TestStatusOfIsByClass(t *testing.T) {
	for _, class := range errdefs.Classes { // a package's sentinel of each class
		s := struct {
			Name       string
			Err, Class error
		}{class.Error(), errdefs.Class(class, "a sentinel of "+class.Error()), class}
		want, ok := statusOfClass[s.Class]
		if !ok {
			t.Fatalf("%s: class %v has no status in the table", s.Name, s.Class)
		}
		err := fmt.Errorf("context: %w", s.Err)
		if got := bridge.StatusOf(err); got != want {
			t.Errorf("%s: %d, want %d", s.Name, got, want)
		}
		w := agentproto.ToWire(err)
		if got := bridge.StatusOf(&agentproto.RemoteError{Op: "x", Code: w.Code, Message: w.Message}); got != want {
			t.Errorf("%s from the wire: %d, want %d", s.Name, got, want)
		}
	}
	for class, want := range statusOfClass {
		if got := bridge.StatusOf(class); got != want {
			t.Errorf("class %v: %d, want %d", class, got, want)
		}
	}
	if got := bridge.StatusOf(context.DeadlineExceeded); got != http.StatusGatewayTimeout {
		t.Errorf("deadline: %d", got)
	}
	if got := bridge.StatusOf(errors.New("plain")); got != http.StatusInternalServerError {
		t.Errorf("an unclassed error: %d", got)
	}
}
