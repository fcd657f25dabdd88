package pkgname

import (
	"strings"
	"testing"
)

// The documentation's recipes name Alpine packages; on a Debian guest
// they install under Debian's names.
func TestForGuest(t *testing.T) {
	in := []string{"python3", "py3-pip", "py3-numpy", "jq", "py3-pip"}
	if got := ForGuest(in, "apt"); strings.Join(got, " ") != "python3 python3-pip python3-numpy jq" {
		t.Errorf("apt: %v", got)
	}
	if got := ForGuest(in, "apk"); strings.Join(got, " ") != "python3 py3-pip py3-numpy jq" {
		t.Errorf("apk: %v", got)
	}
}
