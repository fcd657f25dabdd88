package tools

import (
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/plugins"
)

// The skill's example recipes are valid recipes: a model that copies one
// gets a registration that passes the checks.
func TestPluginCreatorSkillExamplesAreValid(t *testing.T) {
	parts := strings.Split(PluginCreatorSkillText(), "```json\n")
	if len(parts) != 3 {
		t.Fatalf("want the minimal and the full example, found %d JSON blocks", len(parts)-1)
	}
	for i, p := range parts[1:] {
		recipe, _, ok := strings.Cut(p, "```")
		if !ok {
			t.Fatalf("example %d is not closed", i+1)
		}
		pl, err := plugins.DecodeBytes([]byte(recipe))
		if err == nil {
			err = pl.Validate()
		}
		if err != nil {
			t.Errorf("example %d: %v", i+1, err)
		}
	}
}
