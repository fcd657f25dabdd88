// Package inference is a client of an OpenAI-compatible chat completions
// API (Osaurus, Ollama, LM Studio, llama.cpp's server, hosted APIs): plain
// and streamed completions, with function calling. The bridge's inference
// route and the agent runner both use it.
package inference

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/errdefs"
)

// Errors.
var (
	// ErrNotConfigured: inferenceUrl or inferenceModel is not set.
	ErrNotConfigured = errdefs.Class(errdefs.ErrUnsupported, "inference is not configured")
	// ErrUpstream is wrapped by every failure of the model server.
	ErrUpstream = errdefs.Class(errdefs.ErrUpstream, "the model server failed")
)

// MaxResponse bounds a model server's answer.
const MaxResponse = 16 << 20

// Message is one chat message.
type Message struct {
	Role       string     `json:"role"` // system, user, assistant, tool
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a function call the model asks for.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // function
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments as JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a function offered to the model.
type Tool struct {
	Type     string   `json:"type"` // function
	Function Function `json:"function"`
}

// Function describes a tool's name and JSON-schema parameters.
type Function struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
}

// Request is one completion request; an empty Model means the default.
type Request struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools,omitempty"`
	Stream   bool      `json:"stream,omitempty"`
}

// Settings say where the model server is.
type Settings struct {
	URL    string // base URL; /chat/completions is appended
	Model  string // default model
	APIKey string // sent as a bearer token when set
}

// UpstreamError is a failure of the model server.
type UpstreamError struct {
	Status  int // HTTP status, 0 when there was no answer
	Message string
}

func (e *UpstreamError) Error() string {
	if e.Status == 0 {
		return "the model server could not be reached: " + e.Message
	}
	return fmt.Sprintf("the model server answered HTTP %d: %s", e.Status, e.Message)
}

func (e *UpstreamError) Unwrap() error { return ErrUpstream }

// Client calls the model server of the current settings.
type Client struct {
	// Settings is read on every call, so a changed setting applies at once.
	Settings func() (Settings, error)
	// HTTP defaults to a client with a 10-minute timeout (local models on
	// a CPU are slow).
	HTTP *http.Client
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 10 * time.Minute}
}

// Complete runs one chat completion. With onDelta it asks for a stream
// and calls onDelta with each piece of content as it arrives; a server
// that answers with a plain completion instead still works.
func (c *Client) Complete(ctx context.Context, req Request, onDelta func(string)) (Message, error) {
	st, err := c.Settings()
	if err != nil {
		return Message{}, err
	}
	if st.URL == "" {
		return Message{}, fmt.Errorf("%w: inferenceUrl is empty; point it at an OpenAI-compatible server with `osaurus-sandbox config set inferenceUrl http://127.0.0.1:11434/v1`", ErrNotConfigured)
	}
	if req.Model == "" {
		req.Model = st.Model
	}
	if req.Model == "" {
		return Message{}, fmt.Errorf("%w: no model named and inferenceModel is empty; set it with `osaurus-sandbox config set inferenceModel MODEL`", ErrNotConfigured)
	}
	req.Stream = onDelta != nil
	body, err := json.Marshal(req)
	if err != nil {
		return Message{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(st.URL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return Message{}, &UpstreamError{Message: err.Error()}
	}
	hr.Header.Set("Content-Type", "application/json")
	if st.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+st.APIKey)
	}
	resp, err := c.httpClient().Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return Message{}, ctx.Err()
		}
		return Message{}, &UpstreamError{Message: scrub(err.Error(), st.APIKey)}
	}
	defer resp.Body.Close()
	r := io.LimitReader(resp.Body, MaxResponse)
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(r)
		return Message{}, &UpstreamError{Status: resp.StatusCode, Message: scrub(errorMessage(b), st.APIKey)}
	}
	if req.Stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return readStream(r, onDelta, st.APIKey)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return Message{}, &UpstreamError{Status: resp.StatusCode, Message: "reading the answer: " + err.Error()}
	}
	var out struct {
		Choices []struct {
			Message Message `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) == 0 {
		return Message{}, &UpstreamError{Status: resp.StatusCode, Message: "the answer is not a chat completion: " + clip(scrub(string(b), st.APIKey))}
	}
	m := out.Choices[0].Message
	m.Role = "assistant"
	if onDelta != nil && m.Content != "" {
		onDelta(m.Content)
	}
	return m, nil
}

// readStream assembles a streamed completion from server-sent events.
func readStream(r io.Reader, onDelta func(string), key string) (Message, error) {
	m := Message{Role: "assistant"}
	var content strings.Builder
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxResponse)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			break
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return m, &UpstreamError{Status: 200, Message: "a stream event is not JSON: " + clip(scrub(data, key))}
		}
		if len(ev.Error) > 0 && string(ev.Error) != "null" {
			return m, &UpstreamError{Status: 200, Message: scrub(errorMessage([]byte(data)), key)}
		}
		for _, ch := range ev.Choices {
			if d := ch.Delta.Content; d != "" {
				content.WriteString(d)
				onDelta(d)
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index < 0 || tc.Index > 1000 {
					return m, &UpstreamError{Status: 200, Message: fmt.Sprintf("a streamed tool call has index %d", tc.Index)}
				}
				for len(m.ToolCalls) <= tc.Index {
					m.ToolCalls = append(m.ToolCalls, ToolCall{Type: "function"})
				}
				t := &m.ToolCalls[tc.Index]
				if tc.ID != "" {
					t.ID = tc.ID
				}
				t.Function.Name += tc.Function.Name
				t.Function.Arguments += tc.Function.Arguments
			}
		}
	}
	if err := sc.Err(); err != nil {
		return m, &UpstreamError{Status: 200, Message: "reading the stream: " + err.Error()}
	}
	m.Content = content.String()
	return m, nil
}

// errorMessage pulls the message out of an OpenAI-style error body
// ({"error":{"message":…}} or {"error":"…"}), else returns the text.
func errorMessage(b []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && len(e.Error) > 0 {
		var s string
		if json.Unmarshal(e.Error, &s) == nil && s != "" {
			return clip(s)
		}
		var o struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &o) == nil && o.Message != "" {
			return clip(o.Message)
		}
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(empty body)"
	}
	return clip(s)
}

// clip keeps messages readable: a server may answer with a whole page.
func clip(s string) string {
	const max = 1000
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// scrub keeps the API key out of messages an agent sees.
func scrub(s, key string) string {
	if len(key) < 6 {
		return s
	}
	return strings.ReplaceAll(s, key, "[REDACTED:INFERENCE_API_KEY]")
}
