package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// binder decodes a call's arguments and returns the work to do, so that
// bad arguments are reported before any quota is spent.
type binder func(args json.RawMessage, schema map[string]any) (func(context.Context, *call) (any, error), error)

// bind makes a binder for a handler taking arguments of type A.
func bind[A any](f func(context.Context, *call, A) (any, error)) binder {
	return func(raw json.RawMessage, schema map[string]any) (func(context.Context, *call) (any, error), error) {
		var a A
		if err := decodeArgs(raw, schema, &a); err != nil {
			return nil, err
		}
		return func(ctx context.Context, c *call) (any, error) { return f(ctx, c, a) }, nil
	}
}

// decodeArgs decodes a JSON object strictly: unknown keys, wrong types and
// missing required keys are invalid_args naming the argument.
func decodeArgs(raw json.RawMessage, schema map[string]any, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	props := propNames(schema)
	var present map[string]json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&present); err != nil {
		return envelope.ArgErrorf("", "a JSON object with the keys "+strings.Join(props, ", "),
			"the arguments must be a JSON object: %s", jsonProblem(err))
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			want := describeType(schema, te.Field)
			return envelope.ArgErrorf(te.Field, want, "argument `%s` must be %s, got a JSON %s", te.Field, want, te.Value)
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			name = strings.Trim(name, `"`)
			return envelope.ArgErrorf(name, "one of "+strings.Join(props, ", "),
				"unknown argument `%s`; this tool takes: %s", name, strings.Join(props, ", "))
		}
		return envelope.ArgErrorf("", "a JSON object", "could not read the arguments: %s", jsonProblem(err))
	}
	if _, err := d.Token(); err != io.EOF {
		return envelope.ArgErrorf("", "one JSON object", "the arguments have data after the JSON object")
	}
	req, _ := schema["required"].([]string)
	for _, r := range req {
		if v, ok := present[r]; !ok || string(v) == "null" {
			return envelope.ArgErrorf(r, describeType(schema, r), "missing required argument `%s`", r)
		}
	}
	return nil
}

func propNames(schema map[string]any) []string {
	props, _ := schema["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// describeType says what a property should look like, for messages.
func describeType(schema map[string]any, field string) string {
	props, _ := schema["properties"].(map[string]any)
	p, _ := props[field].(map[string]any)
	switch p["type"] {
	case "string":
		return "a string"
	case "integer":
		if lo, ok := p["minimum"]; ok {
			if hi, ok := p["maximum"]; ok {
				return fmt.Sprintf("an integer from %v to %v", lo, hi)
			}
			return fmt.Sprintf("an integer of at least %v", lo)
		}
		return "an integer"
	case "boolean":
		return "true or false"
	case "array":
		return "an array of strings"
	}
	return "a value of the documented type"
}

// Schema building. Schemas are plain maps so that they encode exactly as
// written and tests can inspect them.

type prop struct {
	name     string
	schema   map[string]any
	required bool
}

func object(props ...prop) map[string]any {
	ps := map[string]any{}
	req := []string{}
	for _, p := range props {
		ps[p.name] = p.schema
		if p.required {
			req = append(req, p.name)
		}
	}
	return map[string]any{
		"type":                 "object",
		"properties":           ps,
		"required":             req,
		"additionalProperties": false,
	}
}

func (p prop) must() prop { p.required = true; return p }

func str(name, desc string) prop {
	return prop{name: name, schema: map[string]any{"type": "string", "description": desc}}
}

func enum(name, desc string, values ...string) prop {
	return prop{name: name, schema: map[string]any{"type": "string", "description": desc, "enum": values}}
}

func boolean(name, desc string) prop {
	return prop{name: name, schema: map[string]any{"type": "boolean", "description": desc, "default": false}}
}

// integer is an integer property; def 0 means no default. A value above
// hi is clamped to it with a warning (see bounded), so the schema has no
// "maximum", which would call such a value invalid: the description says
// what happens instead.
func integer(name, desc string, lo, hi, def int) prop {
	s := map[string]any{"type": "integer", "description": desc, "minimum": lo}
	if hi > 0 {
		s["description"] = fmt.Sprintf("%s Above %d, %d is used (with a warning).", desc, hi, hi)
	}
	if def != 0 {
		s["default"] = def
	}
	return prop{name: name, schema: s}
}

func stringList(name, desc string, minItems, maxItems int) prop {
	return prop{name: name, schema: map[string]any{
		"type": "array", "description": desc, "items": map[string]any{"type": "string"},
		"minItems": minItems, "maxItems": maxItems,
	}}
}

// Helpers for the numeric conventions every tool shares: 0 means "use the
// default", negative is an error, above the maximum is clamped with a
// warning (the call still does something useful).

func (c *call) bounded(field string, v, def, hi int) (int, error) {
	switch {
	case v < 0:
		return 0, envelope.ArgErrorf(field, fmt.Sprintf("an integer from 1 to %d", hi), "argument `%s` must not be negative, got %d", field, v)
	case v == 0:
		return def, nil
	case v > hi:
		c.warn("%s %d is over the maximum; used %d", field, v, hi)
		return hi, nil
	}
	return v, nil
}

// jsonProblem says what is wrong with JSON in the client's terms: the
// decoder's own words name Go types, which mean nothing to a client.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, se.Error())
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("`%s` can't be a JSON %s", te.Field, te.Value)
	case errors.As(err, &te):
		return fmt.Sprintf("got a JSON %s", te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return "the JSON ends too soon"
	}
	return "the JSON could not be read"
}
