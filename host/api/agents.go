package api

import (
	"context"
	"io"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/projects"
)

// AgentOps are the owner's operations on the agents registry and the
// projects: every change to agents.json and projects.json goes through
// them, so the owner is their one writer. Other processes read the files
// (agents.Open, projects.Load) and never write them. Removing an agent is
// Controller.RemoveAgent.
type AgentOps interface {
	// AddAgent adds an agent with default settings, keeping or deleting a
	// left-over home only when asked (agents.Registry.AddWith).
	AddAgent(ctx context.Context, req control.AgentAddRequest) (agents.Agent, error)
	// UpdateAgent changes an agent's settings, validated as the registry
	// validates every change (names that fold to another agent's slug, ids
	// and slugs that can't change, limits).
	UpdateAgent(ctx context.Context, req control.AgentUpdateRequest) (agents.Agent, error)
	// GetAgent is the agent named by id, slug or name as the owner's
	// registry has it: a process on another machine (a remote context's
	// `agent connect`) has no agents.json of its own to read.
	GetAgent(ctx context.Context, agent string) (agents.Agent, error)
	// ListAgents is every agent, with each one's disk use, as the owner
	// has them: a remote context's `agent list` and `agent show` read
	// the far side's registry and disks, not this machine's.
	ListAgents(ctx context.Context) (AgentList, error)
	// RegenerateToken gives the agent a new MCP token; the old one stops
	// working at once.
	RegenerateToken(ctx context.Context, agent string) (string, error)
	// SetAgentProjects grants an agent exactly the projects named.
	SetAgentProjects(ctx context.Context, req control.AgentProjectsRequest) (agents.Agent, error)
	// RepairAgents rewrites a damaged agents.json (agents.Repair).
	RepairAgents(ctx context.Context) (agents.RepairResult, error)

	// AddProject records a folder as a project.
	AddProject(ctx context.Context, req control.ProjectAddRequest) (projects.Project, error)
	// UploadProject records the folder another machine sends (a tar,
	// projects.SendUpload) as a project whose copy is the owner's: the
	// remote context's user's folder never is this machine's.
	UploadProject(ctx context.Context, req control.ProjectUploadRequest, body io.Reader) (projects.Project, error)
	// OpenProjectFile is a file of req.Agent's view of an uploaded
	// project (without an agent, of the owner's copy), once it is the
	// size and hash asked for: a remote apply writes it into the other
	// machine's folder before the owner applies it. Projects of this
	// machine's folders are refused.
	OpenProjectFile(ctx context.Context, req control.ProjectFileRequest) (io.ReadCloser, error)
	// RemoveProject forgets a project no agent is granted (and deletes
	// an uploaded one's copy).
	RemoveProject(ctx context.Context, name string) error
	// ListProjects is every project as the owner's projects.json has
	// them: a remote context's `project list` reads the far side's.
	ListProjects(ctx context.Context) ([]projects.Project, error)
	// RepairProjects rewrites a damaged projects.json (projects.Repair).
	RepairProjects(ctx context.Context) (projects.RepairResult, error)

	// ViewChanges is what the agent changed in its view of the project,
	// recorded as a review Apply takes.
	ViewChanges(ctx context.Context, req ViewRequest) (*projects.ChangeSet, error)
	// ApplyChanges writes a review's changes into the user's folder;
	// DiscardChanges throws changes away. Both may return a Result with
	// an error: what was done before it.
	ApplyChanges(ctx context.Context, req ViewRequest) (*projects.Result, error)
	DiscardChanges(ctx context.Context, req ViewRequest) (*projects.Result, error)
}

// AgentList is the agents in the registry's order, and the size of each
// one's home by slug (the owner's latest measure, else one walk).
type AgentList struct {
	Agents   []agents.Agent   `json:"agents"`
	DiskUsed map[string]int64 `json:"diskUsedBytes"`
}

// ViewRequest names an agent's view of a project: the agent (an id, slug
// or name) must be granted it or still hold it. Apply says what
// ApplyChanges writes, Paths what DiscardChanges throws away (empty:
// everything).
type ViewRequest struct {
	Agent   string                `json:"agent"`
	Project string                `json:"project"`
	Apply   projects.ApplyOptions `json:"apply"`
	Paths   []string              `json:"paths,omitempty"`
}

// UploadReply ends an upload's pipe: the project, or why not.
type UploadReply struct {
	Project projects.Project      `json:"project"`
	Error   *agentproto.WireError `json:"error,omitempty"`
}
