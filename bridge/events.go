package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/osaurus/osaurus-sandbox/store/events"
)

// Bounds of reading events from the guest.
const (
	// DefaultEventsList and MaxEventsList: how many events one list
	// answers (the newest after since).
	DefaultEventsList = 100
	MaxEventsList     = 1000
	// MaxFollow is how long one follow stream lasts; osaurus-host follows
	// on from the last id it got, so a follower that went away costs at
	// most this long.
	MaxFollow = 10 * time.Minute
	// MaxFollowsPerAgent bounds an agent's open follow streams (each also
	// holds one of its MaxConnsPerAgent connections).
	MaxFollowsPerAgent = 8
)

// eventView is what the guest sees of an event: the agent is the caller's
// own, so it is left out.
type eventView struct {
	ID      int64           `json:"id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
	Time    time.Time       `json:"time"`
	Plugin  string          `json:"plugin,omitempty"`
}

func viewOf(e events.Event) eventView {
	return eventView{ID: e.ID, Type: e.Type, Payload: e.Payload, Time: e.Time, Plugin: e.Plugin}
}

// eventsFilter is the filter of an events read: the caller's agent only;
// a plugin's command only what its plugin may see (what it emitted and
// its type family); ?type=T a type family, ?since=ID ids above ID. A
// caller the guest could not attribute (a network namespace it made
// itself) may be a plugin, so it reads nothing.
func eventsFilter(w http.ResponseWriter, r *http.Request, agent string) (events.Filter, bool) {
	caller, _ := CallerOf(r.Context())
	if caller.Unattributed {
		writeError(w, http.StatusForbidden, unattributed("events"))
		return events.Filter{}, false
	}
	f := events.Filter{Agent: agent, Plugin: caller.Plugin, Type: r.URL.Query().Get("type")}
	if f.Type != "" {
		if err := events.CheckType(f.Type); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return f, false
		}
	}
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("since: %q, want an event id (a whole number, 0 or more)", v))
			return f, false
		}
		f.After = n
	}
	return f, true
}

// listEvents is GET /api/events[?type=T][&since=ID][&limit=N] →
// {"events":[{id, type, payload, time, plugin?}]}: the newest N (default
// 100, at most 1000) the caller may see, oldest first.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	agent, ok := s.open(w, r, s.o.Events != nil, "the event log", ServiceEvents)
	if !ok {
		return
	}
	f, ok := eventsFilter(w, r, agent)
	if !ok {
		return
	}
	f.Last = DefaultEventsList
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxEventsList {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit: %q, want 1–%d", v, MaxEventsList))
			return
		}
		f.Last = n
	}
	es, err := s.o.Events.List(r.Context(), f)
	if err != nil {
		storeError(w, "events", err)
		return
	}
	out := make([]eventView, len(es))
	for i, e := range es {
		out[i] = viewOf(e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": out})
}

// followEvents is GET /api/events/follow[?type=T][&since=ID]: newline-
// delimited JSON, one event a line as it is emitted (those after since
// first; without since, only new ones), until the caller goes away or
// MaxFollow passes, which ends the stream with {"end": why, "last_id"}.
func (s *Server) followEvents(w http.ResponseWriter, r *http.Request) {
	agent, ok := s.open(w, r, s.o.Events != nil, "the event log", ServiceEvents)
	if !ok {
		return
	}
	f, ok := eventsFilter(w, r, agent)
	if !ok {
		return
	}
	if r.URL.Query().Get("since") == "" {
		last, err := s.o.Events.LastID(r.Context())
		if err != nil {
			storeError(w, "events", err)
			return
		}
		f.After = last
	}
	if !s.startFollow(agent) {
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("agent %s already follows events %d times, the limit (bridge.MaxFollowsPerAgent); end one", agent, MaxFollowsPerAgent))
		return
	}
	defer s.endFollow(agent)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	line := func(v any) error {
		b, _ := json.Marshal(v)
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
		if fl != nil {
			fl.Flush()
		}
		return nil
	}
	line(map[string]any{"following": true, "since": f.After})
	ctx, cancel := context.WithTimeout(r.Context(), MaxFollow)
	defer cancel()
	last := f.After
	err := s.o.Events.Follow(ctx, f, func(e events.Event) error {
		last = e.ID
		return line(viewOf(e))
	})
	if r.Context().Err() != nil {
		return // the caller went away
	}
	why := fmt.Sprintf("the stream reached its limit of %s (bridge.MaxFollow); follow again with since=%d", MaxFollow, last)
	if ctx.Err() == nil && err != nil {
		why = "the event log failed: " + err.Error()
	}
	line(map[string]any{"end": why, "last_id": last})
}

func (s *Server) startFollow(agent string) bool {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	if s.follows == nil {
		s.follows = map[string]int{}
	}
	if s.follows[agent] >= MaxFollowsPerAgent {
		return false
	}
	s.follows[agent]++
	return true
}

func (s *Server) endFollow(agent string) {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	if s.follows[agent]--; s.follows[agent] <= 0 {
		delete(s.follows, agent)
	}
}
