package errdefs_test

import (
	"errors"
	"fmt"
	"go/build"
	"testing"

	"github.com/osaurus/osaurus-sandbox/errdefs"
)

// A sentinel made with Class is itself and its class, wrapped or not, and
// of no other class; Of names the first class in Classes' order.
func TestClass(t *testing.T) {
	for _, c := range errdefs.Classes {
		s := errdefs.Class(c, "thing: "+c.Error())
		err := fmt.Errorf("context: %w", s)
		if !errors.Is(err, s) || !errors.Is(err, c) || errdefs.Of(err) != c {
			t.Errorf("%v: Is(itself) %v, Is(class) %v, Of %v", c, errors.Is(err, s), errors.Is(err, c), errdefs.Of(err))
		}
		for _, other := range errdefs.Classes {
			if other != c && errors.Is(err, other) {
				t.Errorf("a sentinel of %v is also of %v", c, other)
			}
		}
		if s.Error() != "thing: "+c.Error() {
			t.Errorf("message %q", s.Error())
		}
	}
	both := fmt.Errorf("%w: %w", errdefs.ErrInvalid, errdefs.ErrEscape)
	if got := errdefs.Of(both); got != errdefs.ErrEscape {
		t.Errorf("an error of escape and invalid is of %v, want the more specific escape", got)
	}
	if errdefs.Of(errors.New("plain")) != nil || errdefs.Of(nil) != nil {
		t.Error("an unclassed error has a class")
	}
}

// Leaf packages import errdefs to class their errors: it must stay free of
// the module's other packages (and of anything but the standard library).
func TestImportsOnlyTheStandardLibrary(t *testing.T) {
	p, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range p.Imports {
		q, err := build.Import(imp, ".", build.FindOnly)
		if err != nil || !q.Goroot {
			t.Errorf("errdefs imports %s, which is not in the standard library", imp)
		}
	}
}
