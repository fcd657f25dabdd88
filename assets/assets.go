// Package assets holds what the app embeds: the guest agent and osaurus-host
// binaries, built
// by `make agent` before the app is compiled.
package assets

import (
	"embed"
	"fmt"
	"io/fs"

	"github.com/osaurus/osaurus-sandbox/errdefs"
)

//go:embed agent
var agentFS embed.FS

// ErrAgentMissing: the app was built without `make agent`.
var ErrAgentMissing = errdefs.Class(errdefs.ErrUnsupported, "guest agent not embedded in this build")

// GuestAgent returns the static guest agent for a guest architecture
// ("amd64" or "arm64").
func GuestAgent(arch string) ([]byte, error) {
	b, err := fs.ReadFile(agentFS, "agent/sandbox-agent-linux-"+arch)
	if err != nil {
		return nil, fmt.Errorf("%w for %s: build the app with `make build` (it runs `make agent` first)", ErrAgentMissing, arch)
	}
	return b, nil
}

// HostCLI returns osaurus-host, the guest's bridge client, for a guest
// architecture.
func HostCLI(arch string) ([]byte, error) {
	b, err := fs.ReadFile(agentFS, "agent/osaurus-host-linux-"+arch)
	if err != nil {
		return nil, fmt.Errorf("%w (osaurus-host for %s): build the app with `make build` (it runs `make agent` first)", ErrAgentMissing, arch)
	}
	return b, nil
}
