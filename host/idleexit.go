package host

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

// usage counts what holds the owner in use: clients connected to the
// control socket (a CLI command, a stdio MCP server, the window) and MCP
// HTTP requests in flight (a session's event stream is one). since is
// when the count last fell to 0.
type usage struct {
	mu    sync.Mutex
	n     int
	since time.Time
}

// hold marks one use; the func it returns ends it.
func (u *usage) hold() (done func()) {
	u.mu.Lock()
	u.n++
	u.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			u.mu.Lock()
			if u.n--; u.n == 0 {
				u.since = time.Now()
			}
			u.mu.Unlock()
		})
	}
}

// idle says since when nothing has used the owner (false while in use).
func (u *usage) idle() (time.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.since, u.n == 0
}

// handler counts h's requests as uses: an MCP client's requests and
// event streams keep a background owner.
func (u *usage) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer u.hold()()
		h.ServeHTTP(w, r)
	})
}

// backgroundIdle is the backgroundIdleMinutes setting (the default when
// the settings can't be read: an owner nobody uses must still go).
func (h *Host) backgroundIdle() time.Duration {
	cfg, _ := config.LoadSandbox(h.paths.SandboxJSON())
	return cfg.BackgroundIdle()
}

// apiStatus is the owner's status around the VM's st.
func (h *Host) apiStatus(st control.Status) api.Status {
	out := api.Status{Status: st, Owner: h.kind, MCPURL: h.mcpURL, MCPError: h.mcpErr}
	if h.kind == "background" {
		if limit := h.backgroundIdle(); limit > 0 {
			out.IdleExit = &api.IdleExit{Minutes: limit.Minutes(), IdleSince: h.idleSince(st)}
		}
	}
	return out
}

// idleSince is when the background owner became unused: no client, no
// MCP request, and a VM that is stopped, asleep or absent. nil while in
// use, or while the VM is awake or changing state (a start, a stop, a
// provision: work a client asked for).
func (h *Host) idleSince(st control.Status) *time.Time {
	since, ok := h.use.idle()
	if !ok {
		return nil
	}
	var vm time.Time
	switch {
	case st.State == control.Running && st.SleepingSince != nil:
		vm = *st.SleepingSince
	case st.State == control.Stopped, st.State == control.NotProvisioned, st.State == control.Error:
		vm = st.Since
	default:
		return nil
	}
	if vm.After(since) {
		since = vm
	}
	return &since
}

// exitWhenIdle is closed once the owner has been unused for the
// backgroundIdleMinutes setting, read at each look (0: never).
func (h *Host) exitWhenIdle(ctx context.Context) <-chan time.Duration {
	ch := make(chan time.Duration, 1)
	go func() {
		for {
			limit := h.backgroundIdle()
			select {
			case <-ctx.Done():
				return
			case <-time.After(idleLook(limit)):
			}
			if limit = h.backgroundIdle(); limit <= 0 {
				continue
			}
			if since := h.idleSince(h.m.Status()); since != nil && time.Since(*since) >= limit {
				ch <- limit
				return
			}
		}
	}()
	return ch
}

// idleLook is how often exitWhenIdle looks for a limit of d: within a
// tenth of it, at most every 30 s (also how soon a setting turned on from
// 0 applies).
func idleLook(d time.Duration) time.Duration {
	t := d / 10
	switch {
	case d <= 0 || t > 30*time.Second:
		return 30 * time.Second
	case t < 50*time.Millisecond:
		return 50 * time.Millisecond
	}
	return t
}
