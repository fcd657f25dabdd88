package server

import (
	"context"
	"io"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// dataOps registers the handlers of api.DataOps.
func (s *Server) dataOps(m *agentproto.Mux) {
	m.Handle(control.OpMemoryList, agentproto.Unary(func(ctx context.Context, req *control.MemoryQuery) (*control.MemoryList, error) {
		r, err := s.Ctl.Memories(ctx, *req)
		return &r, err
	}))
	m.Handle(control.OpMemoryRemove, agentproto.Unary(func(ctx context.Context, req *control.MemoryRemove) (*control.MemoryRemoved, error) {
		r, err := s.Ctl.RemoveMemory(ctx, *req)
		return &r, err
	}))
	m.Handle(control.OpEventsList, agentproto.Unary(func(ctx context.Context, req *control.EventFilter) (*[]control.Event, error) {
		r, err := s.Ctl.Events(ctx, *req)
		return &r, err
	}))
	m.Handle(control.OpEventsFollow, func(ctx context.Context, c *agentproto.Call) error {
		var f control.EventFilter
		if err := c.Decode(&f); err != nil {
			return err
		}
		// Each event is a stream event; the call ends when the client
		// cancels it (ctx) or goes away (Emit fails).
		err := s.Ctl.FollowEvents(ctx, f, func(e control.Event) error { return c.Emit(e) })
		if err != nil {
			return err
		}
		return c.Respond(agentproto.Empty{})
	})
	m.Handle(control.OpConsoleLog, func(ctx context.Context, c *agentproto.Call) error {
		var req control.ConsoleLogRequest
		if err := c.Decode(&req); err != nil {
			return err
		}
		r, err := s.Ctl.ConsoleLog(ctx, req)
		if err != nil {
			return err
		}
		defer r.Close()
		conn, err := c.Accept()
		if err != nil {
			return err
		}
		// A follower's copy ends when the caller closes the pipe (the
		// write fails) or the call's ctx ends (the reader returns).
		stop := context.AfterFunc(ctx, func() { r.Close() })
		defer stop()
		go func() { io.Copy(io.Discard, conn); r.Close() }() // the caller hung up
		io.Copy(conn, r)
		conn.Close()
		return agentproto.ErrHijacked
	})
	m.Handle(control.OpEventsLast, agentproto.Unary(func(ctx context.Context, _ *agentproto.Empty) (*control.EventsLast, error) {
		id, err := s.Ctl.LastEventID(ctx)
		return &control.EventsLast{ID: id}, err
	}))
	m.Handle(control.OpEventsEmit, agentproto.Unary(func(ctx context.Context, req *control.EventEmit) (*control.Event, error) {
		r, err := s.Ctl.EmitEvent(ctx, *req)
		return &r, err
	}))
	m.Handle(control.OpAgentStores, agentproto.Unary(func(ctx context.Context, req *control.AgentRef) (*control.AgentStores, error) {
		r, err := s.Ctl.AgentStores(ctx, req.Agent)
		return &r, err
	}))
	m.Handle(control.OpAgentLog, agentproto.Unary(func(ctx context.Context, req *control.AgentRef) (*control.AgentLog, error) {
		t, err := s.Ctl.AgentLog(ctx, req.Agent)
		return &control.AgentLog{Text: t}, err
	}))
	m.Handle(control.OpImagePlan, agentproto.Unary(func(ctx context.Context, req *control.ImagePlanRequest) (*control.ImagePlan, error) {
		r, err := s.Ctl.ImagePlan(ctx, *req)
		return &r, err
	}))
	m.Handle(control.OpTaskList, agentproto.Unary(func(ctx context.Context, req *control.TaskQuery) (*[]runner.Task, error) {
		r, err := s.Ctl.Tasks(ctx, *req)
		return &r, err
	}))
	m.Handle(control.OpTaskGet, agentproto.Unary(func(ctx context.Context, req *control.TaskRef) (*runner.Task, error) {
		r, err := s.Ctl.Task(ctx, req.ID)
		return &r, err
	}))
	m.Handle(control.OpTaskCancel, agentproto.Unary(func(ctx context.Context, req *control.TaskRef) (*runner.Task, error) {
		r, err := s.Ctl.CancelTask(ctx, req.ID)
		return &r, err
	}))
	m.Handle(control.OpTaskRun, func(ctx context.Context, c *agentproto.Call) error {
		var req control.TaskRun
		if err := c.Decode(&req); err != nil {
			return err
		}
		t, err := s.Ctl.RunTask(ctx, req, func(t runner.Task) { c.Emit(t) })
		if err != nil {
			return err
		}
		return c.Respond(t)
	})
	m.Handle(control.OpPluginSave, agentproto.Unary(func(ctx context.Context, req *api.PluginSaveRequest) (*api.PluginSaved, error) {
		r, err := s.Ctl.SavePlugin(ctx, *req)
		return &r, err
	}))
	m.Handle(control.OpPluginDuplicate, agentproto.Unary(func(ctx context.Context, req *control.PluginRequest) (*api.PluginSaved, error) {
		r, err := s.Ctl.DuplicatePlugin(ctx, req.Plugin)
		return &r, err
	}))
	m.Handle(control.OpPluginRemove, func(ctx context.Context, c *agentproto.Call) error {
		var req control.PluginRequest
		if err := c.Decode(&req); err != nil {
			return err
		}
		r, err := s.Ctl.RemovePlugin(ctx, req.Plugin, func(line string) { c.Emit(line) })
		if err != nil {
			return err
		}
		return c.Respond(r)
	})
	m.Handle(control.OpSettings, agentproto.Unary(func(ctx context.Context, _ *agentproto.Empty) (*api.SettingsFile, error) {
		r, err := s.Ctl.Settings(ctx)
		return &r, err
	}))
	m.Handle(control.OpSettingsSave, agentproto.Unary(func(ctx context.Context, req *api.SettingsSave) (*api.SettingsFile, error) {
		r, err := s.Ctl.SaveSettings(ctx, *req)
		return &r, err
	}))
	m.Handle(control.OpPreviews, agentproto.Unary(func(ctx context.Context, _ *agentproto.Empty) (*[]api.Preview, error) {
		r, err := s.Ctl.Previews(ctx)
		return &r, err
	}))
	m.Handle(control.OpPluginLibrary, agentproto.Unary(func(ctx context.Context, req *control.PluginLibraryRequest) (*api.PluginLibrary, error) {
		r, err := s.Ctl.PluginLibrary(ctx, *req)
		return &r, err
	}))
	m.Handle(control.OpPluginRepair, agentproto.Unary(func(ctx context.Context, _ *agentproto.Empty) (*api.PluginRepairs, error) {
		r, err := s.Ctl.RepairPlugins(ctx)
		return &r, err
	}))
}
