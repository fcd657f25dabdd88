package bridge

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/tools/limit"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// Dispatcher runs dispatched tasks (runner.TaskRunner).
type Dispatcher interface {
	Dispatch(caller, target, task string) (runner.Task, error)
	Wait(ctx context.Context, id string, d time.Duration) (runner.Task, error)
}

// MaxTaskWait bounds one GET /api/agent/tasks/{id}?wait=S; osaurus-host
// asks again until the task ends.
const MaxTaskWait = 120 * time.Second

// dispatch is POST /api/agent/dispatch {task, agent_id?} → {"task_id"}.
// The task runs in the background.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) {
	if s.o.Dispatch == nil {
		writeError(w, http.StatusServiceUnavailable, "the agent runner is not available in this app")
		return
	}
	var body struct {
		Task    string `json:"task"`
		AgentID string `json:"agent_id"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if strings.TrimSpace(body.Task) == "" {
		writeError(w, http.StatusBadRequest, `request body needs a non-empty "task"`)
		return
	}
	if n := len(body.Task); n > runner.MaxTaskLen {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the task is %d bytes, over the limit of %d (runner.MaxTaskLen)", n, runner.MaxTaskLen))
		return
	}
	agent := agentOf(r)
	if !s.allow(w, agent, limit.ServiceDispatch) {
		return
	}
	t, err := s.o.Dispatch.Dispatch(agent, body.AgentID, body.Task)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]string{"task_id": t.ID, "agent": t.Agent})
	case StatusOf(err) == http.StatusInternalServerError:
		writeError(w, http.StatusInternalServerError, "dispatch: "+err.Error())
	default:
		writeError(w, StatusOf(err), inferenceError(err))
	}
}

// task is GET /api/agent/tasks/{id}[?wait=SECONDS]: a task the caller runs
// or dispatched {task_id, agent, dispatched_by, state, answer, error,
// steps}, after waiting up to SECONDS (at most 120) for it to finish. Any
// other task is not found.
func (s *Server) task(w http.ResponseWriter, r *http.Request) {
	if s.o.Dispatch == nil {
		writeError(w, http.StatusServiceUnavailable, "the agent runner is not available in this app")
		return
	}
	id := r.PathValue("id")
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("wait: %q, want whole seconds (at most %d)", v, int(MaxTaskWait.Seconds())))
			return
		}
		wait = min(time.Duration(n)*time.Second, MaxTaskWait)
	}
	agent := agentOf(r)
	// Check ownership before waiting, so nobody can wait on others' tasks.
	t, err := s.o.Dispatch.Wait(r.Context(), id, 0)
	if err == nil && t.VisibleTo(agent) && wait > 0 {
		t, err = s.o.Dispatch.Wait(r.Context(), id, wait)
	}
	if err != nil || !t.VisibleTo(agent) {
		writeError(w, http.StatusNotFound, "no task "+strconv.Quote(id)+" of yours")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"task_id": t.ID, "agent": t.Agent, "dispatched_by": t.DispatchedBy,
		"state": t.State, "answer": t.Answer, "error": t.Error, "steps": len(t.Steps)})
}
