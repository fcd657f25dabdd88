package remotes

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

// spawnLog is a far side with no owner running; it records whether each
// dial asked it to start one.
type spawnLog struct {
	mu     sync.Mutex
	spawns []bool
	dialed chan struct{}
}

func (d *spawnLog) DialControl(ctx context.Context, spawn bool) (io.ReadWriteCloser, error) {
	d.mu.Lock()
	d.spawns = append(d.spawns, spawn)
	d.mu.Unlock()
	select {
	case d.dialed <- struct{}{}:
	default:
	}
	return nil, api.ErrNoOwner
}

// Offering secrets never starts an owner on the far side: an owner the
// user (or a test) stopped there must stay stopped, whatever front end
// is still open here.
func TestOfferSecretsStartsNoOwner(t *testing.T) {
	d := &spawnLog{dialed: make(chan struct{}, 1)}
	stop := OfferSecrets(context.Background(), d, secrets.InService{Service: "unused"}, "box")
	select {
	case <-d.dialed:
	case <-time.After(30 * time.Second):
		stop()
		t.Fatal("OfferSecrets dialled nothing")
	}
	stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, spawn := range d.spawns {
		if spawn {
			t.Errorf("dial %d asked the far side to start an owner", i+1)
		}
	}
}
