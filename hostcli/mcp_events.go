package hostcli

import (
	"context"
	"errors"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
)

// ownerEvents is the owner's event log as the stdio MCP server follows
// it: over the control socket, never starting an owner (the first tool
// call does that), and again whenever an owner appears. Every event is
// emitted by an owner, so none is missed while there is none.
type ownerEvents struct {
	paths config.Paths
	// poll is how often it looks for an owner while none runs.
	poll time.Duration
}

// noOwnerYet: LastID found no owner; Follow starts at the first owner's
// newest event.
const noOwnerYet = -1

func (e ownerEvents) LastID(ctx context.Context) (int64, error) {
	cl, err := client.Dial(ctx, e.paths)
	if err != nil {
		return noOwnerYet, nil
	}
	defer cl.Close()
	return cl.LastEventID(ctx)
}

func (e ownerEvents) Follow(ctx context.Context, f control.EventFilter, fn func(control.Event) error) error {
	for ctx.Err() == nil {
		if cl, err := client.Dial(ctx, e.paths); err == nil {
			if f.After == noOwnerYet {
				if f.After, err = cl.LastEventID(ctx); err != nil {
					f.After = noOwnerYet
				}
			}
			if f.After != noOwnerYet {
				err = cl.FollowEvents(ctx, f, func(ev control.Event) error {
					f.After = ev.ID
					return fn(ev)
				})
			}
			cl.Close()
			if err != nil && ctx.Err() == nil && !isOwnerGone(err) {
				return err
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(e.poll):
		}
	}
	return ctx.Err()
}

// isOwnerGone: the owner exited mid-follow (or has no event log now);
// the next owner is followed instead.
func isOwnerGone(err error) bool {
	return errors.Is(err, agentproto.ErrSessionEnded) || errors.Is(err, agentproto.ErrUnavailable)
}
