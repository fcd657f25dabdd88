package tools

import (
	"context"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// Exposer opens previews of agents' ports on the host's loopback.
type Exposer interface {
	Expose(ctx context.Context, a agents.Agent, port int) (url string, err error)
}

type exposeArgs struct {
	Port int `json:"port"`
}

func init() {
	catalog = append(catalog, &tool{
		Spec: Spec{
			Name: "sandbox_expose_port",
			Description: "Let the user open in a browser a server you run: give the TCP port it listens on (on 127.0.0.1 or " +
				"all addresses, in the sandbox). Returns {url, port}: the URL on the user's computer. Only you can reach or " +
				"expose your ports; the preview closes when the VM stops or the user closes it. The preview is HTTP: it answers only " +
				"requests addressed to the URL's own host and port, and bounds connections and idle time.",
			InputSchema: object(
				integer("port", "The port your server listens on.", 1, 65535, 0).must(),
			),
			Idempotent: true,
		},
		gate: gatePorts, service: serviceWrite, bind: bind(exposePort),
	})
}

func exposePort(ctx context.Context, c *call, a exposeArgs) (any, error) {
	if a.Port < 1 || a.Port > 65535 {
		return nil, envelope.ArgErrorf("port", "1–65535", "port %d is not a TCP port", a.Port)
	}
	if err := c.env.rate.Allow(c.agent.ID, serviceWrite); err != nil {
		return nil, err
	}
	url, err := c.env.exposer.Expose(ctx, c.agent, a.Port)
	if err != nil {
		return nil, err
	}
	return map[string]any{"url": url, "port": a.Port}, nil
}
