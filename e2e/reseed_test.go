//go:build linux

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// TestHelloReseedsTheGuest: every hello hands the guest fresh randomness,
// which its PID 1 mixes into the kernel's pool and reseeds the CRNG with
// (a VM resumed from a saved memory image must not repeat its randoms);
// a seed too short to count is not taken.
func TestHelloReseedsTheGuest(t *testing.T) {
	m := sharedGuest(t)
	if !m.Guest().Reseeded {
		t.Fatalf("the attach's hello did not reseed the guest: %+v", m.Guest())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hello := func(seed []byte) agentproto.HelloResponse {
		t.Helper()
		var resp agentproto.HelloResponse
		req := agentproto.HelloRequest{Major: agentproto.VersionMajor, Minor: agentproto.VersionMinor, Seed: seed}
		if err := m.Agent().Peer.Call(ctx, agentproto.OpHello, req, &resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := hello(nil); r.Reseeded {
		t.Error("a hello without a seed says it reseeded")
	}
	if r := hello([]byte("short")); r.Reseeded {
		t.Error("a 5-byte seed was taken")
	}
	if r := hello(make([]byte, 64)); !r.Reseeded {
		t.Errorf("a 64-byte seed was not taken: warnings %q", r.Warnings)
	}
}
