package plugins

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestToolSchemaAndEnv(t *testing.T) {
	p := loadTestdata(t, "python-data-tools.json")
	tool := p.Tools[0]
	tool.Parameters["flags"] = Parameter{Type: "array", Default: json.RawMessage(`["-a", "b c"]`)}
	tool.Parameters["verbose"] = Parameter{Type: "boolean", Default: json.RawMessage(`false`)}
	tool.Parameters["ratio"] = Parameter{Type: "number", Default: json.RawMessage(`0.5`)}

	s := tool.InputSchema()
	if s["additionalProperties"] != false || !slices.Equal(s["required"].([]string), []string{"file"}) {
		t.Fatalf("schema %v", s)
	}
	if b, err := json.Marshal(s); err != nil || !strings.Contains(string(b), `"enum":["text","json"]`) {
		t.Fatalf("schema json %s %v", b, err)
	}

	env, err := tool.Env(json.RawMessage(`{"file": "data/a b.csv", "rows": 7, "verbose": true, "format": "json"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PARAM_FILE=data/a b.csv", `PARAM_FLAGS=["-a","b c"]`, "PARAM_FORMAT=json", "PARAM_RATIO=0.5", "PARAM_ROWS=7", "PARAM_VERBOSE=true"}
	if !slices.Equal(env, want) {
		t.Fatalf("env %q\nwant %q", env, want)
	}

	for _, tt := range []struct {
		args, field, text string
	}{
		{`{}`, "file", `argument "file" is required`},
		{`{"file": null}`, "file", "is required"},
		{`{"file": 3}`, "file", "must be a string, got 3"},
		{`{"file": "x", "rows": 1.5}`, "rows", "must be an integer"},
		{`{"file": "x", "format": "xml"}`, "format", `is "xml", not one of "text", "json"`},
		{`{"file": "x", "colour": 1}`, "colour", "unknown argument"},
		{`{"file": "a\u0000b"}`, "file", "NUL"},
		{`[1]`, "", "not a JSON object"},
	} {
		_, err := tool.Env(json.RawMessage(tt.args))
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Field != tt.field || !strings.Contains(ae.Message, tt.text) || ae.Expected == "" {
			t.Errorf("%s: %#v", tt.args, err)
		}
	}
}
