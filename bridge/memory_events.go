package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/store/memory"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// Rate-limiter services of these routes, each with limit.DefaultLimit
// calls a minute per agent on top of the bridge-wide quota.
const (
	ServiceMemory = "memory"
	ServiceEvents = "events"
)

// open starts a store route: 503 when the store is missing, then the
// caller's quota of service (429). It returns the calling agent.
func (s *Server) open(w http.ResponseWriter, r *http.Request, available bool, what, service string) (string, bool) {
	if !available {
		writeError(w, http.StatusServiceUnavailable, what+" is not available in this app")
		return "", false
	}
	agent := agentOf(r)
	return agent, s.allow(w, agent, service)
}

func (s *Server) memoryStore(w http.ResponseWriter, r *http.Request) {
	agent, ok := s.open(w, r, s.o.Memory != nil, "agent memory", ServiceMemory)
	if !ok {
		return
	}
	var body struct {
		Content  string   `json:"content"`
		Salience *float64 `json:"salience"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	// The memory database lies in the data folder in clear: the agent's
	// secret values are kept out of it as out of its logs and events.
	if s.o.Secrets != nil {
		body.Content = s.o.Secrets.Scrub(agent, body.Content)
	}
	if n := len(body.Content); n > memory.MaxContent {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("memory store: the entry is %d bytes, over the limit of %d bytes per entry (memory.MaxContent); store a shorter summary", n, memory.MaxContent))
		return
	}
	if _, err := s.o.Memory.Add(r.Context(), agent, body.Content, body.Salience); err != nil {
		storeError(w, "memory store", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{})
}

// MemoryResult is one entry of a memory query's answer.
type MemoryResult struct {
	Content   string    `json:"content"`
	Salience  float64   `json:"salience"`
	CreatedAt time.Time `json:"created_at"`
}

func (s *Server) memoryQuery(w http.ResponseWriter, r *http.Request) {
	agent, ok := s.open(w, r, s.o.Memory != nil, "agent memory", ServiceMemory)
	if !ok {
		return
	}
	var body struct {
		Query string `json:"query"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	// The caller's identity scopes the search; nothing in the body can
	// name another agent.
	es, err := s.o.Memory.Query(r.Context(), agent, body.Query, memory.TopN)
	if err != nil {
		storeError(w, "memory query", err)
		return
	}
	out := make([]MemoryResult, len(es))
	for i, e := range es {
		out[i] = MemoryResult{Content: e.Content, Salience: e.Salience, CreatedAt: e.CreatedAt}
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out})
}

func (s *Server) emitEvent(w http.ResponseWriter, r *http.Request) {
	agent, ok := s.open(w, r, s.o.Events != nil, "the event log", ServiceEvents)
	if !ok {
		return
	}
	var body struct {
		Type    string          `json:"type"`
		Payload json.RawMessage `json:"payload"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	var compact bytes.Buffer
	if len(body.Payload) > 0 && json.Compact(&compact, body.Payload) == nil && compact.Len() > events.MaxPayload {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("event: the payload is %d bytes of compact JSON, over the limit of %d bytes per event (events.MaxPayload); emit a summary and keep the data in a file", compact.Len(), events.MaxPayload))
		return
	}
	payload, typ := body.Payload, body.Type
	// Events reach MCP clients, so the model, and the terminal: scrub the
	// agent's secrets as tool output is. The payload's strings are
	// scrubbed decoded, so a value written with JSON escapes is found too.
	if s.o.Secrets != nil {
		typ = s.o.Secrets.Scrub(agent, typ)
		payload = scrubJSON(payload, func(t string) string { return s.o.Secrets.Scrub(agent, t) })
	}
	// A plugin's command emits as its plugin (the guest names it from the
	// network namespace), so the plugin's own follower sees it.
	caller, _ := CallerOf(r.Context())
	if _, err := s.o.Events.EmitFrom(r.Context(), agent, caller.Plugin, typ, payload); err != nil {
		storeError(w, "event", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{})
}

// scrubJSON applies f to every string of a JSON document (keys included).
// A document that does not decode is scrubbed as text and kept as a JSON
// string, so nothing passes unscrubbed.
func scrubJSON(doc json.RawMessage, f func(string) string) json.RawMessage {
	if len(doc) == 0 {
		return doc
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		b, _ := json.Marshal(f(string(doc)))
		return b
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(envelope.ScrubValue(v, f)); err != nil {
		b, _ := json.Marshal(f(string(doc)))
		return b
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
