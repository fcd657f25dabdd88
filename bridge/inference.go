package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/osaurus/osaurus-sandbox/inference"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
)

// Inference runs chat completions for the bridge (inference.Client).
type Inference interface {
	Complete(ctx context.Context, req inference.Request, onDelta func(string)) (inference.Message, error)
}

// MaxChatMessages bounds one inference request.
const MaxChatMessages = 500

// allow charges the agent's quota of a service, answering 429 itself.
func (s *Server) allow(w http.ResponseWriter, agent, service string) bool {
	err := s.o.Rate.Allow(agent, service)
	if err == nil {
		return true
	}
	var rej *limit.Rejected
	if errors.As(err, &rej) {
		w.Header().Set("Retry-After", fmt.Sprint(int(rej.RetryAfter.Seconds()+0.999)))
	}
	writeError(w, http.StatusTooManyRequests, err.Error())
	return false
}

// inferenceChat is POST /api/inference/chat {model?, messages, stream?}
// → {"content"}. With stream the answer is newline-delimited JSON:
// {"delta"} lines, then {"content"} or {"error"}.
func (s *Server) inferenceChat(w http.ResponseWriter, r *http.Request) {
	if s.o.Inference == nil {
		writeError(w, http.StatusServiceUnavailable, "inference is not available in this app")
		return
	}
	agent := agentOf(r)
	// A plugin's command gets inference only when its recipe asks for it
	// (permissions.inference); the agent's own commands have the agent's.
	caller, _ := CallerOf(r.Context())
	switch {
	case caller.Unattributed:
		writeError(w, http.StatusForbidden, unattributed("inference calls"))
		return
	case caller.Plugin != "" && (s.o.PluginInference == nil || !s.o.PluginInference(agent, caller.Plugin)):
		writeError(w, http.StatusForbidden, fmt.Sprintf("the plugin %s does not declare \"permissions\": {\"inference\": true}: a plugin's commands get inference only when its recipe asks for it", caller.Plugin))
		return
	}
	if !s.allow(w, agent, limit.ServiceInference) {
		return
	}
	var body struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Stream bool `json:"stream"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if len(body.Messages) == 0 || len(body.Messages) > MaxChatMessages {
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`request body needs "messages": 1–%d of {role, content}`, MaxChatMessages))
		return
	}
	if len(body.Model) > 256 {
		writeError(w, http.StatusBadRequest, `"model" is longer than 256 characters`)
		return
	}
	req := inference.Request{Model: strings.TrimSpace(body.Model)}
	for i, m := range body.Messages {
		// tool messages need tool calls the caller can't have made here.
		if m.Role != "system" && m.Role != "user" && m.Role != "assistant" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf(`messages[%d].role: %q, want "system", "user" or "assistant"`, i, m.Role))
			return
		}
		content := m.Content
		if s.o.Secrets != nil {
			// What reaches the model server is scrubbed like everything
			// else the model sees: an accidental echo stays on the host.
			content = s.o.Secrets.Scrub(agent, content)
		}
		req.Messages = append(req.Messages, inference.Message{Role: m.Role, Content: content})
	}
	var onDelta func(string)
	started := false
	fl, _ := w.(http.Flusher)
	line := func(v any) {
		b, _ := json.Marshal(v)
		w.Write(append(b, '\n'))
		if fl != nil {
			fl.Flush()
		}
	}
	if body.Stream {
		onDelta = func(d string) {
			if !started {
				started = true
				w.Header().Set("Content-Type", "application/x-ndjson")
				w.WriteHeader(http.StatusOK)
			}
			line(map[string]string{"delta": d})
		}
	}
	m, err := s.o.Inference.Complete(r.Context(), req, onDelta)
	switch {
	case err != nil && started:
		line(map[string]string{"error": inferenceError(err)})
	case err != nil:
		writeError(w, StatusOf(err), inferenceError(err))
	case started:
		line(map[string]string{"content": m.Content})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"content": m.Content})
	}
}

func inferenceError(err error) string {
	if errors.Is(err, inference.ErrNotConfigured) {
		return err.Error() + " (ask the user to set it in the app's settings)"
	}
	return err.Error()
}
