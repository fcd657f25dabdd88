package host

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
)

// A short-lived owner of the data files answers on the control socket for
// as long as it lives, and a second one is refused meanwhile.
func TestOpenDataServesTheControlSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "host") // short: the control socket is in it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := config.Paths{Root: dir}
	ctx := context.Background()
	ctl, err := OpenData(ctx, p, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenData(ctx, p, t.Logf); !errors.Is(err, api.ErrOwned) {
		t.Fatalf("second OpenData: %v, want ErrOwned", err)
	}
	cl, err := client.Dial(ctx, p)
	if err != nil {
		t.Fatalf("dial the short-lived owner: %v", err)
	}
	st, err := cl.Status(ctx)
	cl.Close()
	if err != nil || st.Owner != "cli" {
		t.Fatalf("status through the short-lived owner: %+v %v", st, err)
	}
	ctl.Close()
	if _, err := client.Dial(ctx, p); !errors.Is(err, api.ErrNoOwner) {
		t.Fatalf("dial after it closed: %v, want ErrNoOwner", err)
	}
}
