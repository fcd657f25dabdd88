package runner

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// Task states.
const (
	Running     = "running"
	Done        = "done"        // the model answered without a tool call
	Failed      = "failed"      // the model server failed, or a budget ran out
	Cancelled   = "cancelled"   // the user (or the agent) cancelled it
	Interrupted = "interrupted" // the process working it ended first
)

// Task is one task of the runner, as persisted.
type Task struct {
	ID      string    `json:"id"`
	Agent   string    `json:"agent"` // slug
	Task    string    `json:"task"`
	Source  string    `json:"source"` // dispatch (from the guest), cli, app
	State   string    `json:"state"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Steps   []Step    `json:"steps"`
	Answer  string    `json:"answer,omitempty"`
	Error   string    `json:"error,omitempty"`
	// PID is the process working the task, to tell a live task from one
	// whose process is gone.
	PID int `json:"pid"`
	// DispatchedBy is the agent (slug) that dispatched the task to Agent,
	// when that is another agent; both may read it.
	DispatchedBy string `json:"dispatchedBy,omitempty"`
	// Depth is how many dispatches to another agent led to the task
	// (0: started by the user or the agent itself); see MaxDispatchDepth.
	Depth int `json:"depth,omitempty"`
}

// VisibleTo reports whether agent (a slug) may read the task: the agent it
// runs as, and the agent that dispatched it.
func (t Task) VisibleTo(agent string) bool {
	return agent != "" && (t.Agent == agent || t.DispatchedBy == agent)
}

// Finished reports whether the task reached a final state.
func (t Task) Finished() bool { return t.State != Running }

// clone copies t deeply, so a copy handed out doesn't change with t.
func (t Task) clone() Task {
	t.Steps = slices.Clone(t.Steps)
	for i := range t.Steps {
		t.Steps[i].ToolCalls = slices.Clone(t.Steps[i].ToolCalls)
	}
	return t
}

// Step is one model turn: what it said and the tools it called.
type Step struct {
	N         int        `json:"n"`
	Time      time.Time  `json:"time"`
	Content   string     `json:"content,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is one tool call and, once it ran, its envelope.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Result    string `json:"result,omitempty"` // the envelope JSON
	OK        bool   `json:"ok"`
	Done      bool   `json:"done"`
}

// Errors.
var (
	ErrNotFound = agentproto.Class(agentproto.ErrNotFound, "no such task")
)

// MaxStored bounds what a task file keeps of one text (arguments, result,
// answer); the model saw the whole.
const MaxStored = 64 << 10

var idRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

// ValidID reports whether id has the form of a task id (so it is safe
// as a file name).
func ValidID(id string) bool { return idRE.MatchString(id) }

func newID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return hex.EncodeToString(b[:])
}

// Store keeps tasks as one JSON file each, written atomically.
type Store struct{ Dir string }

func (s *Store) file(id string) string       { return filepath.Join(s.Dir, id+".json") }
func (s *Store) cancelFile(id string) string { return filepath.Join(s.Dir, id+".cancel") }

// Save writes a task.
func (s *Store) Save(t Task) error {
	if !ValidID(t.ID) {
		return fmt.Errorf("%w: bad id %q", ErrNotFound, t.ID)
	}
	t = t.clone()
	t.Answer = clip(t.Answer)
	for i := range t.Steps {
		t.Steps[i].Content = clip(t.Steps[i].Content)
		for j := range t.Steps[i].ToolCalls {
			c := &t.Steps[i].ToolCalls[j]
			c.Arguments, c.Result = clip(c.Arguments), clip(c.Result)
		}
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(s.file(t.ID), append(b, '\n'), 0o600)
}

// Get reads a task. A running task whose process is gone is marked
// interrupted (and saved so).
func (s *Store) Get(id string) (Task, error) {
	if !ValidID(id) {
		return Task{}, fmt.Errorf("%w: %q (task ids are 16 hex digits; see `osaurus-sandbox task list`)", ErrNotFound, id)
	}
	b, err := os.ReadFile(s.file(id))
	if errors.Is(err, os.ErrNotExist) {
		return Task{}, fmt.Errorf("%w: %s (see `osaurus-sandbox task list`)", ErrNotFound, id)
	}
	if err != nil {
		return Task{}, err
	}
	var t Task
	if err := json.Unmarshal(b, &t); err != nil {
		return Task{}, fmt.Errorf("task %s: %s is corrupt: %w", id, s.file(id), err)
	}
	if t.State == Running && !alive(t.PID) {
		s.interrupt(&t, "the process working this task ended before it finished")
	}
	return t, nil
}

func (s *Store) interrupt(t *Task, why string) {
	t.State, t.Error, t.Updated = Interrupted, why, time.Now().UTC()
	s.Save(*t)
	os.Remove(s.cancelFile(t.ID))
}

// List returns every task, newest first; agent, when set, keeps that
// agent's only.
func (s *Store) List(agent string) ([]Task, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Task
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !ValidID(id) {
			continue
		}
		t, err := s.Get(id)
		if err != nil {
			continue // a half-deleted or foreign file
		}
		if agent == "" || t.Agent == agent {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// MaxTasksPerAgent is how many task records an agent keeps on the host:
// starting one more forgets its oldest finished ones.
const MaxTasksPerAgent = 100

// Prune deletes agent's oldest finished tasks until at most keep remain;
// running ones stay.
func (s *Store) Prune(agent string, keep int) error {
	ts, err := s.List(agent)
	if err != nil {
		return err
	}
	var errs []error
	for i := len(ts) - 1; i >= 0 && len(ts) > keep; i-- { // oldest last
		if !ts[i].Finished() {
			continue
		}
		if err := os.Remove(s.file(ts[i].ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		os.Remove(s.cancelFile(ts[i].ID))
		ts = append(ts[:i], ts[i+1:]...)
	}
	return errors.Join(errs...)
}

// RequestCancel asks the process working a task to stop it. A task whose
// process is gone is simply marked cancelled.
func (s *Store) RequestCancel(id string) (Task, error) {
	t, err := s.Get(id)
	if err != nil || t.Finished() {
		return t, err
	}
	if err := atomicfile.WriteFile(s.cancelFile(id), nil, 0o600); err != nil {
		return t, err
	}
	return t, nil
}

// cancelRequested reports whether RequestCancel was called for id.
func (s *Store) cancelRequested(id string) bool {
	_, err := os.Stat(s.cancelFile(id))
	return err == nil
}

// alive reports whether a process with this pid exists.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func clip(s string) string {
	if len(s) <= MaxStored {
		return s
	}
	return s[:MaxStored] + fmt.Sprintf("\n[... %d more bytes not stored]", len(s)-MaxStored)
}
