// Package sandbox is the VM's lifecycle as a user meets it: provision,
// start, stop, reset, remove, restart after a crash, and state that
// survives an app restart.
package sandbox

import (
	"encoding/json"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// savedState is state.json: enough to find a VM left running by an app
// that crashed.
type savedState struct {
	State  control.State `json:"state"`
	Reason string        `json:"reason,omitempty"`
	Pid    int           `json:"pid,omitempty"`
	At     time.Time     `json:"at"`
}

func save(path string, s savedState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o644)
}
