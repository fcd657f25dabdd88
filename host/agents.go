package host

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/diskquota"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/projects"
)

// The owner's api.AgentOps: the one writer of agents.json, projects.json
// and the agents' project views. The registry in memory is the file's
// truth, so nothing here or in the tools re-reads it.

var _ api.AgentOps = (*Host)(nil)

// AddAgent adds an agent (agents.Registry.AddWith) whose home may be left
// over in the workspace.
func (h *Host) AddAgent(ctx context.Context, req control.AgentAddRequest) (agents.Agent, error) {
	o := agents.AddOptions{Workspace: h.paths.Workspace()}
	switch req.Home {
	case "":
	case control.HomeAdopt:
		o.Home = agents.HomeAdopt
	case control.HomePurge:
		o.Home = agents.HomePurge
	default:
		return agents.Agent{}, &agents.ValidationError{Field: "home", Got: fmt.Sprintf("%q", req.Home), Want: `"", "adopt" or "purge"`}
	}
	return h.reg.AddWith(req.Name, o)
}

// UpdateAgent applies req's settings to one copy of the agent, stored
// only when every one of them is valid.
func (h *Host) UpdateAgent(ctx context.Context, req control.AgentUpdateRequest) (agents.Agent, error) {
	// dispatchTo names agents: resolved to ids before the change.
	dispatch := map[int][]string{}
	for i, s := range req.Settings {
		switch s.Key {
		case "dispatchTo":
			ids, err := h.dispatchIDs(s.Value)
			if err != nil {
				return agents.Agent{}, err
			}
			dispatch[i] = ids
		case "projects":
			return agents.Agent{}, &agents.ValidationError{Field: "key", Got: `"projects"`, Want: "a grant through SetAgentProjects, which takes the views"}
		}
	}
	return h.reg.Update(req.Agent, func(a *agents.Agent) error {
		for i, s := range req.Settings {
			if ids, ok := dispatch[i]; ok {
				if slices.Contains(ids, a.ID) {
					return &agents.ValidationError{Field: "dispatchTo", Got: a.Name, Want: "other agents (an agent may always dispatch to itself)"}
				}
				a.DispatchTo = ids
				continue
			}
			if err := a.Set(s.Key, s.Value); err != nil {
				return err
			}
		}
		return nil
	})
}

