package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/store/memory"
)

type fuzzSecrets map[string]string

func (m fuzzSecrets) Get(agent, key string) (string, error) {
	if v, ok := m[key]; ok && agent == "alice" {
		return v, nil
	}
	return "", ErrNotFound
}
func (m fuzzSecrets) Scrub(agent, text string) string { return text }

// FuzzBridgeRequest: any bytes an agent sends the bridge socket, read as
// HTTP the way the host's server reads them, get an answer with a status
// code and a JSON body (an "error" for every failure) from the routes
// with real stores behind them, and never panic the host.
func FuzzBridgeRequest(f *testing.F) {
	for _, s := range []string{
		"GET /api/ping HTTP/1.1\r\nHost: b\r\n\r\n",
		"GET /api/secrets/API_KEY HTTP/1.1\r\nHost: b\r\n\r\n",
		"POST /api/config/k HTTP/1.1\r\nHost: b\r\nContent-Length: 13\r\n\r\n{\"value\":\"v\"}",
		"POST /api/log HTTP/1.1\r\nHost: b\r\nContent-Length: 36\r\n\r\n{\"level\":\"info\",\"message\":\"hello\"}",
		"POST /api/agent/memory/store HTTP/1.1\r\nHost: b\r\nContent-Length: 27\r\n\r\n{\"text\":\"x\",\"tags\":[\"a\"]}",
		"POST /api/agent/memory/query HTTP/1.1\r\nHost: b\r\nContent-Length: 18\r\n\r\n{\"query\":\"x a*\"}",
		"POST /api/events/emit HTTP/1.1\r\nHost: b\r\nContent-Length: 30\r\n\r\n{\"type\":\"t\",\"data\":{\"a\":1}}",
		"POST /api/plugin/create HTTP/1.1\r\nHost: b\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		"GET /api/agent/tasks/..%2f..%2fx HTTP/1.1\r\nHost: b\r\n\r\n",
		"GET /api/./ping HTTP/1.1\r\nHost: b\r\n\r\n",
		"GET /. HTTP/1.1\r\nHost: b\r\n\r\n",
	} {
		f.Add([]byte(s), "", false)
	}
	f.Add([]byte("GET /api/secrets/API_KEY HTTP/1.1\r\nHost: b\r\n\r\n"), "weather", false)
	f.Add([]byte("GET /api/secrets/API_KEY HTTP/1.1\r\nHost: b\r\n\r\n"), "", true)
	dir := f.TempDir()
	ctx := context.Background()
	mem, err := memory.Open(ctx, filepath.Join(dir, "memory.db"), memory.Options{})
	if err != nil {
		f.Fatal(err)
	}
	ev, err := events.Open(ctx, filepath.Join(dir, "events.db"), events.Options{})
	if err != nil {
		f.Fatal(err)
	}
	s := New(Options{
		Secrets: fuzzSecrets{"API_KEY": "sk-1"},
		Config:  &ConfigStore{Dir: filepath.Join(dir, "config")},
		Log:     &LogStore{Dir: filepath.Join(dir, "logs")},
		Memory:  mem,
		Events:  ev,
		PluginSecrets: func(agent, plugin string) []string {
			if plugin == "weather" {
				return []string{"API_KEY"}
			}
			return nil
		},
	})
	f.Cleanup(func() { s.Close(); mem.Close(); ev.Close() })
	h := s.Handler()
	f.Fuzz(func(t *testing.T, data []byte, plugin string, unattributed bool) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(data)))
		if err != nil {
			return // the server answers 400 itself before any route
		}
		caller := agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice", Plugin: plugin, Unattributed: unattributed}
		req = req.WithContext(context.WithValue(req.Context(), callerKey{}, caller))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code < 200 || rec.Code > 599 {
			t.Fatalf("status %d", rec.Code)
		}
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%d answer %q is not a JSON object: %v", rec.Code, rec.Body.Bytes(), err)
		}
		if rec.Code >= 400 && body["error"] == nil {
			t.Fatalf("%d answer without an error: %s", rec.Code, rec.Body.Bytes())
		}
		if (plugin != "" && plugin != "weather" || unattributed) && body["value"] != nil && req.URL.Path == "/api/secrets/API_KEY" {
			t.Fatalf("a secret went to plugin %q (unattributed %v)", plugin, unattributed)
		}
	})
}
