package provision

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLayoutModularKernel: the QEMU driver boots a kernel with modules on
// q35, so a provision that saved modules must say so, and one that saved
// none (a kernel with its drivers built in) must not.
func TestLayoutModularKernel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order *string // nil: no modules folder at all
		want  bool
	}{
		{"not provisioned", nil, false},
		{"built-in kernel (empty order)", orderOf(""), false},
		{"modules in load order", orderOf("01-virtio_pci.ko\n"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := Layout{Dir: t.TempDir()}
			if tc.order != nil {
				if err := os.MkdirAll(l.Modules(), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(l.Modules(), "order"), []byte(*tc.order), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := l.ModularKernel(); got != tc.want {
				t.Errorf("ModularKernel() = %v, want %v", got, tc.want)
			}
		})
	}
}

func orderOf(s string) *string { return &s }
