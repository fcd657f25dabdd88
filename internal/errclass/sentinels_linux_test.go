package errclass

import (
	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/vm/qemu"
)

// The QEMU driver builds on Linux only.
func init() {
	sentinels = append(sentinels,
		sentinel{"vm/qemu.ErrAlreadyRunning", qemu.ErrAlreadyRunning, errdefs.ErrExists},
		sentinel{"vm/qemu.ErrMissingTool", qemu.ErrMissingTool, errdefs.ErrUnsupported},
		sentinel{"vm/qemu.ErrMachine", qemu.ErrMachine, errdefs.ErrInvalid},
	)
}
