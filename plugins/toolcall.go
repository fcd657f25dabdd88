package plugins

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// InputSchema is the JSON schema MCP clients get for the tool: one
// property per parameter, required when it has no default, and no other
// properties.
func (t Tool) InputSchema() map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, name := range sortedKeys(t.Parameters) {
		prm := t.Parameters[name]
		s := map[string]any{"type": prm.Type}
		if prm.Description != "" {
			s["description"] = prm.Description
		}
		if len(prm.Default) > 0 {
			s["default"] = prm.Default
		} else {
			required = append(required, name)
		}
		if len(prm.Enum) > 0 {
			s["enum"] = prm.Enum
		}
		props[name] = s
	}
	return map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	}
}

// ArgError is a tool argument the model got wrong: the argument's name,
// what was expected and what is wrong, so it can correct the call.
type ArgError struct {
	Field, Expected, Message string
}

func (e *ArgError) Error() string { return e.Message }

// Env checks a call's arguments against the tool's parameters and returns
// them as PARAM_<NAME> environment entries, defaults filled in, sorted.
// Strings arrive as they are; numbers as their JSON text; booleans as true
// or false; arrays and objects as compact JSON.
func (t Tool) Env(args json.RawMessage) ([]string, error) {
	given := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(args)) > 0 && string(bytes.TrimSpace(args)) != "null" {
		if err := json.Unmarshal(args, &given); err != nil {
			return nil, &ArgError{Field: "", Expected: "a JSON object of arguments", Message: "the arguments are not a JSON object: " + err.Error()}
		}
	}
	for name := range given {
		if _, ok := t.Parameters[name]; !ok {
			return nil, &ArgError{Field: name, Expected: "one of: " + strings.Join(sortedKeys(t.Parameters), ", "),
				Message: fmt.Sprintf("unknown argument %q; this tool takes: %s", name, orNone(sortedKeys(t.Parameters)))}
		}
	}
	var env []string
	for _, name := range sortedKeys(t.Parameters) {
		prm := t.Parameters[name]
		v, ok := given[name]
		if !ok || string(v) == "null" {
			if len(prm.Default) == 0 {
				return nil, &ArgError{Field: name, Expected: aType(prm.Type), Message: fmt.Sprintf("argument %q is required", name)}
			}
			v = prm.Default
		}
		if !ValueHasType(v, prm.Type) {
			return nil, &ArgError{Field: name, Expected: aType(prm.Type), Message: fmt.Sprintf("argument %q must be %s, got %s", name, aType(prm.Type), truncate(string(v), 100))}
		}
		if len(prm.Enum) > 0 {
			in := false
			for _, e := range prm.Enum {
				in = in || jsonEqual(e, v)
			}
			if !in {
				var allowed []string
				for _, e := range prm.Enum {
					allowed = append(allowed, string(e))
				}
				return nil, &ArgError{Field: name, Expected: "one of " + strings.Join(allowed, ", "),
					Message: fmt.Sprintf("argument %q is %s, not one of %s", name, truncate(string(v), 100), strings.Join(allowed, ", "))}
			}
		}
		s, err := stringify(v, prm.Type)
		if err != nil {
			return nil, &ArgError{Field: name, Expected: aType(prm.Type), Message: err.Error()}
		}
		if strings.ContainsRune(s, 0) {
			return nil, &ArgError{Field: name, Expected: "text without NUL characters", Message: fmt.Sprintf("argument %q contains a NUL character, which can't be passed in the environment", name)}
		}
		env = append(env, EnvName(name)+"="+s)
	}
	sort.Strings(env)
	return env, nil
}

func stringify(v json.RawMessage, typ string) (string, error) {
	switch typ {
	case "string":
		var s string
		err := json.Unmarshal(v, &s)
		return s, err
	case "boolean":
		var b bool
		err := json.Unmarshal(v, &b)
		return fmt.Sprint(b), err
	case "number", "integer":
		return strings.TrimSpace(string(v)), nil
	}
	var buf bytes.Buffer
	err := json.Compact(&buf, v)
	return buf.String(), err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no arguments"
	}
	return strings.Join(s, ", ")
}

// aType is "a string", "an integer", ...
func aType(t string) string {
	if strings.ContainsAny(t[:min(1, len(t))], "aeiou") {
		return "an " + t
	}
	return "a " + t
}
