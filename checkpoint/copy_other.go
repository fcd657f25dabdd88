//go:build !linux && !darwin

package checkpoint

import (
	"context"
	"fmt"
	"os"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// Checkpoints copy with openat, fstatat and SEEK_DATA, and clone with
// FICLONE or clonefile: Linux and macOS only.
var errUnsupported = fmt.Errorf("%w: checkpoints are implemented on Linux and macOS only", agentproto.ErrUnsupported)

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
