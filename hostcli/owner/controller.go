package owner

import (
	"context"
	"encoding/json"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/sandbox"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// Op names a lifecycle operation.
type Op string

// Lifecycle operations, also the control socket's op names.
const (
	OpProvision Op = "ctl.provision"
	OpStart     Op = "ctl.start"
	OpStop      Op = "ctl.stop"
	OpReset     Op = "ctl.reset"
	OpRemove    Op = "ctl.remove"
)

// Status is the sandbox's state as the owner sees it, and who the owner is.
type Status struct {
	sandbox.Status
	// Owner is the kind of process that owns the VM: "app", "serve",
	// "background" (started by the CLI; `stop` ends it), or "none".
	Owner string `json:"owner"`
	// Adoptable is set when no process owns a VM that still runs (its
	// owner died): the next `start` or `stop` adopts it.
	Adoptable bool `json:"adoptable,omitempty"`
}

// Controller drives the sandbox of one data dir. Local implements it in
// the owner process over its manager; Client implements it in any other
// process over the control socket. The CLI, the stdio MCP server and the
// window use nothing else.
type Controller interface {
	// Status returns a snapshot.
	Status(ctx context.Context) (Status, error)
	// Subscribe calls fn with every status change, from any goroutine,
	// until cancel is called. fn must not block.
	Subscribe(fn func(Status)) (cancel func())
	// Lifecycle runs op, reporting status changes (with provisioning
	// progress) to onStatus (may be nil) as they happen.
	Lifecycle(ctx context.Context, op Op, onStatus func(sandbox.Status)) (sandbox.Status, error)
	// Quit stops the VM and ends the owner process.
	Quit(ctx context.Context) error
	// Diagnostics runs the standard checks, reporting each as it finishes.
	Diagnostics(ctx context.Context, onResult func(diagnostics.Result)) ([]diagnostics.Result, error)
	// Guest returns the running VM's guest agent; it fails with an
	// agentproto.ErrUnavailable error when the VM is not running. It
	// never starts the VM.
	Guest(ctx context.Context) (*agentproto.Client, error)
	// RunTool runs a sandbox_* tool as an agent (by id) in the owner,
	// under the limits every transport shares, starting the VM when it is
	// stopped. Failures are envelopes.
	RunTool(ctx context.Context, agentID, tool string, args json.RawMessage) envelope.Envelope
	// EndTurn starts a new turn of the agent for the exec limiter.
	EndTurn(ctx context.Context, agentID string) error
	// Close releases the controller (not the VM).
	Close()
}
