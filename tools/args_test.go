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
