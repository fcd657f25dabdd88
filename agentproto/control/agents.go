package control

// The owner's operations on the agents registry and the projects
// (api.AgentOps): the owner is the one process that writes agents.json,
// projects.json and the agents' project views.
const (
	OpAgentAdd      = "ctl.agent_add"      // AgentAddRequest → agents.Agent
	OpAgentUpdate   = "ctl.agent_update"   // AgentUpdateRequest → agents.Agent
	OpAgentGet      = "ctl.agent_get"      // AgentRef → agents.Agent
	OpAgentList     = "ctl.agent_list"     // agentproto.Empty → api.AgentList
	OpAgentToken    = "ctl.agent_token"    // AgentRef → TokenReply (a new token)
	OpAgentProjects = "ctl.agent_projects" // AgentProjectsRequest → agents.Agent
	OpAgentRepair   = "ctl.agent_repair"   // agentproto.Empty → agents.RepairResult
	OpProjectAdd    = "ctl.project_add"    // ProjectAddRequest → projects.Project
	OpProjectRemove = "ctl.project_remove" // ProjectRef → agentproto.Empty
	OpProjectRepair = "ctl.project_repair" // agentproto.Empty → projects.RepairResult
	OpProjectList   = "ctl.project_list"   // agentproto.Empty → []projects.Project
	// An agent's view of a project (api.ViewRequest): what it changed,
	// and writing it into the user's folder or throwing it away. Apply and
	// discard that fail part way emit their projects.Result first.
	OpViewChanges = "ctl.view_changes" // → projects.ChangeSet
	OpViewApply   = "ctl.view_apply"   // → projects.Result
	OpViewDiscard = "ctl.view_discard" // → projects.Result
	// A project of another machine (a remote context's `project add`):
	// after the request the stream is a raw pipe carrying the folder as
	// a tar (projects.SendUpload), answered by one api.UploadReply line.
	OpProjectUpload = "ctl.project_upload" // ProjectUploadRequest
	// OpProjectFile answers with a raw pipe carrying a file of an
	// uploaded project's copy, once it is the reviewed one: what a
	// remote context's `apply` writes into the user's own folder.
	OpProjectFile = "ctl.project_file" // ProjectFileRequest
)

// What AgentAddRequest.Home does with a home a removed agent of the same
// name left behind: "" refuses it (agents.ErrHomeExists).
const (
	HomeAdopt = "adopt" // give it and its files to the new agent
	HomePurge = "purge" // delete it first
)

// AgentAddRequest adds an agent named Name.
type AgentAddRequest struct {
	Name string `json:"name"`
	Home string `json:"home,omitempty"` // "", HomeAdopt or HomePurge
}

// Setting is one agent setting as `osaurus-sandbox agent set` takes it.
type Setting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// AgentUpdateRequest changes Agent's (an id, slug or name) settings, in
// order, all or none. dispatchTo's value names agents (comma-separated
// ids, slugs or names, or "none"), stored by id.
type AgentUpdateRequest struct {
	Agent    string    `json:"agent"`
	Settings []Setting `json:"settings"`
}

// AgentRef names an agent by id, slug or name.
type AgentRef struct {
	Agent string `json:"agent"`
}

// TokenReply is an agent's new MCP bearer token.
type TokenReply struct {
	Token string `json:"token"`
}

// AgentProjectsRequest grants Agent exactly Projects (by name): views of
// newly granted ones are taken, views of those taken away dropped
// (refused while they hold changes).
type AgentProjectsRequest struct {
	Agent    string   `json:"agent"`
	Projects []string `json:"projects"`
}

// ProjectAddRequest adds the folder Path (absolute: the owner's working
// folder is not the caller's) as project Name ("" for its folder's name).
type ProjectAddRequest struct {
	Path string `json:"path"`
	Name string `json:"name,omitempty"`
}

// ProjectRef names a project.
type ProjectRef struct {
	Name string `json:"name"`
}

// ProjectUploadRequest adds the folder that follows as project Name.
// From describes the uploading machine's folder, shown only.
type ProjectUploadRequest struct {
	Name string `json:"name"`
	From string `json:"from"`
}

// ProjectFileRequest asks for Path of uploaded project Project, which
// must be Size bytes of SHA-256 Hash: from agent Agent's view of it (the
// changed file, which the uploading machine writes before the owner
// applies it), or, with no Agent, from the owner's copy (what a command
// line that applied on the owner first asked for).
type ProjectFileRequest struct {
	Agent   string `json:"agent,omitempty"`
	Project string `json:"project"`
	Path    string `json:"path"`
	Hash    string `json:"sha256"`
	Size    int64  `json:"size"`
}
