package tools

import "testing"

// TestEveryToolHasTitleAndOutput: outputs covers the whole catalog, so
// every tool lists a title and an output schema.
func TestEveryToolHasTitleAndOutput(t *testing.T) {
	for _, d := range catalog {
		sp := d.spec()
		if sp.Title == "" || sp.OutputSchema == nil {
			t.Errorf("%s: title %q, output schema %v; add it to outputs", d.Name, sp.Title, sp.OutputSchema)
		}
	}
	for name := range outputs {
		if lookup(name) == nil {
			t.Errorf("outputs names %s, which is not in the catalog", name)
		}
	}
}
