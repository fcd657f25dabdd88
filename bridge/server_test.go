package bridge_test

import (
	"fmt"

	"context"
	"encoding/json"
	"github.com/osaurus/osaurus-sandbox/inference"
	"github.com/osaurus/osaurus-sandbox/internal/scriptedmodel"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
)

// mapSecrets is the Secrets interface over a map; the keychain itself is
// tested in package secrets.
type mapSecrets map[string]map[string]string

func (m mapSecrets) Get(agent, key string) (string, error) {
	if err := secrets.CheckKey(key); err != nil {
		return "", err // as the keychain store checks
	}
	if v, ok := m[agent][key]; ok {
		return v, nil
	}
	return "", secrets.ErrNotFound
}

func (m mapSecrets) Scrub(agent, text string) string { return secrets.ScrubValues(m[agent], text) }

// relay connects a bridge server to a "guest" over a real agentproto
// session (net.Pipe) and returns an HTTP client whose connections are
// relayed calls carrying caller as identity, as the guest agent sends them.
func relay(t *testing.T, s *bridge.Server, caller agentproto.BridgeRequest) *http.Client {
	t.Helper()
	a, b := net.Pipe()
	host, err := agentproto.NewClientPeer(a)
	if err != nil {
		t.Fatal(err)
	}
	guest, err := agentproto.NewServerPeer(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); host.Serve(ctx, s.Mux()) }()
	t.Cleanup(func() { cancel(); host.Close(nil); guest.Close(nil); <-done })
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			// The opening ctx ends at once: the conn must outlive it.
			octx, cancel := context.WithCancel(ctx)
			defer cancel()
			return guest.OpenConn(octx, agentproto.OpBridge, caller)
		},
	}}
}

func newServer(t *testing.T, rate map[string]int) *bridge.Server {
	dir := t.TempDir()
	s := bridge.New(bridge.Options{
		Secrets: mapSecrets{"alice": {"API_KEY": "sk-alice-123456"}},
		Config:  &bridge.ConfigStore{Dir: filepath.Join(dir, "config")},
		Log:     &bridge.LogStore{Dir: filepath.Join(dir, "logs")},
		Rate:    limit.NewRateLimiter(limit.RateOptions{Limits: rate}),
	})
	t.Cleanup(func() { s.Close() })
	return s
}

func do(t *testing.T, c *http.Client, method, path, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://bridge"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: body %q is not JSON: %v", method, path, b, err)
	}
	return resp.StatusCode, m
}

