// Package envelope is the ToolEnvelope every sandbox tool returns: one JSON
// object, keys sorted at every level, that tells the model whether the call
// worked and, if not, what kind of failure it was and whether retrying can
// help.
//
//	success: {"ok": true, "result": <any|null>, "tool"?: name, "warnings"?: [...]}
//	failure: {"expected"?, "field"?, "kind", "message", "ok": false, "retryable", "tool"?}
//
// The keys and kinds match Osaurus's, so prompts written for it keep working.
package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Kind classifies a failure.
type Kind string

const (
	InvalidArgs    Kind = "invalid_args"    // fix the arguments and retry
	Rejected       Kind = "rejected"        // refused by policy or a limit
	Timeout        Kind = "timeout"         // took too long
	ExecutionError Kind = "execution_error" // ran, but failed
	NotFound       Kind = "not_found"       // the file, process or thing is absent
	ToolNotFound   Kind = "tool_not_found"  // no such tool for this agent
	Unavailable    Kind = "unavailable"     // the sandbox can't serve right now
	UserDenied     Kind = "user_denied"     // the user said no
)

// Kinds lists every kind, in a stable order.
var Kinds = []Kind{InvalidArgs, Rejected, Timeout, ExecutionError, NotFound, ToolNotFound, Unavailable, UserDenied}

// Retryable is the default retryable flag of a kind: whether the same
// (or a corrected) call may succeed later.
func (k Kind) Retryable() bool {
	switch k {
	case InvalidArgs, Timeout, ExecutionError, Unavailable:
		return true
	}
	return false
}

// Envelope is one tool result. Build it with OK, Fail, InvalidArg or
// FromError.
type Envelope struct {
	OK       bool
	Tool     string   // the tool's name; omitted when empty
	Result   any      // success only; nil encodes as null
	Warnings []string // success only; omitted when empty

	Kind      Kind   // failure only
	Message   string // failure only
	Retryable bool   // failure only
	Field     string // failure only: the offending argument
	Expected  string // failure only: what that argument should look like
}

// OK is a successful result.
func OK(tool string, result any, warnings ...string) Envelope {
	return Envelope{OK: true, Tool: tool, Result: result, Warnings: warnings}
}

// Text is a successful text-only result, {"text": text}.
func Text(tool, text string, warnings ...string) Envelope {
	return OK(tool, map[string]string{"text": text}, warnings...)
}

// Fail is a failure of the given kind with its default retryable flag.
func Fail(tool string, kind Kind, msg string) Envelope {
	return Envelope{Tool: tool, Kind: kind, Message: msg, Retryable: kind.Retryable()}
}

// Failf is Fail with a format.
func Failf(tool string, kind Kind, format string, args ...any) Envelope {
	return Fail(tool, kind, fmt.Sprintf(format, args...))
}

// InvalidArg is an invalid_args failure naming the argument and what it
// should have been.
func InvalidArg(tool, field, expected, msg string) Envelope {
	e := Fail(tool, InvalidArgs, msg)
	e.Field, e.Expected = field, expected
	return e
}

// WithRetryable overrides the kind's default retryable flag.
func (e Envelope) WithRetryable(r bool) Envelope {
	e.Retryable = r
	return e
}

// IsError reports whether e is a failure (MCP's CallToolResult.IsError).
func (e Envelope) IsError() bool { return !e.OK }

// MarshalJSON encodes e with sorted keys at every level, including inside
// Result, and without HTML escaping (shell output is full of & < >).
func (e Envelope) MarshalJSON() ([]byte, error) {
	m := map[string]any{"ok": e.OK}
	if e.Tool != "" {
		m["tool"] = e.Tool
	}
	if e.OK {
		r, err := canonical(e.Result)
		if err != nil {
			return nil, fmt.Errorf("envelope result of %s: %w", e.Tool, err)
		}
		m["result"] = r
		if len(e.Warnings) > 0 {
			m["warnings"] = e.Warnings
		}
	} else {
		m["kind"] = e.Kind
		m["message"] = e.Message
		m["retryable"] = e.Retryable
		if e.Field != "" {
			m["field"] = e.Field
		}
		if e.Expected != "" {
			m["expected"] = e.Expected
		}
	}
	return encode(m)
}

