package host

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// ActivityLog records each agent's last tool call in a file the window
// reads (api.ReadActivity). Writes are coalesced: a burst of calls costs
// one write after the one in progress.
type ActivityLog struct {
	Path string
	Now  func() time.Time // time.Now when nil

	mu      sync.Mutex
	last    map[string]api.AgentActivity
	dirty   bool
	writing bool
	idle    *sync.Cond // signalled when a write round ends
}

// Record notes a call of tool by agentID over via.
func (l *ActivityLog) Record(agentID, tool, via string) {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		// Keep what earlier owners recorded.
		l.last, _ = api.ReadActivity(l.Path)
		if l.last == nil {
			l.last = map[string]api.AgentActivity{}
		}
		l.idle = sync.NewCond(&l.mu)
	}
	l.last[agentID] = api.AgentActivity{LastCall: now().UTC(), Tool: tool, Via: via}
	l.dirty = true
	if !l.writing {
		l.writing = true
		go l.flush()
	}
}

// flush writes until nothing new is left to write.
func (l *ActivityLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.dirty {
		l.dirty = false
		data, _ := json.MarshalIndent(l.last, "", "  ")
		l.mu.Unlock()
		os.MkdirAll(filepath.Dir(l.Path), 0o700)
		atomicfile.WriteFile(l.Path, data, 0o600) // a lost write only ages the Agents tab's "last call"
		l.mu.Lock()
	}
	l.writing = false
	l.idle.Broadcast()
}

// Wait returns once no write is pending (tests, Close).
func (l *ActivityLog) Wait() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.idle != nil && l.writing {
		l.idle.Wait()
	}
}

// recordingInvoker records each call before running it.
type recordingInvoker struct {
	tools.Invoker
	log *ActivityLog
	via string
}

func (r recordingInvoker) RunTool(ctx context.Context, a agents.Agent, name string, args json.RawMessage) envelope.Envelope {
	r.log.Record(a.ID, name, r.via)
	return r.Invoker.RunTool(ctx, a, name, args)
}
