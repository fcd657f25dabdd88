package control

// Agent checkpoints and fork (api.AgentCheckpointRequest;
// api.AgentCheckpointer).
const (
	OpAgentCheckpointCreate  = "ctl.agent_checkpoint_create"
	OpAgentCheckpointList    = "ctl.agent_checkpoint_list"
	OpAgentCheckpointRestore = "ctl.agent_checkpoint_restore"
	OpAgentCheckpointRemove  = "ctl.agent_checkpoint_remove"
	OpAgentFork              = "ctl.agent_fork"
)
