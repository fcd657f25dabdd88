package bridge

import (
	"context"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// HostCLIPath is where every guest gets osaurus-host.
const HostCLIPath = "/usr/local/bin/osaurus-host"

// Attach connects the bridge to a new guest session: it copies
// osaurus-host into the guest (so no image needs to carry it) and serves
// the guest's bridge calls until the session ends. It is the sandbox
// manager's OnGuest hook.
func (s *Server) Attach(ctx context.Context, c *agentproto.Client) {
	if s.o.HostCLI != nil {
		if err := s.installHostCLI(ctx, c); err != nil {
			s.o.Logf("bridge: installing %s in the guest: %v (osaurus-host will be missing; the bridge diagnostic reports it)", HostCLIPath, err)
		}
	}
	go func() {
		if err := c.Peer.Serve(context.WithoutCancel(ctx), s.Mux()); err != nil {
			s.o.Logf("bridge: guest session: %v", err)
		}
	}()
}

func (s *Server) installHostCLI(ctx context.Context, c *agentproto.Client) error {
	bin, err := s.o.HostCLI(c.Info.Arch)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// Written beside and renamed, so a process running the old copy
	// never sees a half-written binary.
	tmp := HostCLIPath + ".new"
	if _, err := c.WriteFile(ctx, agentproto.WriteFileRequest{Path: tmp, Data: bin, Mode: 0o755, MakeParents: true}); err != nil {
		return err
	}
	return c.Move(ctx, agentproto.MoveRequest{Src: tmp, Dst: HostCLIPath, Overwrite: true})
}