// dispatchIDs resolves dispatchTo's comma-separated agents to their ids.
func (h *Host) dispatchIDs(value string) ([]string, error) {
	ids := []string{}
	if v := strings.TrimSpace(value); v != "" && v != "none" {
		for n := range strings.SplitSeq(v, ",") {
			if n = strings.TrimSpace(n); n == "" {
				continue
			}
			t, err := h.reg.Get(n)
			if err != nil {
				return nil, fmt.Errorf("dispatchTo: %q: %w (`osaurus-sandbox agent list` shows the agents)", n, err)
			}
			if !slices.Contains(ids, t.ID) {
				ids = append(ids, t.ID)
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return ids, nil
}

// GetAgent is the agent named by id, slug or name.
func (h *Host) GetAgent(ctx context.Context, agent string) (agents.Agent, error) {
	return h.reg.Get(agent)
}

// ListAgents is every agent with its disk use.
func (h *Host) ListAgents(ctx context.Context) (api.AgentList, error) {
	list := h.reg.List()
	p := h.paths
	return api.AgentList{Agents: list, DiskUsed: diskquota.Latest(p.DiskUsageFile(), p.Workspace(), p.Output(), list)}, nil
}

// RegenerateToken replaces the agent's MCP token.
func (h *Host) RegenerateToken(ctx context.Context, agent string) (string, error) {
	return h.reg.RegenerateToken(agent)
}

// SetAgentProjects grants the agent exactly req.Projects: views of newly
// granted ones are taken before the grant is saved, views of projects
// taken away are dropped first, refused while they hold changes.
func (h *Host) SetAgentProjects(ctx context.Context, req control.AgentProjectsRequest) (agents.Agent, error) {
	a, err := h.reg.Get(req.Agent)
	if err != nil {
		return a, err
	}
	var want []string
	for _, n := range req.Projects {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(want, n) {
			want = append(want, n)
		}
	}
	v := projects.Views{Paths: h.paths}
	var grant []projects.Project
	for _, n := range want {
		p, err := projects.Get(h.paths.ProjectsJSON(), n)
		if err != nil {
			return a, fmt.Errorf("projects: %w", err)
		}
		grant = append(grant, p)
	}
	for _, n := range a.Projects {
		if slices.Contains(want, n) {
			continue
		}
		p, err := projects.Get(h.paths.ProjectsJSON(), n)
		if err != nil {
			p = projects.Project{Name: n}
		}
		if err := v.Drop(ctx, a, p, false); err != nil {
			return a, err
		}
	}
	for _, p := range grant {
		if err := v.Ensure(ctx, a, p); err != nil {
			return a, err
		}
	}
	return h.reg.Update(a.ID, func(a *agents.Agent) error { a.Projects = want; return nil })
}

// RepairAgents rewrites a damaged agents.json and reads it again.
func (h *Host) RepairAgents(ctx context.Context) (agents.RepairResult, error) {
	r, err := agents.Repair(h.paths.AgentsJSON())
	if err != nil {
		return r, err
	}
	return r, h.reg.Reload()
}

// AddProject records req.Path as a project.
func (h *Host) AddProject(ctx context.Context, req control.ProjectAddRequest) (projects.Project, error) {
	return projects.Add(h.paths.ProjectsJSON(), req.Path, req.Name, h.paths.Root)
}

// UploadProject records the folder another machine sends as a project.
func (h *Host) UploadProject(ctx context.Context, req control.ProjectUploadRequest, body io.Reader) (projects.Project, error) {
	return projects.ReceiveUpload(ctx, body, h.paths.ProjectsJSON(), h.paths.Root, req.Name, req.From)
}

// OpenProjectFile is a reviewed file of an uploaded project: the
// changed file of req.Agent's view (the agent must hold the project, as
// for its changes), or without an agent the owner's copy's.
func (h *Host) OpenProjectFile(ctx context.Context, req control.ProjectFileRequest) (io.ReadCloser, error) {
	if req.Agent != "" {
		a, p, err := h.view(api.ViewRequest{Agent: req.Agent, Project: req.Project})
		if err != nil {
			return nil, err
		}
		f, err := projects.Views{Paths: h.paths}.OpenChanged(ctx, a, p, req.Path, req.Hash, req.Size)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	p, err := projects.Get(h.paths.ProjectsJSON(), req.Project)
	if err != nil {
		return nil, err
	}
	return projects.OpenUploaded(ctx, p, req.Path, req.Hash, req.Size)
}

// RemoveProject forgets a project no agent is granted; an uploaded
// one's copy goes with it.
func (h *Host) RemoveProject(ctx context.Context, name string) error {
	p, err := projects.Get(h.paths.ProjectsJSON(), name)
	if err != nil {
		return err
	}
	if err := projects.Remove(h.paths.ProjectsJSON(), name, h.reg.List()); err != nil {
		return err
	}
	return projects.RemoveUpload(p, h.paths.Root)
}

// view resolves req's agent and project: the agent must be granted the
// project or still hold a view of it.
func (h *Host) view(req api.ViewRequest) (agents.Agent, projects.Project, error) {
	a, err := h.reg.Get(req.Agent)
	if err != nil {
		return agents.Agent{}, projects.Project{}, err
	}
	p, err := projects.Get(h.paths.ProjectsJSON(), req.Project)
	if err != nil {
		return agents.Agent{}, projects.Project{}, err
	}
	if !slices.Contains(a.Projects, p.Name) && !(projects.Views{Paths: h.paths}).Has(a, p.Name) {
		return agents.Agent{}, projects.Project{}, fmt.Errorf("%w: %s has not been granted %q", projects.ErrNotGranted, a.Name, p.Name)
	}
	return a, p, nil
}

// ViewChanges computes and records what the agent changed in its view.
func (h *Host) ViewChanges(ctx context.Context, req api.ViewRequest) (*projects.ChangeSet, error) {
	a, p, err := h.view(req)
	if err != nil {
		return nil, err
	}
	return projects.Views{Paths: h.paths}.Changes(ctx, a, p)
}

// ApplyChanges writes a review's changes into the user's folder, after
// the automatic checkpoint of the sandbox (safetyCheckpoints) that every
// front end's apply gets.
func (h *Host) ApplyChanges(ctx context.Context, req api.ViewRequest) (*projects.Result, error) {
	a, p, err := h.view(req)
	if err != nil {
		return nil, err
	}
	m, err := h.safetyCheckpoint(ctx, fmt.Sprintf("apply of %s's changes to %s", a.Slug, p.Name))
	if err != nil {
		return nil, err
	}
	r, err := projects.Views{Paths: h.paths}.Apply(ctx, a, p, req.Apply)
	if r != nil {
		r.Checkpoint = m.Name
	}
	return r, err
}

// DiscardChanges throws the agent's changes to req.Paths away.
func (h *Host) DiscardChanges(ctx context.Context, req api.ViewRequest) (*projects.Result, error) {
	a, p, err := h.view(req)
	if err != nil {
		return nil, err
	}
	return projects.Views{Paths: h.paths}.Discard(ctx, a, p, req.Paths)
}

// RepairProjects rewrites a damaged projects.json.
func (h *Host) RepairProjects(ctx context.Context) (projects.RepairResult, error) {
	return projects.Repair(h.paths.ProjectsJSON())
}
