package bridge_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/bridge"
)

// waitSecrets reads only with a ctx (as secrets.Store with secretStore
// client does, asking the user's machine) and never answers: each read
// waits for its ctx and reports how it ended.
type waitSecrets struct {
	mapSecrets
	asked chan struct{}
	ended chan error
}

func (w waitSecrets) GetContext(ctx context.Context, _, _ string) (string, error) {
	w.asked <- struct{}{}
	<-ctx.Done()
	w.ended <- ctx.Err()
	return "", ctx.Err()
}

// The secrets route reads with the guest's request's ctx: a request the
// guest drops ends the read waiting on the store.
func TestSecretsRouteFollowsTheRequest(t *testing.T) {
	w := waitSecrets{mapSecrets: mapSecrets{}, asked: make(chan struct{}, 1), ended: make(chan error, 1)}
	s := bridge.New(bridge.Options{Secrets: w})
	t.Cleanup(func() { s.Close() })
	c := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://bridge/api/secrets/TOKEN", nil)
	got := make(chan error, 1)
	go func() {
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		got <- err
	}()
	<-w.asked
	cancel()
	if err := <-w.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the read ended with %v", err)
	}
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Errorf("the request: %v", err)
	}
}