func TestRoutes(t *testing.T) {
	s := newServer(t, nil)
	alice := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"})
	big := strings.Repeat("a", bridge.MaxBody+1)
	for _, tc := range []struct {
		name, method, path, body string
		want                     int
		field, value             string
	}{
		{"ping", "GET", "/api/ping", "", 200, "agent", "alice"},
		{"own secret", "GET", "/api/secrets/API_KEY", "", 200, "value", "sk-alice-123456"},
		{"absent secret", "GET", "/api/secrets/NOPE", "", 404, "error", `secret "NOPE" not found`},
		// A bad name is the caller's to fix (400 naming the rule), as on every route.
		{"invalid secret name", "GET", "/api/secrets/9X", "", 400, "", ""},
		{"config unset", "GET", "/api/config/k", "", 200, "", ""},
		{"config set", "POST", "/api/config/k", `{"value":"v1"}`, 200, "", ""},
		{"config get", "GET", "/api/config/k", "", 200, "value", "v1"},
		{"config bad body", "POST", "/api/config/k", `{"value":1}`, 400, "", ""},
		{"config no value", "POST", "/api/config/k", `{}`, 400, "", ""},
		{"config bad key", "POST", "/api/config/a%20b", `{"value":"x"}`, 400, "", ""},
		{"log", "POST", "/api/log", `{"level":"info","message":"key sk-alice-123456"}`, 200, "", ""},
		{"log empty", "POST", "/api/log", `{"level":"info"}`, 400, "", ""},
		{"log bad level", "POST", "/api/log", `{"level":"loud","message":"x"}`, 400, "", ""},
		{"too big", "POST", "/api/log", big, 413, "", ""},
		{"inference off", "POST", "/api/inference/chat", `{}`, 503, "", ""},
		{"unknown", "GET", "/nope", "", 404, "error", "no route GET /nope"},
		{"wrong method", "DELETE", "/api/config/k", "", 404, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, m := do(t, alice, tc.method, tc.path, tc.body)
			if code != tc.want {
				t.Fatalf("HTTP %d %v, want %d", code, m, tc.want)
			}
			if code >= 400 && m["error"] == nil {
				t.Errorf("error answer without \"error\": %v", m)
			}
			if tc.field != "" && m[tc.field] != tc.value {
				t.Errorf("%s = %v, want %q", tc.field, m[tc.field], tc.value)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	s := newServer(t, nil)
	bob := relay(t, s, agentproto.BridgeRequest{UID: 1002, User: "agent-bob", Agent: "bob"})
	// The header naming alice is overwritten with the relayed identity.
	if code, m := do(t, bob, "GET", "/api/secrets/API_KEY", "", bridge.IdentityHeader, "alice"); code != 404 {
		t.Errorf("bob claiming alice read her secret: %d %v", code, m)
	}
	if _, m := do(t, bob, "GET", "/api/ping", "", bridge.IdentityHeader, "alice"); m["agent"] != "bob" {
		t.Errorf("ping: %v", m)
	}
	root := relay(t, s, agentproto.BridgeRequest{UID: 0, User: "root"})
	if code, m := do(t, root, "GET", "/api/ping", "", bridge.IdentityHeader, "alice"); code != 403 || !strings.Contains(m["error"].(string), "root is not an agent user") {
		t.Errorf("root: %d %v", code, m)
	}
}

func TestRateLimitAndScrubbedLog(t *testing.T) {
	dir := t.TempDir()
	logs := &bridge.LogStore{Dir: dir}
	s := bridge.New(bridge.Options{
		Secrets: mapSecrets{"alice": {"API_KEY": "sk-alice-123456"}},
		Log:     logs,
		Rate:    limit.NewRateLimiter(limit.RateOptions{Limits: map[string]int{"bridge": 2}}),
	})
	t.Cleanup(func() { s.Close() })
	alice := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"})
	do(t, alice, "POST", "/api/log", `{"level":"warn","message":"key sk-alice-123456\nforged line"}`)
	do(t, alice, "GET", "/api/ping", "")
	req, _ := http.NewRequest("GET", "http://bridge/api/ping", nil)
	resp, err := alice.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("third call with a quota of 2: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	b, err := os.ReadFile(logs.LogFile("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); strings.Contains(got, "sk-alice") || !strings.Contains(got, `warn key [REDACTED:API_KEY]\nforged line`) || strings.Count(got, "\n") != 1 {
		t.Errorf("log file: %q", got)
	}
}

func TestMissingServices(t *testing.T) {
	s := bridge.New(bridge.Options{})
	t.Cleanup(func() { s.Close() })
	c := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"})
	for _, p := range []string{"/api/secrets/X", "/api/config/x"} {
		if code, m := do(t, c, "GET", p, ""); code != 503 || m["error"] == nil {
			t.Errorf("%s without a store: %d %v", p, code, m)
		}
	}
}

// TestSecretsOfPlugins: a plugin's command runs as its agent, but gets
// from the secrets route only what its recipe declares; a caller the
// guest could not attribute (a namespace it made itself) gets none.
func TestSecretsOfPlugins(t *testing.T) {
	s := bridge.New(bridge.Options{
		Secrets: mapSecrets{"alice": {"API_KEY": "sk-alice-123456", "DB_PASS": "pw-alice-98765"}},
		PluginSecrets: func(agent, plugin string) []string {
			if agent == "alice" && plugin == "weather" {
				return []string{"API_KEY"}
			}
			return nil
		},
	})
	t.Cleanup(func() { s.Close() })
	id := agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"}
	as := func(plugin string, unattributed bool) *http.Client {
		r := id
		r.Plugin, r.Unattributed = plugin, unattributed
		return relay(t, s, r)
	}
	for _, tc := range []struct {
		name   string
		c      *http.Client
		secret string
		want   int
		text   string
	}{
		{"the agent's own command, any secret", as("", false), "DB_PASS", 200, "pw-alice-98765"},
		{"a plugin, its declared secret", as("weather", false), "API_KEY", 200, "sk-alice-123456"},
		{"a plugin, another secret of its agent", as("weather", false), "DB_PASS", 403, "does not declare"},
		{"a plugin declaring nothing", as("other", false), "API_KEY", 403, "does not declare"},
		{"a namespace the agent made", as("", true), "API_KEY", 403, "network namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, m := do(t, tc.c, "GET", "/api/secrets/"+tc.secret, "")
			got, _ := m["value"].(string)
			if got == "" {
				got, _ = m["error"].(string)
			}
			if code != tc.want || !strings.Contains(got, tc.text) {
				t.Fatalf("HTTP %d %v, want %d with %q", code, m, tc.want, tc.text)
			}
		})
	}
	// Without the lookup, plugins get nothing.
	s2 := bridge.New(bridge.Options{Secrets: mapSecrets{"alice": {"API_KEY": "k"}}})
	t.Cleanup(func() { s2.Close() })
	r := id
	r.Plugin = "weather"
	if code, m := do(t, relay(t, s2, r), "GET", "/api/secrets/API_KEY", ""); code != 403 {
		t.Fatalf("HTTP %d %v", code, m)
	}
}

// TestConfigAndInferenceOfPlugins: the config and inference routes
// follow the guest's attribution as the secrets route does. A plugin's
// commands keep config in a scope of their own, which the agent's own
// commands (and other plugins) can't read or overwrite, nor the plugin
// its agent's; a plugin gets inference only when its recipe declares it;
// a caller the guest could not attribute gets neither.
func TestConfigAndInferenceOfPlugins(t *testing.T) {
	model := scriptedmodel.Start(t, "127.0.0.1:0")
	s := bridge.New(bridge.Options{
		Config:    &bridge.ConfigStore{Dir: t.TempDir()},
		Inference: &inference.Client{Settings: func() (inference.Settings, error) { return inference.Settings{URL: model.URL, Model: "m"}, nil }},
		PluginInference: func(agent, plugin string) bool {
			return agent == "alice" && plugin == "writer"
		},
	})
	t.Cleanup(func() { s.Close() })
	id := agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"}
	as := func(plugin string, unattributed bool) *http.Client {
		r := id
		r.Plugin, r.Unattributed = plugin, unattributed
		return relay(t, s, r)
	}
	agent, weather, other, unknown := as("", false), as("weather", false), as("writer", false), as("", true)
	set := func(c *http.Client, value string) (int, map[string]any) {
		return do(t, c, "POST", "/api/config/endpoint", `{"value":"`+value+`"}`)
	}
	get := func(c *http.Client) string {
		code, m := do(t, c, "GET", "/api/config/endpoint", "")
		if code != 200 {
			t.Fatalf("config get: %d %v", code, m)
		}
		v, _ := m["value"].(string)
		return v
	}
	if code, m := set(weather, "https://api.weather.example"); code != 200 {
		t.Fatalf("the plugin's set: %d %v", code, m)
	}
	// The agent's own command writes the same key: its own scope.
	if code, m := set(agent, "https://evil.example"); code != 200 {
		t.Fatalf("the agent's set: %d %v", code, m)
	}
	if got := get(weather); got != "https://api.weather.example" {
		t.Errorf("the plugin reads %q: the agent's command overwrote the plugin's value", got)
	}
	if got := get(agent); got != "https://evil.example" {
		t.Errorf("the agent reads %q, want its own value", got)
	}
	if got := get(other); got != "" {
		t.Errorf("another plugin reads %q from the weather plugin's scope", got)
	}
	// No key an agent names reaches a plugin's scope.
	for _, key := range []string{"weather%2Fendpoint", "weather/endpoint", "..%2Fweather%2Fendpoint"} {
		code, m := do(t, agent, "GET", "/api/config/"+key, "")
		if v, _ := m["value"].(string); v == "https://api.weather.example" {
			t.Errorf("the agent read the plugin's value through %q: %d %v", key, code, m)
		}
	}
	if code, m := set(unknown, "x"); code != 403 || !strings.Contains(fmt.Sprint(m["error"]), "network namespace") {
		t.Errorf("config set from a namespace the agent made: %d %v", code, m)
	}
	if code, m := do(t, unknown, "GET", "/api/config/endpoint", ""); code != 403 {
		t.Errorf("config get from a namespace the agent made: %d %v", code, m)
	}

	chat := `{"messages":[{"role":"user","content":"hello"}]}`
	for _, tc := range []struct {
		name string
		c    *http.Client
		want int
		text string
	}{
		{"the agent's own command", agent, 200, "ok"},
		{"a plugin declaring inference", other, 200, "ok"},
		{"a plugin not declaring it", weather, 403, "does not declare"},
		{"a namespace the agent made", unknown, 403, "network namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == 200 {
				model.Play(scriptedmodel.Turn{Content: "ok"})
			}
			code, m := do(t, tc.c, "POST", "/api/inference/chat", chat)
			got, _ := m["content"].(string)
			if got == "" {
				got, _ = m["error"].(string)
			}
			if code != tc.want || !strings.Contains(got, tc.text) {
				t.Fatalf("HTTP %d %v, want %d with %q", code, m, tc.want, tc.text)
			}
		})
	}
	if n := len(model.Requests()); n != 2 {
		t.Errorf("the model server got %d requests, want the 2 allowed", n)
	}
	// Without the lookup, plugins get no inference.
	s2 := bridge.New(bridge.Options{Inference: &inference.Client{Settings: func() (inference.Settings, error) { return inference.Settings{URL: model.URL, Model: "m"}, nil }}})
	t.Cleanup(func() { s2.Close() })
	r := id
	r.Plugin = "writer"
	if code, m := do(t, relay(t, s2, r), "POST", "/api/inference/chat", chat); code != 403 {
		t.Fatalf("HTTP %d %v", code, m)
	}
}
