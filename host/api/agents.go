package api

// AgentOps are the owner's operations on the agents registry and the
// projects: every change to agents.json and projects.json goes through
// them, so the owner is their one writer.
type AgentOps interface {
}
