package agentproto

import (
	"errors"
	"fmt"
	"testing"

	"github.com/osaurus/osaurus-sandbox/errdefs"
)

// A classed sentinel is itself and its class, wrapped or not, and crosses
// the wire as its class: the CLI's exit code, a tool's envelope and the
// bridge's HTTP status test the class alone.
func TestClass(t *testing.T) {
	notRunning := Class(ErrUnavailable, "the sandbox VM is not running")
	gone := Class(ErrNotFound, "secret not found")
	for _, tt := range []struct {
		err       error
		sentinel  error
		class     error
		notClass  error
		wantCode  string
		wantError string
	}{
		{notRunning, notRunning, ErrUnavailable, ErrNotFound, "unavailable", "the sandbox VM is not running"},
		{fmt.Errorf("start it first: %w", notRunning), notRunning, ErrUnavailable, ErrInternal, "unavailable", "start it first: the sandbox VM is not running"},
		{fmt.Errorf("alice: %w", gone), gone, ErrNotFound, ErrUnavailable, "not_found", "alice: secret not found"},
	} {
		if !errors.Is(tt.err, tt.sentinel) || !errors.Is(tt.err, tt.class) || errors.Is(tt.err, tt.notClass) {
			t.Errorf("%q: Is(sentinel) %v, Is(class) %v, Is(another class) %v", tt.err,
				errors.Is(tt.err, tt.sentinel), errors.Is(tt.err, tt.class), errors.Is(tt.err, tt.notClass))
		}
		w := ToWire(tt.err)
		if w.Code != tt.wantCode || w.Message != tt.wantError {
			t.Errorf("%q on the wire: %+v, want code %s", tt.err, w, tt.wantCode)
		}
		remote := &RemoteError{Op: "x", Code: w.Code, Message: w.Message}
		if !errors.Is(remote, tt.class) {
			t.Errorf("%q back from the wire is not its class %v", tt.err, tt.class)
		}
	}
	if errors.Is(notRunning, Class(ErrUnavailable, "the sandbox VM is not running")) {
		t.Error("two sentinels of one class with the same message are the same error")
	}
}

// Every errdefs class has a wire code of its own, in errdefs.Classes'
// order (most specific first), and comes back from the wire as itself.
func TestEveryClassHasACode(t *testing.T) {
	if len(codes) != len(errdefs.Classes) {
		t.Fatalf("%d wire codes for %d classes", len(codes), len(errdefs.Classes))
	}
	seen := map[string]bool{}
	for i, c := range errdefs.Classes {
		if codes[i].err != c {
			t.Errorf("code %d (%s) is %v, errdefs.Classes has %v there", i, codes[i].code, codes[i].err, c)
		}
		w := ToWire(c)
		if seen[w.Code] {
			t.Errorf("%v shares the code %s", c, w.Code)
		}
		seen[w.Code] = true
		if back := (&RemoteError{Code: w.Code}).Unwrap(); back != c {
			t.Errorf("%v comes back from the wire as %v", c, back)
		}
	}
}

// A guest op's error names the op; an owner's control op answers the
// user with its own sentence.
func TestRemoteErrorText(t *testing.T) {
	for _, tt := range []struct{ op, want string }{
		{"exec", "agent exec: no such file"},
		{"ctl.agent_update", "no such file"},
	} {
		if got := (&RemoteError{Op: tt.op, Code: "not_found", Message: "no such file"}).Error(); got != tt.want {
			t.Errorf("op %s: %q, want %q", tt.op, got, tt.want)
		}
	}
}
