package host

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

func TestReady(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		name string
		st   control.Status
		want bool
		text string
	}{
		{"running", control.Status{State: control.Running}, true, ""},
		{"asleep: the next call wakes it", control.Status{State: control.Running, SleepingSince: &now}, true, ""},
		{"guest not answering", control.Status{State: control.Running, Unresponsive: &now}, false, "stopped answering"},
		{"stopped", control.Status{State: control.Stopped}, false, "osaurus-sandbox start"},
		{"starting", control.Status{State: control.Starting}, false, "is starting"},
		{"error keeps its reason", control.Status{State: control.Error, Reason: "qemu exited"}, false, "qemu exited"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := ready(tt.st)
			if r.Ready != tt.want || !strings.Contains(r.Reason, tt.text) || r.State != tt.st.State {
				t.Fatalf("ready(%+v) = %+v", tt.st, r)
			}
		})
	}
}

// The owner's MCP address answers the health paths without a token, and
// probing them is not activity: a probed owner still goes idle.
func TestHealthPaths(t *testing.T) {
	p := backgroundDir(t, 60)
	h, err := New(context.Background(), Options{Paths: p, Kind: "serve", Logf: t.Logf,
		Secrets: &secrets.Store{B: &memKeychain{m: map[string]string{}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	cfg, err := config.LoadSandbox(p.SandboxJSON())
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + cfg.MCPAddr()
	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get(HealthPath); code != http.StatusOK || body != "ok\n" {
		t.Errorf("%s: %d %q", HealthPath, code, body)
	}
	code, body := get(ReadyPath)
	var r Readiness
	if code != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &r) != nil || r.Ready || r.State != control.NotProvisioned {
		t.Errorf("%s of an owner without a VM: %d %s", ReadyPath, code, body)
	}
	// A page whose name was rebound to this address is refused.
	req, _ := http.NewRequest("GET", base+ReadyPath, nil)
	req.Host = "evil.example:80"
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusForbidden {
		t.Errorf("%s for Host evil.example: %v %v", ReadyPath, res, err)
	} else {
		res.Body.Close()
	}
	if _, ok := h.use.idle(); !ok {
		t.Error("probing the health paths counted as activity")
	}
	// The MCP endpoint is still behind them, token and all.
	if code, body := get("/mcp"); code != http.StatusUnauthorized {
		t.Errorf("/mcp without a token: %d %s", code, body)
	}
}