// JSON is the envelope as the string a tool returns. A result that can't
// be encoded becomes an execution_error envelope, so the model always gets
// valid JSON.
func (e Envelope) JSON() string { return string(e.JSONBytes()) }

// JSONBytes is JSON as bytes, for a wire that carries it as JSON.
func (e Envelope) JSONBytes() []byte {
	b, err := e.MarshalJSON()
	if err != nil {
		b, _ = Fail(e.Tool, ExecutionError, "the tool produced a result that can't be encoded as JSON: "+err.Error()).MarshalJSON()
	}
	return b
}

// Parse decodes an envelope, e.g. in a client or a test. Result holds the
// generic JSON decoding (maps, slices, json.Number, ...).
func Parse(s string) (Envelope, error) { return ParseBytes([]byte(s)) }

// ParseBytes is Parse of JSON bytes.
func ParseBytes(b []byte) (Envelope, error) {
	var w struct {
		OK        *bool    `json:"ok"`
		Tool      string   `json:"tool"`
		Result    any      `json:"result"`
		Warnings  []string `json:"warnings"`
		Kind      Kind     `json:"kind"`
		Message   string   `json:"message"`
		Retryable bool     `json:"retryable"`
		Field     string   `json:"field"`
		Expected  string   `json:"expected"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&w); err != nil {
		return Envelope{}, fmt.Errorf("parse tool envelope: %w", err)
	}
	if w.OK == nil {
		return Envelope{}, errors.New("parse tool envelope: no \"ok\" key")
	}
	return Envelope{
		OK: *w.OK, Tool: w.Tool, Result: w.Result, Warnings: w.Warnings,
		Kind: w.Kind, Message: w.Message, Retryable: w.Retryable, Field: w.Field, Expected: w.Expected,
	}, nil
}

// canonical turns v into plain JSON values (maps, slices, json.Number, ...)
// so that re-encoding sorts every object's keys, struct fields included.
func canonical(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := encode(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Scrub returns e with f applied to every string it carries: the result
// (at every depth, map keys included), the warnings, and a failure's
// message, field and expected. The tool name is the server's own. Every
// envelope a model, a task record or a log sees passes through this, a
// failure as much as a success: a failed command's message quotes its
// output.
func (e Envelope) Scrub(f func(string) string) Envelope {
	if e.Result != nil {
		e.Result = ScrubValue(e.Result, f)
	}
	if len(e.Warnings) > 0 {
		ws := make([]string, len(e.Warnings))
		for i, w := range e.Warnings {
			ws[i] = f(w)
		}
		e.Warnings = ws
	}
	e.Message, e.Field, e.Expected = f(e.Message), f(e.Field), f(e.Expected)
	return e
}

// ScrubValue applies f to every string of a JSON-like value (map keys
// included) and returns it as plain JSON values. A value that can't be
// encoded is returned as its scrubbed %v text, so nothing passes unscrubbed.
func ScrubValue(v any, f func(string) string) any {
	generic, err := canonical(v)
	if err != nil {
		return f(fmt.Sprint(v))
	}
	var walk func(any) any
	walk = func(x any) any {
		switch x := x.(type) {
		case string:
			return f(x)
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, val := range x {
				out[f(k)] = walk(val)
			}
			return out
		}
		return x
	}
	return walk(generic)
}

// Schema is the JSON schema of an envelope whose result, on success, is
// described by result (nil: any JSON value). MCP tools declare it as
// their outputSchema; the envelope object is their structuredContent.
func Schema(result map[string]any) map[string]any {
	if result == nil {
		result = map[string]any{}
	}
	kinds := make([]string, len(Kinds))
	for i, k := range Kinds {
		kinds[i] = string(k)
	}
	str := map[string]any{"type": "string"}
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"ok":        map[string]any{"type": "boolean", "description": "Whether the call worked."},
			"tool":      str,
			"result":    result,
			"warnings":  map[string]any{"type": "array", "items": str},
			"kind":      map[string]any{"type": "string", "enum": kinds, "description": "Failure only: what kind of failure."},
			"message":   str,
			"retryable": map[string]any{"type": "boolean"},
			"field":     str,
			"expected":  str,
		},
		"required":             []string{"ok"},
		"additionalProperties": false,
	}
}
