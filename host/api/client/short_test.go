package client

import (
	"os"
	"testing"
)

// tempDirShort is a temporary directory with a path short enough for a
// unix socket inside it (t.TempDir's can exceed the 108-byte limit).
func tempDirShort(t *testing.T) (string, error) {
	dir, err := os.MkdirTemp("", "owner")
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir, nil
}
