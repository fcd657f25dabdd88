package darwincheck

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func moduleRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	return root
}

// The project's own darwin code must pass: this is what `make test` runs.
func TestRunProjectTree(t *testing.T) {
	rep, err := Run(context.Background(), Config{Dir: moduleRoot(t)})
	if err != nil {
		t.Fatal(err)
	}
	const driver = "github.com/osaurus/osaurus-sandbox/vm/vz"
	if !slices.Contains(rep.Checked, driver) {
		t.Errorf("the vz driver was not type-checked; checked: %v", rep.Checked)
	}
	if !slices.Contains(rep.NeedCgo, driver) || slices.Contains(rep.Built, driver) {
		t.Errorf("the vz driver must be listed as needing cgo, not built: need cgo %v", rep.NeedCgo)
	}
	if !slices.Contains(rep.Built, "github.com/osaurus/osaurus-sandbox/vm/vz/core") {
		t.Errorf("vm/vz/core needs no cgo and must be built for darwin; built: %v", rep.Built)
	}
	if len(rep.Stubbed) != 1 || !strings.HasPrefix(rep.Stubbed[0], "github.com/Code-Hex/vz/v3@v3.") {
		t.Errorf("stubbed %v, want the vz module", rep.Stubbed)
	}
}

// A darwin file dropped into the driver package with one bad vz call must
// fail the check, and the error must point at that call.
func TestRunRejectsBrokenVzCalls(t *testing.T) {
	root := moduleRoot(t)
	for _, tc := range []struct {
		file string
		want error
		msg  string // in the error
	}{
		{"good.go", nil, ""},
		{"undefined_func.go", ErrTypeCheck, "undefined: vz.NewVirtioSocketDevice"},
		{"wrong_arg_type.go", ErrTypeCheck, "cannot use cpus (variable of type int) as uint value"},
		{"swapped_enums.go", ErrTypeCheck, "DiskImageCachingMode value in argument to vz.NewDiskImageStorageDeviceAttachmentWithCacheAndSync"},
		{"wrong_interface.go", ErrTypeCheck, "StorageDeviceAttachment (missing method storageDeviceAttachment)"},
		{"result_count.go", ErrTypeCheck, "1 variable but machine.RequestStop returns 2 values"},
		{"undefined_method.go", ErrTypeCheck, "machine.Shutdown undefined"},
		{"uses_cgo.go", ErrUncovered, "zz_testcase_darwin.go"},
		{"not_ci.go", ErrUncovered, "zz_testcase_darwin.go"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(filepath.Join("testdata/vzcalls", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Run(context.Background(), Config{
				Dir:      root,
				Patterns: []string{"./vm/vz"},
				Overlay:  map[string][]byte{"vm/vz/zz_testcase_darwin.go": src},
			})
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("correct calls failed the check: %v", err)
			case tc.want == nil:
			case !errors.Is(err, tc.want):
				t.Fatalf("err = %v, want %v", err, tc.want)
			case !strings.Contains(err.Error(), tc.msg) || (tc.want == ErrTypeCheck && !strings.Contains(err.Error(), "vm/vz/zz_testcase_darwin.go:")):
				t.Fatalf("error does not point at the bad call (%q):\n%v", tc.msg, err)
			default:
				t.Logf("rejected as expected: %v", err)
			}
		})
	}
}
