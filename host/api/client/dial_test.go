package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/host/api"
)

// TestCommandDialerFailures: a far side that fails before dial-stdio's
// greeting is reported at once, by ssh's exit and words; one that
// ends after it fails the call as a lost link, not as an owner that
// exited.
func TestCommandDialerFailures(t *testing.T) {
	sh := func(script string) CommandDialer {
		return CommandDialer{Name: "ssh://box", Argv: func(spawn bool) []string {
			return []string{"sh", "-c", script}
		}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tt := range []struct {
		name   string
		script string
		spawn  bool
		err    error
		want   string
	}{
		{"host key", "echo 'Host key verification failed.' >&2; exit 255", true, ErrUnreachable, "Host key verification failed."},
		{"no binary", "echo 'sh: 1: osaurus-sandbox: not found' >&2; exit 127", true, ErrUnreachable, "exit status 127: sh: 1: osaurus-sandbox: not found"},
		{"no owner", "echo 'no owner' >&2; exit 3", false, api.ErrNoOwner, "on ssh://box"},
		{"exit 3 when starting one is no 'no owner'", "exit 3", true, ErrUnreachable, "exit status 3"},
		{"not dial-stdio", "echo hello; sleep 30", true, ErrUnreachable, `it answered "hello"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := sh(tt.script).DialControl(ctx, tt.spawn)
			if err == nil {
				conn.Close()
			}
			if !errors.Is(err, tt.err) || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v; want %v with %q", err, tt.err, tt.want)
			}
		})
	}

	// Connected, then the link dies: the call says so.
	c, err := Via(ctx, sh("printf 'osaurus-sandbox dial-stdio 1\\n'; echo 'Connection reset by peer' >&2; exit 255"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Status(ctx)
	if !errors.Is(err, ErrLinkLost) || errors.Is(err, api.ErrOwnerGone) || !strings.Contains(err.Error(), "Connection reset by peer") {
		t.Fatalf("status over a dead link: %v", err)
	}
	t.Log(err)
}
