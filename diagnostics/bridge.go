package diagnostics

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// HostCLI is where the app puts osaurus-host in every guest.
const HostCLI = "/usr/local/bin/osaurus-host"

// CheckBridge is the bridge check for an app that serves the host API
// bridge (Env.Bridge): it runs osaurus-host as the diagnostics user
// against /api/ping, so it passes only when the whole round trip works:
// the binary is in the guest, the guest agent's socket relays, the host
// recognises the user and answers.
func CheckBridge(ctx context.Context, c *agentproto.Client) error {
	if _, err := c.UserAdd(ctx, agentproto.UserAddRequest{Name: DiagUser, Home: "/workspace/agents/diag"}); err != nil {
		return fmt.Errorf("creating %s: %w", DiagUser, err)
	}
	out, errOut, st, err := c.Output(ctx, agentproto.ExecRequest{
		Identity: agentproto.Identity{User: DiagUser},
		Argv:     []string{HostCLI, "ping"},
	})
	if err != nil {
		if errors.Is(err, agentproto.ErrNotFound) {
			return fmt.Errorf("%s is missing in the guest: the app copies it at every boot; restart the sandbox (see the app log for why the copy failed): %w", HostCLI, err)
		}
		return fmt.Errorf("running %s: %w", HostCLI, err)
	}
	msg := strings.TrimSpace(string(errOut))
	switch st.Code {
	case 0:
		if strings.TrimSpace(string(out)) != "ok" {
			return fmt.Errorf("the bridge answered %q instead of ok", strings.TrimSpace(string(out)))
		}
		return nil
	case 127:
		return fmt.Errorf("exit 127: %s is missing in the guest; restart the sandbox so the app copies it again", HostCLI)
	case 7:
		return fmt.Errorf("exit 7: the bridge socket is not there, so the guest agent is not relaying (an older guest agent?); restart the sandbox: %s", msg)
	case 4:
		return fmt.Errorf("exit 4: the bridge refused %s as not an agent user: %s", DiagUser, msg)
	case 6:
		return fmt.Errorf("exit 6: the host side of the bridge is not available: %s", msg)
	}
	return fmt.Errorf("exit %d: %s", st.Code, msg)
}
