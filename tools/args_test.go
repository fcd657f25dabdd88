package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestArgErrorsNameNoGoTypes: whatever a client sends as arguments, the
// error names the argument and what it takes in JSON's terms, never a Go
// type.
func TestArgErrorsNameNoGoTypes(t *testing.T) {
	schema := object(stringList("packages", "Package names.", 1, MaxPackages).must())
	for _, raw := range []string{`[1,2]`, `"x"`, `{"packages": "jq"}`, `{"packages": [1]}`, `{"packages": ["jq"]`, `{"packages": ["jq"]} {}`, `{"nope": 1}`, `{"packages": 1e999}`} {
		t.Run(raw, func(t *testing.T) {
			var a packagesArgs
			err := decodeArgs(json.RawMessage(raw), schema, &a)
			if err == nil {
				t.Fatal("accepted")
			}
			if msg := err.Error(); strings.Contains(msg, "Go ") || strings.Contains(msg, "tools.") || strings.Contains(msg, "[]string") || strings.Contains(msg, "map[") {
				t.Errorf("a Go type reached the client: %s", msg)
			}
		})
	}
}

// TestSchemasSayWhatHappensAboveMaximum: the tools clamp a value above a
// maximum (with a warning), so no schema calls it invalid ("maximum") and
// each such description says so, as docs/agents.md does.
func TestSchemasSayWhatHappensAboveMaximum(t *testing.T) {
	n := 0
	for _, tl := range catalog {
		props, _ := tl.Spec.InputSchema["properties"].(map[string]any)
		for name, p := range props {
			s := p.(map[string]any)
			if _, ok := s["maximum"]; ok {
				t.Errorf("%s.%s has a JSON Schema maximum, but the tool clamps above it", tl.Spec.Name, name)
			}
			if d, _ := s["description"].(string); strings.Contains(d, "Above ") && strings.Contains(d, "is used (with a warning)") {
				n++
			}
		}
	}
	if n < 8 {
		t.Errorf("%d properties say what happens above their maximum, want every bounded one (8)", n)
	}
}
