package hostcli

import (
	"slices"
	"testing"
)

// TestGlobalFlags: --context and --data-dir are taken only before the
// command, so a command's own arguments (exec's) are never read as them.
func TestGlobalFlags(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		ctx, dir string
		rest     []string
		err      bool
	}{
		{[]string{"status"}, "", "", []string{"status"}, false},
		{[]string{"--context", "box", "status", "--json"}, "box", "", []string{"status", "--json"}, false},
		{[]string{"--context=box", "--data-dir=/d", "mcp"}, "box", "/d", []string{"mcp"}, false},
		{[]string{"--data-dir", "/d", "--context", "b", "exec", "--", "x", "--context", "c"}, "b", "/d", []string{"exec", "--", "x", "--context", "c"}, false},
		{[]string{"exec", "--context", "box"}, "", "", []string{"exec", "--context", "box"}, false},
		{[]string{"--context"}, "", "", nil, true},
		{[]string{"--context="}, "", "", nil, true},
	} {
		ctx, dir, rest, err := globalFlags(tt.args)
		if (err != nil) != tt.err || ctx != tt.ctx || dir != tt.dir || !slices.Equal(rest, tt.rest) {
			t.Errorf("%q: %q %q %q %v", tt.args, ctx, dir, rest, err)
		}
	}
}
