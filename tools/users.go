package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/sandboxpath"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// homeMode keeps other agents out of a home.
const homeMode = 0o700

// sharedMode lets every agent create files in /workspace/shared while only
// a file's owner may delete or rename it (the sticky bit, as on /tmp).
const sharedMode = 0o1777

// ensureUser creates the agent's Linux user and home, and the shared
// directory, the first time the agent uses a tool on this guest session.
// UserAdd is idempotent, so a VM restart (a new session) just repeats it.
func (e *Env) ensureUser(ctx context.Context, g *agentproto.Client, a agents.Agent) error {
	e.usersMu.Lock()
	defer e.usersMu.Unlock()
	if e.usersOf != g {
		e.usersOf, e.users, e.shared = g, map[string]bool{}, false
	}
	if e.users[a.Slug] {
		return nil
	}
	if !e.shared {
		if err := EnsureShared(ctx, g); err != nil {
			return err
		}
		e.shared = true
	}
	if _, err := g.UserAdd(ctx, agentproto.UserAddRequest{Name: a.User(), Home: a.Home(), HomeMode: homeMode, UID: a.UID, AdoptHome: a.AdoptHome}); err != nil {
		return setupError(fmt.Errorf("could not create the Linux user %s for agent %s: %w", a.User(), a.Name, err))
	}
	e.users[a.Slug] = true
	return nil
}

// EnsureShared creates /workspace/shared as root with mode 1777, fixing
// the mode of an existing directory.
func EnsureShared(ctx context.Context, g *agentproto.Client) error {
	err := g.Mkdir(ctx, agentproto.PathRequest{Path: sandboxpath.SharedDir, Mode: sharedMode, Parents: true})
	if err != nil {
		return setupError(fmt.Errorf("could not create %s: %w", sandboxpath.SharedDir, err))
	}
	// Mkdir leaves an existing directory's mode alone.
	_, stderr, st, err := g.Output(ctx, agentproto.ExecRequest{Argv: []string{"chmod", "1777", sandboxpath.SharedDir}})
	if err == nil && st.Code != 0 {
		err = fmt.Errorf("chmod exited with %d: %s", st.Code, stderr)
	}
	if err != nil {
		return setupError(fmt.Errorf("could not open %s to all agents: %w", sandboxpath.SharedDir, err))
	}
	return nil
}

// setupError reports a failed setup step as an execution_error, unless
// the VM went away or the call was given up on, which keep their own kinds.
func setupError(err error) error {
	if errors.Is(err, agentproto.ErrSessionEnded) || errors.Is(err, agentproto.ErrUnavailable) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &envelope.Error{Kind: envelope.ExecutionError, Err: err}
}

// RemoveUser deletes agent a's Linux user in the guest after killing its
// processes. The home is deleted only when purge is set. A user that was
// never created is not an error.
func RemoveUser(ctx context.Context, g *agentproto.Client, a agents.Agent, purge bool) error {
	err := g.UserDel(ctx, agentproto.UserDelRequest{Name: a.User(), RemoveHome: purge})
	if errors.Is(err, agentproto.ErrNoSuchUser) {
		err = nil
		if purge {
			err = g.Remove(ctx, agentproto.PathRequest{Path: a.Home(), Recursive: true})
			if errors.Is(err, agentproto.ErrNotFound) {
				err = nil
			}
		}
	}
	if err != nil {
		return fmt.Errorf("removing the Linux user %s: %w", a.User(), err)
	}
	return nil
}

// ForgetUser makes the Env create a's user again on its next use, e.g. after
// RemoveUser.
func (e *Env) ForgetUser(a agents.Agent) {
	e.usersMu.Lock()
	delete(e.users, a.Slug)
	e.usersMu.Unlock()
}
