package tools

import (
	"context"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// loginShell starts the image's bash as a login shell, or sh where there
// is no bash.
const loginShell = `if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l`

// TerminalRequest is the exec of a terminal the user opens as agent a
// (`osaurus-sandbox shell AGENT`): the agent's Linux user, network
// policy, resource limits and PATH, exactly as its commands get them, on
// a pseudo-terminal of size ws. argv runs one command instead of a login
// shell. The agent's user is created first if the VM has none yet.
func (e *Env) TerminalRequest(ctx context.Context, g *agentproto.Client, a agents.Agent, workdir string, argv []string, term string, ws agentproto.Winsize) (agentproto.ExecRequest, error) {
	if err := e.ensureUser(ctx, g, a); err != nil {
		return agentproto.ExecRequest{}, err
	}
	c := &call{agent: a, env: e}
	cur := c.current()
	network := netpolicy.SettingNone
	if p, err := cur.NetworkPolicy(); err == nil {
		network = p.String()
	}
	l := cur.Limits()
	req := TerminalRoot(workdir, argv, term, ws)
	req.Identity = agentproto.Identity{User: a.User()}
	req.Env = append(c.procEnv(), req.Env...)
	req.Network, req.Limits = network, &l
	return req, nil
}

// TerminalRoot is the exec of the VM owner's root terminal: root in the
// guest's own namespaces, labelled in its prompt.
func TerminalRoot(workdir string, argv []string, term string, ws agentproto.Winsize) agentproto.ExecRequest {
	if ws.Rows == 0 || ws.Cols == 0 {
		ws = agentproto.Winsize{Rows: 24, Cols: 80}
	}
	if term == "" || strings.ContainsAny(term, "\x00=") {
		term = "xterm-256color"
	}
	req := agentproto.ExecRequest{Cwd: workdir, Tty: &ws, Env: []string{"TERM=" + term}}
	if len(argv) > 0 {
		req.Argv = argv
	} else {
		req.Shell = loginShell
	}
	return req
}
