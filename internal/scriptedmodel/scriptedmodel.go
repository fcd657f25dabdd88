// Package scriptedmodel is an OpenAI-compatible chat completions server
// for tests: a real HTTP server on loopback that plays a script of model
// turns (tool calls, then an answer), errors, and streams (server-sent
// events) when asked to. It records every request it gets.
package scriptedmodel

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Call is a tool call the scripted model makes.
type Call struct {
	Name string
	Args string // JSON object
}

// Turn is one answer of the model.
type Turn struct {
	Content string
	Calls   []Call
	// Status, when not 0 or 200, answers with this HTTP status and an
	// OpenAI-style error carrying Error.
	Status int
	Error  string
	// Hold, when set, is waited on (or the request's end) before
	// answering: a model that is still thinking.
	Hold <-chan struct{}
}

// Message is a received chat message.
type Message struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	ToolCallID string `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// Request is a received request.
type Request struct {
	Path          string
	Authorization string
	Model         string    `json:"model"`
	Messages      []Message `json:"messages"`
	Stream        bool      `json:"stream"`
	Tools         []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// ToolNames lists the tools the request offered.
func (r Request) ToolNames() []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

// Server is a running scripted model.
type Server struct {
	// URL is the base URL to configure as inferenceUrl (…/v1).
	URL string

	srv *http.Server
	ln  net.Listener

	mu      sync.Mutex
	script  []Turn
	respond func(Request) Turn
	reqs    []Request
	arrived chan struct{} // closed and replaced on every request
}

// Start serves on addr ("127.0.0.1:0" for any free port; give
// "0.0.0.0:0" only when a VM must reach it through its NAT gateway) until
// the test ends.
func Start(t testing.TB, addr string, script ...Turn) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("scripted model server: %v", err)
	}
	s := &Server{ln: ln, script: script, arrived: make(chan struct{})}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	s.URL = "http://127.0.0.1:" + port + "/v1"
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// Port is the port the server listens on.
func (s *Server) Port() string {
	_, port, _ := net.SplitHostPort(s.ln.Addr().String())
	return port
}

// Play appends turns to the script.
func (s *Server) Play(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, turns...)
}

// Respond answers every request the script has no turn left for; nil
// stops it.
func (s *Server) Respond(f func(Request) Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respond = f
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Arrived returns a channel closed when the next request arrives.
func (s *Server) Arrived() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arrived
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeError(w, http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path)
		return
	}
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad JSON: "+err.Error())
		return
	}
	req.Path, req.Authorization = r.URL.Path, r.Header.Get("Authorization")
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	close(s.arrived)
	s.arrived = make(chan struct{})
	var turn Turn
	switch {
	case len(s.script) > 0:
		turn, s.script = s.script[0], s.script[1:]
	case s.respond != nil:
		turn = s.respond(req)
	default:
		turn = Turn{Status: http.StatusInternalServerError, Error: "the scripted model has no turn left"}
	}
	s.mu.Unlock()
	if turn.Hold != nil {
		select {
		case <-turn.Hold:
		case <-r.Context().Done():
			return
		}
	}
	if turn.Status != 0 && turn.Status != http.StatusOK {
		writeError(w, turn.Status, turn.Error)
		return
	}
	n := len(s.Requests())
	if req.Stream {
		stream(w, turn, n)
		return
	}
	msg := map[string]any{"role": "assistant", "content": turn.Content}
	if len(turn.Calls) > 0 {
		var calls []map[string]any
		for i, c := range turn.Calls {
			calls = append(calls, map[string]any{"id": callID(n, i), "type": "function",
				"function": map[string]string{"name": c.Name, "arguments": c.Args}})
		}
		msg["tool_calls"] = calls
		if turn.Content == "" {
			msg["content"] = nil
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "model": req.Model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish(turn)}},
	})
}

func callID(req, i int) string { return fmt.Sprintf("call_%d_%d", req, i) }

func finish(t Turn) string {
	if len(t.Calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// stream sends the turn as server-sent events: the content word by word,
// each tool call in two pieces, as real servers split them.
func stream(w http.ResponseWriter, turn Turn, n int) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(delta map[string]any, reason any) {
		b, _ := json.Marshal(map[string]any{"object": "chat.completion.chunk",
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": reason}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	send(map[string]any{"role": "assistant"}, nil)
	for _, word := range strings.SplitAfter(turn.Content, " ") {
		if word != "" {
			send(map[string]any{"content": word}, nil)
		}
	}
	for i, c := range turn.Calls {
		half := len(c.Args) / 2
		send(map[string]any{"tool_calls": []map[string]any{{"index": i, "id": callID(n, i), "type": "function",
			"function": map[string]string{"name": c.Name, "arguments": c.Args[:half]}}}}, nil)
		send(map[string]any{"tool_calls": []map[string]any{{"index": i,
			"function": map[string]string{"arguments": c.Args[half:]}}}}, nil)
	}
	send(map[string]any{}, finish(turn))
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "scripted_error"}})
}
