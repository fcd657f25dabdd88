package errclass

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// classes names every errdefs class.
var classes = map[string]error{}

func init() {
	for _, c := range errdefs.Classes {
		classes[className(c)] = c
	}
}

// className is the Go name of class c ("ErrNotFound").
func className(c error) string {
	for name, v := range map[string]error{
		"ErrNotFound": errdefs.ErrNotFound, "ErrExists": errdefs.ErrExists,
		"ErrPermission": errdefs.ErrPermission, "ErrInvalid": errdefs.ErrInvalid,
		"ErrEscape": errdefs.ErrEscape, "ErrIsDir": errdefs.ErrIsDir,
		"ErrNotDir": errdefs.ErrNotDir, "ErrNotEmpty": errdefs.ErrNotEmpty,
		"ErrTooLarge": errdefs.ErrTooLarge, "ErrNoSuchUser": errdefs.ErrNoSuchUser,
		"ErrUnsupported": errdefs.ErrUnsupported, "ErrTimeout": errdefs.ErrTimeout,
		"ErrProtocol": errdefs.ErrProtocol, "ErrVersion": errdefs.ErrVersion,
		"ErrInternal": errdefs.ErrInternal, "ErrSessionEnded": errdefs.ErrSessionEnded,
		"ErrUnavailable": errdefs.ErrUnavailable, "ErrQuota": errdefs.ErrQuota,
		"ErrBusy": errdefs.ErrBusy, "ErrUpstream": errdefs.ErrUpstream,
	} {
		if v == c {
			return name
		}
	}
	return ""
}

func TestEveryClassIsNamed(t *testing.T) {
	if len(classes) != len(errdefs.Classes) {
		t.Fatalf("%d of %d classes named: add the new class to className", len(classes), len(errdefs.Classes))
	}
}

// Each sentinel, wrapped as callers wrap it, is itself and its one class,
// and crosses a wire (the control socket) as that class.
func TestSentinelsAreOfTheirClass(t *testing.T) {
	for _, s := range sentinels {
		err := fmt.Errorf("context: %w", s.Err)
		if !errors.Is(err, s.Err) || !errors.Is(err, s.Class) {
			t.Errorf("%s: Is(itself) %v, Is(%v) %v", s.Name, errors.Is(err, s.Err), s.Class, errors.Is(err, s.Class))
		}
		for name, c := range classes {
			if c != s.Class && errors.Is(err, c) {
				t.Errorf("%s is also of class %s", s.Name, name)
			}
		}
		w := agentproto.ToWire(err)
		if want := agentproto.ToWire(s.Class).Code; w.Code != want {
			t.Errorf("%s crosses the wire as %q, want %q", s.Name, w.Code, want)
		}
		if back := (&agentproto.RemoteError{Op: "x", Code: w.Code, Message: w.Message}); !errors.Is(back, s.Class) {
			t.Errorf("%s back from the wire is not of its class", s.Name)
		}
	}
}

// The edges read the class alone: each answers for every sentinel,
// wrapped, what it answers for the sentinel's class. (Their own tests give
// the answer for each class.)
func TestEdgesAnswerByClass(t *testing.T) {
	for _, s := range sentinels {
		err := fmt.Errorf("context: %w", s.Err)
		if got, want := envelope.FromError("sandbox_x", err).Kind, envelope.FromError("sandbox_x", s.Class).Kind; got != want {
			t.Errorf("envelope.FromError(%s) is %s, its class gives %s", s.Name, got, want)
		}
		if got, want := bridge.StatusOf(err), bridge.StatusOf(s.Class); got != want {
			t.Errorf("bridge.StatusOf(%s) is %d, its class gives %d", s.Name, got, want)
		}
	}
}

// skipped are the trees that are not host packages: the guest agent (its
// errors get their class from oserr), the package that defines the
// classes (and agentproto, which names them for the wire), commands, scripts, tests and build tools.
var skipped = []string{".git", "guestagent", "errdefs", "cmd", "scripts", "e2e", "internal/darwincheck", "testdata", "assets/agent"}

// notListed are classed sentinels this package can't import, with their class.
var notListed = map[string]string{"ui.ErrNoDisplay": "ErrUnsupported"}

// Every exported Err variable of a host package is made with
// errdefs.Class (or agentproto.Class, its old name) and is in sentinels with the same class, and every
// entry of sentinels is still in the source.
func TestListIsComplete(t *testing.T) {
	listed := map[string]error{}
	for _, s := range sentinels {
		listed[s.Name] = s.Class
	}
	seen := map[string]bool{}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			for _, s := range skipped {
				if rel == s || strings.HasSuffix(rel, "/"+s) {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if pkg == "agentproto" {
			return nil // the guest protocol defines the classes; agentproto/control is a host package
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Err") || !n.IsExported() || i >= len(vs.Values) {
						continue
					}
					name := pkg + "." + n.Name
					class, ok := classOf(vs.Values[i])
					switch {
					case runtime.GOOS != "linux" && strings.HasPrefix(name, "vm/qemu."):
						// listed on Linux only (errclass_linux.go)
					case ok && class == "":
						// not a new error: a copy of another, or a typed value
					case !ok:
						t.Errorf("%s (%s) is not made with errdefs.Class: give it a class so the edges can translate it", name, rel)
					case notListed[name] != "":
						if notListed[name] != class {
							t.Errorf("%s is of %s, the test expects %s", name, class, notListed[name])
						}
						seen[name] = true
					case listed[name] == nil:
						t.Errorf("%s (%s) is missing from sentinels", name, rel)
					case listed[name] != classes[class]:
						t.Errorf("%s is of %s in the source but of %v in sentinels", name, class, listed[name])
					default:
						seen[name] = true
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range listed {
		// The control protocol's sentinels are listed for their class;
		// the agentproto tree is not walked.
		if !seen[name] && !strings.HasPrefix(name, "agentproto/") {
			t.Errorf("sentinels lists %s, which the source no longer has", name)
		}
	}
	for name := range notListed {
		if !seen[name] {
			t.Errorf("notListed names %s, which the source no longer has", name)
		}
	}
}

// classOf returns X of errdefs.Class(errdefs.X, ...) (or of its old
// spelling, agentproto.Class(agentproto.X, ...)) for other
// sentinels' values; ok is false for anything else an Err variable is set
// to that makes a new error (errors.New, fmt.Errorf).
func classOf(e ast.Expr) (string, bool) {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return "", true // a copy of another error, a typed value: not a new sentinel
	}
	fn, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", true
	}
	pkg, _ := fn.X.(*ast.Ident)
	switch {
	case pkg != nil && (pkg.Name == "errdefs" || pkg.Name == "agentproto") && fn.Sel.Name == "Class" && len(call.Args) == 2:
		arg, ok := call.Args[0].(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		return arg.Sel.Name, true
	case pkg != nil && (pkg.Name == "errors" && fn.Sel.Name == "New" || pkg.Name == "fmt" && fn.Sel.Name == "Errorf"):
		return "", false
	}
	return "", true
}
