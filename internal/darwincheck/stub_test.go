package darwincheck

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// vetDarwin type-checks a one-file main package against the stub of
// testdata/cgomod, as the real check does for the project.
func vetDarwin(t *testing.T, stub, goarch, src string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	gomod := "module example.com/use\n\ngo 1.22\n\nrequire example.com/cgomod v0.0.0\n\nreplace example.com/cgomod => " + stub + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return goCmd(context.Background(), dir, []string{"GOOS=darwin", "GOARCH=" + goarch, "CGO_ENABLED=0"}, "vet", ".")
}

func TestWriteStubKeepsSignatures(t *testing.T) {
	stub := filepath.Join(t.TempDir(), "cgomod")
	if err := WriteStub("testdata/cgomod", stub); err != nil {
		t.Fatal(err)
	}
	const good = `package main

import (
	"errors"
	"unsafe"

	"example.com/cgomod"
)

// fake looks like an Attachment from outside, but the unexported method
// of the interface can only be implemented inside cgomod.
type fake struct{}

func (fake) Ptr() unsafe.Pointer { return nil }
func (fake) attachment()         {}

func main() {
	f, err := cgomod.NewFile("log", true, cgomod.ModeB)
	if errors.Is(err, cgomod.ErrOld) {
		return
	}
	var a cgomod.Attachment = f
	ok, _ := cgomod.Use(a)
	_, _ = f.Open()
	_ = f.Ptr()
	if ok {
		cgomod.OnlyArm64()
	}
}
`
	for _, tc := range []struct {
		name, goarch, src string
		want              string // "" for success
	}{
		{"good", "arm64", good, ""},
		{"undefined", "arm64", strings.Replace(good, "cgomod.NewFile(", "cgomod.NewDir(", 1), "undefined: cgomod.NewDir"},
		{"wrong type", "arm64", strings.Replace(good, "cgomod.ModeB", "int(1)", 1), "cannot use int(1)"},
		{"wrong argument count", "arm64", strings.Replace(good, "cgomod.Use(a)", "cgomod.Use(nil, 1)", 1), "too many arguments"},
		{"unexported interface method", "arm64", strings.Replace(good, "var a cgomod.Attachment = f", "var a cgomod.Attachment = fake{}", 1), "(unexported method attachment)"},
		{"file name constraint kept", "amd64", good, "undefined: cgomod.OnlyArm64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := vetDarwin(t, stub, tc.goarch, tc.src)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("vet failed on correct code: %v\n%s", err, out)
			case tc.want != "" && err == nil:
				t.Fatalf("vet passed, want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(out, tc.want):
				t.Fatalf("vet output lacks %q:\n%s", tc.want, out)
			}
		})
	}
	b, err := os.ReadFile(filepath.Join(stub, "dev.go"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `import "C"`) || strings.Contains(string(b), "C.") {
		t.Errorf("stub still uses cgo:\n%s", b)
	}
	if !strings.HasPrefix(string(b), "// Code generated") || !strings.Contains(string(b), "//go:build darwin\n") {
		t.Errorf("stub lost its header or build constraint:\n%s", b)
	}
}

func TestWriteStubRejectsExportedCgoType(t *testing.T) {
	err := WriteStub("testdata/cgoleak", t.TempDir())
	if !errors.Is(err, ErrExportedCgo) || !strings.Contains(err.Error(), "func Size") {
		t.Fatalf("err = %v, want ErrExportedCgo naming func Size", err)
	}
}

func TestGuessPackageName(t *testing.T) {
	for path, want := range map[string]string{
		"os":                        "os",
		"runtime/cgo":               "cgo",
		"github.com/Code-Hex/vz/v3": "vz",
		"github.com/Code-Hex/vz/v3/internal/objc": "objc",
		"github.com/Code-Hex/go-infinity-channel": "infinity_channel",
		"gopkg.in/yaml.v3":                        "yaml",
	} {
		if got := guessPackageName(path); got != want {
			t.Errorf("guessPackageName(%q) = %q, want %q", path, got, want)
		}
	}
}
