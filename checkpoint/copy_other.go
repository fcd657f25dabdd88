//go:build !linux

package checkpoint

import (
	"context"
	"fmt"
	"os"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// Checkpoints copy with Linux calls (FICLONE, SEEK_DATA, openat); macOS
// (clonefile) is not done yet.
var errUnsupported = fmt.Errorf("%w: checkpoints are implemented on Linux only so far", agentproto.ErrUnsupported)

func cloneFile(src, dst string, st *stats) error { return errUnsupported }

func linkFile(src, dst string, st *stats) error { return errUnsupported }

func copyTree(ctx context.Context, src, dst string, st *stats) error { return errUnsupported }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func replaceContents(ctx context.Context, live, src string, held bool) error { return errUnsupported }
