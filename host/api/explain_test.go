package api

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/internal/explain"
)

// No owner, as client.Dial reports it, is explained with the way to start
// one; the same words from elsewhere are not taken for it.
func TestNoOwnerIsExplained(t *testing.T) {
	err := fmt.Errorf("%w: %v", ErrNoOwner, errors.New("dial unix /d/run/control.sock: connect: no such file or directory"))
	ex := explain.Error(err)
	if !strings.Contains(ex.Short(), "isn't running for this data folder") || !strings.Contains(ex.Fix, "osaurus-sandbox start") {
		t.Errorf("no owner explains as %+v", ex)
	}
	if ex := explain.Error(errors.New(ErrNoOwner.Error())); ex.Known() {
		t.Errorf("the words alone explain as %+v", ex)
	}
}
