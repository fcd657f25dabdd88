package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
)

// EventLogger is the logger name of event notifications, so a client
// can tell them from other log messages.
const EventLogger = "osaurus-events"

// startEvents delivers each event the agent emits from now on to every
// connected session as a log notification (level info), until ctx ends.
// A session sees them once its client has set a log level
// (logging/setLevel), as the protocol asks.
func (s *AgentServer) startEvents(ctx context.Context, store EventLog, slug string) {
	// Where "now" is, taken before returning so no event emitted after
	// the server exists is missed.
	last, err := store.LastID(ctx)
	if err != nil {
		s.logf("events: %v", err)
		return
	}
	go s.followEvents(ctx, store, slug, last)
}

func (s *AgentServer) followEvents(ctx context.Context, store EventLog, slug string, last int64) {
	err := store.Follow(ctx, control.EventFilter{Agent: slug, After: last}, func(e control.Event) error {
		data := map[string]any{"id": e.ID, "type": e.Type, "payload": json.RawMessage(e.Payload), "time": e.Time}
		for ss := range s.srv.Sessions() {
			//lint:ignore SA1019 logging is deprecated from protocol 2026-07-28 but is how MCP clients receive server notices today.
			if err := ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: EventLogger, Data: data}); err != nil && ctx.Err() == nil {
				s.logf("events: notifying a session: %v", err)
			}
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		s.logf("events: following %s: %v", slug, err)
	}
}

func (s *AgentServer) logf(format string, args ...any) {
	if s.cfg.Logger != nil {
		s.cfg.Logger.Warn("mcpserver: " + fmt.Sprintf(format, args...))
	}
}
