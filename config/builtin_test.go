package config_test

import (
	"testing"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/provision"
)

// TestBuiltinImagesAgree: the names config accepts are those provision
// resolves.
func TestBuiltinImagesAgree(t *testing.T) {
	for _, name := range config.BuiltinImages {
		if _, ok, err := provision.BuiltinManifestFor(name, "amd64"); !ok || err != nil {
			t.Errorf("%s: provision does not resolve it: %v", name, err)
		}
	}
	if config.BuiltinPrefix != provision.BuiltinPrefix {
		t.Errorf("prefixes differ")
	}
}
