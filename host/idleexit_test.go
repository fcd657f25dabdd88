package host

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

// backgroundDir is a fresh data dir whose settings make a background
// owner exit after minutes unused, on a free MCP port.
func backgroundDir(t *testing.T, minutes float64) config.Paths {
	t.Helper()
	dir, err := os.MkdirTemp("", "host") // short: the control socket is in it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := config.Paths{Root: dir}
	cfg := config.Defaults()
	cfg.MCPPort = freePort(t)
	cfg.BackgroundIdleMinutes = minutes
	if err := config.SaveSandbox(p.SandboxJSON(), cfg); err != nil {
		t.Fatal(err)
	}
	return p
}

// A background owner stays while a client is connected and says so in
// its status; once the client goes (and no VM runs) it exits after the
// grace period.
func TestBackgroundOwnerExitsWhenUnused(t *testing.T) {
	p := backgroundDir(t, 0.005) // 300 ms
	h, err := New(context.Background(), Options{Paths: p, Kind: "background", Logf: t.Logf,
		Secrets: &secrets.Store{B: &memKeychain{m: map[string]string{}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	// Held before the watch starts, so it can't fire before the client
	// is counted.
	done := h.use.hold()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	idle := h.exitWhenIdle(ctx)

	c, err := client.Dial(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	done()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Owner != "background" || st.IdleExit == nil || st.IdleExit.Minutes != 0.005 {
		t.Fatalf("status of a background owner: %+v, want its idle exit", st.IdleExit)
	}
	if st.IdleExit.IdleSince != nil {
		t.Fatalf("idle since %v while a client is connected", st.IdleExit.IdleSince)
	}
	c.Close()
	select {
	case limit := <-idle:
		if limit != 300*time.Millisecond {
			t.Fatalf("exited after %s, want the setting's 300ms", limit)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the owner did not go idle after its last client left")
	}
	if st, _ := h.Status(ctx); st.IdleExit == nil || st.IdleExit.IdleSince == nil {
		t.Fatalf("status of an unused owner: %+v, want idle since", st.IdleExit)
	}
}

// An MCP HTTP request in flight (an event stream) holds the owner.
func TestMCPRequestHoldsTheOwner(t *testing.T) {
	var u usage
	entered, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(u.handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	})))
	defer srv.Close()
	go http.Get(srv.URL)
	<-entered
	if _, ok := u.idle(); ok {
		t.Fatal("idle during an MCP request")
	}
	close(release)
	srv.Close() // waits for the request to end
	if _, ok := u.idle(); !ok {
		t.Fatal("still in use after the request ended")
	}
}

// Serve with --background returns by itself once unused (no client, no
// VM), after stopping the VM.
func TestServeBackgroundExitsWhenUnused(t *testing.T) {
	p := backgroundDir(t, 0.005)
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), p, true, "test") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the background owner did not exit when unused")
	}
	if _, err := client.Dial(context.Background(), p); err == nil {
		t.Fatal("an owner still answers after the background owner exited")
	} else if !errors.Is(err, api.ErrNoOwner) {
		t.Fatalf("Dial after exit: %v, want ErrNoOwner", err)
	}
}
