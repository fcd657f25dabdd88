package server

import (
	"context"
	"encoding/json"
	"io"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/projects"
)

// agentOps registers the handlers of api.AgentOps.
func (s *Server) agentOps(m *agentproto.Mux) {
	m.Handle(control.OpAgentAdd, agentproto.Unary(func(ctx context.Context, req *control.AgentAddRequest) (*agents.Agent, error) {
		a, err := s.Ctl.AddAgent(ctx, *req)
		return &a, err
	}))
	m.Handle(control.OpAgentUpdate, agentproto.Unary(func(ctx context.Context, req *control.AgentUpdateRequest) (*agents.Agent, error) {
		a, err := s.Ctl.UpdateAgent(ctx, *req)
		return &a, err
	}))
	m.Handle(control.OpAgentGet, agentproto.Unary(func(ctx context.Context, req *control.AgentRef) (*agents.Agent, error) {
		a, err := s.Ctl.GetAgent(ctx, req.Agent)
		return &a, err
	}))
	m.Handle(control.OpAgentList, agentproto.Unary(func(ctx context.Context, _ *agentproto.Empty) (*api.AgentList, error) {
		l, err := s.Ctl.ListAgents(ctx)
		return &l, err
	}))
	m.Handle(control.OpAgentToken, agentproto.Unary(func(ctx context.Context, req *control.AgentRef) (*control.TokenReply, error) {
		tok, err := s.Ctl.RegenerateToken(ctx, req.Agent)
		return &control.TokenReply{Token: tok}, err
	}))
	m.Handle(control.OpAgentProjects, agentproto.Unary(func(ctx context.Context, req *control.AgentProjectsRequest) (*agents.Agent, error) {
		a, err := s.Ctl.SetAgentProjects(ctx, *req)
		return &a, err
	}))
	m.Handle(control.OpAgentRepair, agentproto.Unary(func(ctx context.Context, _ *agentproto.Empty) (*agents.RepairResult, error) {
		r, err := s.Ctl.RepairAgents(ctx)
		return &r, err
	}))
	m.Handle(control.OpProjectAdd, agentproto.Unary(func(ctx context.Context, req *control.ProjectAddRequest) (*projects.Project, error) {
		p, err := s.Ctl.AddProject(ctx, *req)
		return &p, err
	}))
	m.Handle(control.OpProjectRemove, agentproto.Unary(func(ctx context.Context, req *control.ProjectRef) (*agentproto.Empty, error) {
		return &agentproto.Empty{}, s.Ctl.RemoveProject(ctx, req.Name)
	}))
	m.Handle(control.OpViewChanges, agentproto.Unary(func(ctx context.Context, req *api.ViewRequest) (*projects.ChangeSet, error) {
		return s.Ctl.ViewChanges(ctx, *req)
	}))
	for op, run := range map[string]func(context.Context, api.ViewRequest) (*projects.Result, error){
		control.OpViewApply: s.Ctl.ApplyChanges, control.OpViewDiscard: s.Ctl.DiscardChanges,
	} {
		m.Handle(op, func(ctx context.Context, c *agentproto.Call) error {
			var req api.ViewRequest
			if err := c.Decode(&req); err != nil {
				return err
			}
			r, err := run(ctx, req)
			if err != nil {
				if r != nil {
					c.Emit(r) // what was done before the failure
				}
				return err
			}
			return c.Respond(r)
		})
	}
	m.Handle(control.OpProjectUpload, func(ctx context.Context, c *agentproto.Call) error {
		var req control.ProjectUploadRequest
		if err := c.Decode(&req); err != nil {
			return err
		}
		conn, err := c.Accept()
		if err != nil {
			return err
		}
		p, err := s.Ctl.UploadProject(ctx, req, conn)
		json.NewEncoder(conn).Encode(api.UploadReply{Project: p, Error: agentproto.ToWire(err)})
		return agentproto.ErrHijacked
	})
	m.Handle(control.OpProjectFile, func(ctx context.Context, c *agentproto.Call) error {
		var req control.ProjectFileRequest
		if err := c.Decode(&req); err != nil {
			return err
		}
		f, err := s.Ctl.OpenProjectFile(ctx, req)
		if err != nil {
			return err
		}
		defer f.Close()
		conn, err := c.Accept()
		if err != nil {
			return err
		}
		// The caller checks size and hash: a cut-short copy is refused
		// there.
		io.Copy(conn, f)
		return agentproto.ErrHijacked
	})
	m.Handle(control.OpProjectList, agentproto.Unary(func(ctx context.Context, _ *agentproto.Empty) (*[]projects.Project, error) {
		r, err := s.Ctl.ListProjects(ctx)
		return &r, err
	}))
	m.Handle(control.OpProjectRepair, agentproto.Unary(func(ctx context.Context, _ *agentproto.Empty) (*projects.RepairResult, error) {
		r, err := s.Ctl.RepairProjects(ctx)
		return &r, err
	}))
}
