package errclass

import (
	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/vm/qemu"
)

// The QEMU driver builds on Linux only.
func init() {
	Sentinels = append(Sentinels,
		Sentinel{"vm/qemu.ErrAlreadyRunning", qemu.ErrAlreadyRunning, agentproto.ErrExists},
		Sentinel{"vm/qemu.ErrMissingTool", qemu.ErrMissingTool, agentproto.ErrUnsupported},
		Sentinel{"vm/qemu.ErrMachine", qemu.ErrMachine, agentproto.ErrInvalid},
	)
}
