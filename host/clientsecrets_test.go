package host

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// An owner whose secretStore is "client" reads an agent's secrets from
// the front end that offers them over its control socket: with none
// connected the bridge and the secret tool fail saying to connect from
// the user's machine; with one, they read its value (the front end's
// store, under its context's service); when it goes, the clear error
// again. Its status says "client", which is how a front end knows to
// offer.
func TestOwnerReadsSecretsFromItsClient(t *testing.T) {
	p := backgroundDir(t, 0)
	setSecretStore(t, p, "client")
	h, err := New(context.Background(), Options{Paths: p, Kind: "serve", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	a, err := h.Registry().Add("alice")
	if err != nil {
		t.Fatal(err)
	}
	if a, err = h.Registry().Update(a.ID, func(a *agents.Agent) error { a.AutonomousExec.Enabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl, err := client.Dial(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if st, err := cl.Status(ctx); err != nil || st.SecretStore != "client" {
		t.Fatalf("Status = %+v, %v; want secretStore client", st, err)
	}

	const noClient = "no machine that holds this sandbox's secrets is connected"
	type read struct {
		bridge string // the bridge's answer: its value or its error
		tool   string // sandbox_secret_check's envelope
	}
	reads := func() read {
		w := bridgeCall(h, a.Slug, http.MethodGet, "/api/secrets/TOKEN", "")
		e := h.RunTool(ctx, a.ID, "sandbox_secret_check", []byte(`{"key":"TOKEN"}`))
		return read{bridge: w.Body.String(), tool: string(e.JSONBytes())}
	}
	got := reads()
	if !strings.Contains(got.bridge, noClient) || !strings.Contains(got.tool, noClient) || !strings.Contains(got.tool, string(envelope.Unavailable)) {
		t.Fatalf("with no client: %+v", got)
	}

	local := &memKeychain{m: map[string]string{}}
	local.Set(secrets.ClientService("box"), a.Slug+"/TOKEN", "from-the-laptop-123")
	local.Set(secrets.ServiceName(), a.Slug+"/TOKEN", "the-laptops-own-sandbox")
	conn, err := cl.OfferSecrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	provided := make(chan error, 1)
	go func() { provided <- secrets.Provide(ctx, conn, local, secrets.ClientService("box")) }()
	testwait.Eventually(t, "the owner takes the offer", 10*time.Second, time.Millisecond, func() bool { return h.Secrets().Clients().Connected() == 1 })

	if v, err := h.Secrets().Get(a.Slug, "TOKEN"); err != nil || v != "from-the-laptop-123" {
		t.Fatalf("the owner's Get = %q, %v", v, err)
	}
	got = reads()
	var body struct{ Value string }
	if json.Unmarshal([]byte(got.bridge), &body); body.Value != "from-the-laptop-123" || !strings.Contains(got.tool, `"exists":true`) {
		t.Fatalf("with a client: %+v", got)
	}
	if s := h.Secrets().Scrub(a.Slug, "out: from-the-laptop-123"); s != "out: [REDACTED:TOKEN]" {
		t.Errorf("Scrub = %q", s)
	}

	conn.Close()
	<-provided
	testwait.Eventually(t, "the owner sees the client go", 10*time.Second, time.Millisecond, func() bool { return h.Secrets().Clients().Connected() == 0 })
	if got := reads(); !strings.Contains(got.bridge, noClient) {
		t.Errorf("after the client went: %+v", got)
	}
	// What was read while it was connected is still kept out of output.
	if s := h.Secrets().Scrub(a.Slug, "out: from-the-laptop-123"); s != "out: [REDACTED:TOKEN]" {
		t.Errorf("Scrub after the client went = %q", s)
	}
}

// setSecretStore sets the secretStore of the data folder p.
func setSecretStore(t *testing.T, p config.Paths, store string) {
	t.Helper()
	cfg, err := config.LoadSandbox(p.SandboxJSON())
	if err != nil {
		t.Fatal(err)
	}
	cfg.SecretStore = store
	if err := config.SaveSandbox(p.SandboxJSON(), cfg); err != nil {
		t.Fatal(err)
	}
}
