package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/projects"
)

// AddAgent has the owner add an agent. A home left over is refused with
// an error that is agents.ErrHomeExists, as the owner's own is.
func (c *Client) AddAgent(ctx context.Context, req control.AgentAddRequest) (agents.Agent, error) {
	var a agents.Agent
	err := c.call(ctx, control.OpAgentAdd, req, &a, nil, false)
	if err != nil && req.Home == "" && errors.Is(err, agentproto.ErrExists) {
		err = homeExists{err}
	}
	return a, err
}

// homeExists is the owner's agents.ErrHomeExists as it crossed the
// socket (its class, ErrExists, and its text): adding an agent fails with
// ErrExists for no other reason.
type homeExists struct{ error }

func (e homeExists) Unwrap() error        { return e.error }
func (e homeExists) Is(target error) bool { return target == agents.ErrHomeExists }

// UpdateAgent has the owner change an agent's settings.
func (c *Client) UpdateAgent(ctx context.Context, req control.AgentUpdateRequest) (agents.Agent, error) {
	var a agents.Agent
	err := c.call(ctx, control.OpAgentUpdate, req, &a, nil, false)
	return a, err
}

// GetAgent asks the owner for an agent by id, slug or name.
func (c *Client) GetAgent(ctx context.Context, agent string) (agents.Agent, error) {
	var a agents.Agent
	err := c.call(ctx, control.OpAgentGet, control.AgentRef{Agent: agent}, &a, nil, true)
	return a, err
}

// ListAgents asks the owner for every agent. An owner older than the op
// answers agentproto.ErrUnsupported.
func (c *Client) ListAgents(ctx context.Context) (api.AgentList, error) {
	var l api.AgentList
	err := c.call(ctx, control.OpAgentList, agentproto.Empty{}, &l, nil, true)
	return l, err
}

// RegenerateToken has the owner give the agent a new token.
func (c *Client) RegenerateToken(ctx context.Context, agent string) (string, error) {
	var r control.TokenReply
	err := c.call(ctx, control.OpAgentToken, control.AgentRef{Agent: agent}, &r, nil, false)
	return r.Token, err
}

// SetAgentProjects has the owner grant an agent exactly these projects.
func (c *Client) SetAgentProjects(ctx context.Context, req control.AgentProjectsRequest) (agents.Agent, error) {
	var a agents.Agent
	err := c.call(ctx, control.OpAgentProjects, req, &a, nil, false)
	return a, err
}

// RepairAgents has the owner repair agents.json.
func (c *Client) RepairAgents(ctx context.Context) (agents.RepairResult, error) {
	var r agents.RepairResult
	err := c.call(ctx, control.OpAgentRepair, agentproto.Empty{}, &r, nil, false)
	return r, err
}

// AddProject has the owner record a project.
func (c *Client) AddProject(ctx context.Context, req control.ProjectAddRequest) (projects.Project, error) {
	var p projects.Project
	err := c.call(ctx, control.OpProjectAdd, req, &p, nil, false)
	return p, err
}

// RemoveProject has the owner forget a project.
func (c *Client) RemoveProject(ctx context.Context, name string) error {
	return c.call(ctx, control.OpProjectRemove, control.ProjectRef{Name: name}, nil, nil, false)
}

// ListProjects asks the owner for its projects. An owner older than the
// op answers agentproto.ErrUnsupported.
func (c *Client) ListProjects(ctx context.Context) ([]projects.Project, error) {
	r := []projects.Project{}
	err := c.call(ctx, control.OpProjectList, agentproto.Empty{}, &r, nil, true)
	return r, err
}

// RepairProjects has the owner repair projects.json.
func (c *Client) RepairProjects(ctx context.Context) (projects.RepairResult, error) {
	var r projects.RepairResult
	err := c.call(ctx, control.OpProjectRepair, agentproto.Empty{}, &r, nil, false)
	return r, err
}

// ViewChanges has the owner compute what an agent changed in its view.
func (c *Client) ViewChanges(ctx context.Context, req api.ViewRequest) (*projects.ChangeSet, error) {
	var cs projects.ChangeSet
	if err := c.call(ctx, control.OpViewChanges, req, &cs, nil, false); err != nil {
		return nil, err
	}
	return &cs, nil
}

// ApplyChanges has the owner write a review's changes into the folder.
func (c *Client) ApplyChanges(ctx context.Context, req api.ViewRequest) (*projects.Result, error) {
	return c.viewResult(ctx, control.OpViewApply, req)
}

// DiscardChanges has the owner throw an agent's changes away.
func (c *Client) DiscardChanges(ctx context.Context, req api.ViewRequest) (*projects.Result, error) {
	return c.viewResult(ctx, control.OpViewDiscard, req)
}

// viewResult is an apply or discard: its Result, also when it failed part
// way (the owner sends it first).
func (c *Client) viewResult(ctx context.Context, op string, req api.ViewRequest) (*projects.Result, error) {
	var r, partial *projects.Result
	err := c.call(ctx, op, req, &r, func(raw json.RawMessage) {
		var p projects.Result
		if json.Unmarshal(raw, &p) == nil {
			partial = &p
		}
	}, false)
	if err != nil {
		return partial, err
	}
	return r, nil
}

// UploadProject sends body (a tar, projects.SendUpload) for the owner to
// record as a project. A failure reading body ends the upload at once:
// the owner, missing the tar's end, records nothing.
func (c *Client) UploadProject(ctx context.Context, req control.ProjectUploadRequest, body io.Reader) (projects.Project, error) {
	conn, err := c.openConn(ctx, control.OpProjectUpload, req)
	if err != nil {
		return projects.Project{}, err
	}
	defer conn.Close()
	src := &readErr{r: body}
	if _, err := io.Copy(conn, src); src.err != nil {
		return projects.Project{}, src.err
	} else if err != nil && ctx.Err() != nil {
		return projects.Project{}, ctx.Err()
	}
	// A write that failed because the owner refused part way still
	// leaves its answer to read.
	var reply api.UploadReply
	if err := json.NewDecoder(conn).Decode(&reply); err != nil {
		if ctx.Err() != nil {
			return projects.Project{}, ctx.Err()
		}
		return projects.Project{}, c.lostOr(fmt.Errorf("%s: no answer: %w", control.OpProjectUpload, err))
	}
	if reply.Error != nil {
		return projects.Project{}, &agentproto.RemoteError{Op: control.OpProjectUpload, Code: reply.Error.Code, Message: reply.Error.Message}
	}
	return reply.Project, nil
}

// OpenProjectFile reads a reviewed file of an uploaded project (of the
// agent's view, or the owner's copy); the caller checks its size and
// hash.
func (c *Client) OpenProjectFile(ctx context.Context, req control.ProjectFileRequest) (io.ReadCloser, error) {
	return c.openConn(ctx, control.OpProjectFile, req)
}

// openConn opens a raw pipe call (agentproto.Peer.OpenConn) that ctx
// also cuts.
func (c *Client) openConn(ctx context.Context, op string, req any) (*deadlineConn, error) {
	p, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := p.OpenConn(ctx, op, req)
	if err != nil {
		if errors.Is(err, agentproto.ErrSessionEnded) {
			err = c.lostOr(err)
		}
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	return &deadlineConn{conn, stop}, nil
}

type deadlineConn struct {
	net.Conn
	stop func() bool
}

func (d *deadlineConn) Close() error {
	d.stop()
	return d.Conn.Close()
}

// lostOr is err, as the lost link when the client goes over one.
func (c *Client) lostOr(err error) error {
	if c.via != nil {
		return c.linkLost(err)
	}
	return err
}

type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}
