// Package control is the host-local control protocol: how the CLI, the
// stdio MCP server and the window reach the one process that owns a data
// folder's VM, over its unix socket (config.Paths.ControlSocket). It
// shares agentproto's framing and multiplexed sessions (agentproto.Peer);
// its operations are the "ctl.*" ones below, answered by the owner
// itself. The few guest operations in Relayed pass through the owner to
// the guest agent unchanged; any other is refused.
package control

import (
	"encoding/json"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// Lifecycle operations.
const (
	OpProvision = "ctl.provision"
	OpStart     = "ctl.start"
	OpStop      = "ctl.stop"
	OpReset     = "ctl.reset"
	OpRemove    = "ctl.remove"
	OpSuspend   = "ctl.suspend" // pause the VM in place
	OpResume    = "ctl.resume"
)

// The owner's other operations.
const (
	OpStatus      = "ctl.status"
	OpWatch       = "ctl.watch" // a stream of status events until cancelled
	OpDiagnostics = "ctl.diagnostics"
	OpQuit        = "ctl.quit"    // stop the VM and end the owner process
	OpTool        = "ctl.tool"    // run a tool in the owner (ToolRequest)
	OpEndTurn     = "ctl.endturn" // EndTurnRequest
	// OpRemoveAgent removes an agent: its registry entry, what the owner
	// keeps for it and its Linux user (api.RemoveAgentRequest).
	OpRemoveAgent = "ctl.agent_remove"
	// OpClosePorts closes agents' previews (sandbox_expose_port).
	OpClosePorts = "ctl.ports_close"
	// Sandbox checkpoints (api.CheckpointRequest; api.Checkpointer).
	OpCheckpointCreate  = "ctl.checkpoint_create"
	OpCheckpointList    = "ctl.checkpoint_list"
	OpCheckpointRestore = "ctl.checkpoint_restore"
	OpCheckpointRemove  = "ctl.checkpoint_remove"
	// Plugin installs go through the owner's one tools environment.
	OpPluginInstall      = "ctl.plugin_install"       // api.PluginInstallRequest; events: install steps
	OpPluginUninstall    = "ctl.plugin_uninstall"     // api.PluginUninstallRequest
	OpPluginUninstallAll = "ctl.plugin_uninstall_all" // PluginRequest; events: report lines
	// OpShell opens a terminal in the VM (ShellRequest): the owner builds
	// the exec an agent's tool call would get (user, network, limits,
	// private /tmp) and relays it with the terminal's frames; it answers
	// as agentproto's exec does. Only the control socket, the user's own,
	// offers it: no tool and no bridge route reaches it.
	OpShell = "ctl.shell"
	// OpSecretsProvide is a front end offering its machine's secrets to
	// an owner whose secretStore is "client" (agentproto.Empty): the owner
	// accepts, and the stream becomes a pipe of JSON lines for as long as
	// the front end stays: the owner's secrets.ClientRequest, the front
	// end's secrets.ClientAnswer.
	OpSecretsProvide = "ctl.secrets_provide"
)

// ShellRequest is OpShell's request.
type ShellRequest struct {
	// Agent is the agent (id, slug or name) whose Linux user, namespaces
	// and limits the shell gets; empty: a root shell for the VM's owner.
	Agent string `json:"agent,omitempty"`
	// Workdir is the starting directory (default: the home).
	Workdir string `json:"workdir,omitempty"`
	// Argv runs one command instead of a login shell.
	Argv []string `json:"argv,omitempty"`
	// Term is the user's $TERM (default xterm-256color).
	Term string `json:"term,omitempty"`
	// Size is the terminal's size; zero rows or columns: 24x80.
	Size agentproto.Winsize `json:"size"`
}

// Relayed are the guest operations a client may send through the owner:
// the handshake, a command with its streams, the refusal log and the
// agents' resource use. Nothing that changes users or files is relayed:
// the owner does that itself, so its record of the guest stays true.
var Relayed = map[string]bool{
	agentproto.OpHello:  true,
	agentproto.OpExec:   true,
	agentproto.OpNetLog: true,
	agentproto.OpUsage:  true,
}

// DiagnosticsRequest is OpDiagnostics's request.
type DiagnosticsRequest struct {
	// Agent, when set (an id, slug or name), limits the agent-user check
	// to that agent; otherwise it runs as every agent.
	Agent string `json:"agent,omitempty"`
}

// ToolRequest is OpTool's request.
type ToolRequest struct {
	Agent string          `json:"agent"` // id
	Tool  string          `json:"tool"`
	Args  json.RawMessage `json:"args,omitempty"`
}

// ToolReply is OpTool's answer: the envelope's JSON, carried as JSON (not
// as a string holding it), so it is encoded once and not escaped.
type ToolReply struct {
	Envelope json.RawMessage `json:"envelope"`
}

// EndTurnRequest is OpEndTurn's request.
type EndTurnRequest struct {
	Agent string `json:"agent"`
}

// PluginRequest names a library plugin (OpPluginUninstallAll).
type PluginRequest struct {
	Plugin string `json:"plugin"`
}

// UninstallReply is OpPluginUninstall's answer: Deferred says why the
// plugin's folder waits for the VM ("" when it is gone).
type UninstallReply struct {
	Deferred string `json:"deferred,omitempty"`
}
