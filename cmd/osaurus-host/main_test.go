package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// serve answers every request on a Unix socket with what the test wants
// and records the last request.
func serve(t *testing.T, status int, body string, last *string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "bridge.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*last = r.Method + " " + r.URL.Path + " " + string(b)
		if status == 429 {
			w.Header().Set("Retry-After", "7")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func TestCommands(t *testing.T) {
	big := strings.Repeat("x", 100_000) // forces a chunked answer
	for _, tc := range []struct {
		name       string
		args       []string
		status     int
		body       string
		wantReq    string
		wantCode   int
		wantOut    string
		wantErrSub string
	}{
		{"secret", []string{"secrets", "get", "K"}, 200, `{"value":"v"}`, "GET /api/secrets/K ", 0, "v\n", ""},
		{"secret json", []string{"--json", "secrets", "get", "K"}, 200, `{"value":"v"}`, "GET /api/secrets/K ", 0, `{"value":"v"}` + "\n", ""},
		{"big chunked", []string{"secrets", "get", "K"}, 200, `{"value":"` + big + `"}`, "GET /api/secrets/K ", 0, big + "\n", ""},
		{"not found", []string{"secrets", "get", "K"}, 404, `{"error":"secret \"K\" not found"}`, "GET /api/secrets/K ", 3, "", `secret "K" not found`},
		{"refused", []string{"ping"}, 403, `{"error":"root is not an agent user"}`, "GET /api/ping ", 4, "", "not an agent user"},
		{"rate", []string{"ping"}, 429, `{"error":"rate limit"}`, "GET /api/ping ", 5, "", "retry after 7s"},
		{"unavailable", []string{"ping"}, 503, `{"error":"down"}`, "GET /api/ping ", 6, "", "down"},
		{"other", []string{"ping"}, 500, `{"error":"boom"}`, "GET /api/ping ", 1, "", "boom"},
		{"config set", []string{"config", "set", "k", "v"}, 200, `{}`, `POST /api/config/k {"value":"v"}`, 0, "", ""},
		{"config get unset", []string{"config", "get", "k"}, 200, `{}`, "GET /api/config/k ", 0, "", ""},
		{"log level", []string{"log", "warn", "m"}, 200, `{}`, `POST /api/log {"level":"warn","message":"m"}`, 0, "", ""},
		{"log", []string{"log", "just text"}, 200, `{}`, `POST /api/log {"level":"info","message":"just text"}`, 0, "", ""},
		{"chat", []string{"inference", "chat", "-m", "hi"}, 200, `{"content":"yo"}`, `POST /api/inference/chat {"messages":[{"content":"hi","role":"user"}]}`, 0, "yo\n", ""},
		{"dispatch", []string{"agent", "dispatch", "a1", "do it"}, 200, `{"task_id":"t1"}`, `POST /api/agent/dispatch {"agent_id":"a1","task":"do it"}`, 0, "t1\n", ""},
		{"memory query", []string{"agent", "memory", "query", "q"}, 200, `{"results":[{"content":"c1"}]}`, `POST /api/agent/memory/query {"query":"q"}`, 0, "c1\n", ""},
		{"memory store", []string{"agent", "memory", "store", "c"}, 200, `{}`, `POST /api/agent/memory/store {"content":"c"}`, 0, "", ""},
		{"events", []string{"events", "emit", "ty", `{"a":1}`}, 200, `{}`, `POST /api/events/emit {"payload":{"a":1},"type":"ty"}`, 0, "", ""},
		{"usage", []string{"secrets", "get"}, 200, `{}`, "", 2, "", "secrets get NAME"},
		{"unknown", []string{"nope"}, 200, `{}`, "", 2, "", "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var last string
			t.Setenv("OSAURUS_BRIDGE_SOCKET", serve(t, tc.status, tc.body, &last))
			var out, errOut bytes.Buffer
			code := run(tc.args, strings.NewReader(""), &out, &errOut)
			if code != tc.wantCode || out.String() != tc.wantOut || !strings.Contains(errOut.String(), tc.wantErrSub) {
				t.Errorf("exit %d, stdout %.80q, stderr %q; want %d, %.80q, ...%q...", code, out.String(), errOut.String(), tc.wantCode, tc.wantOut, tc.wantErrSub)
			}
			if last != tc.wantReq {
				t.Errorf("request %q, want %q", last, tc.wantReq)
			}
		})
	}
}

func TestPluginCreateAndNoBridge(t *testing.T) {
	var last string
	t.Setenv("OSAURUS_BRIDGE_SOCKET", serve(t, 200, `{"status":"installed","plugin_id":"p"}`, &last))
	var out, errOut bytes.Buffer
	if code := run([]string{"plugin", "create"}, strings.NewReader(`{"name":"P"}`), &out, &errOut); code != 0 || out.String() != "p\n" {
		t.Errorf("plugin create: %d %q %q", code, out.String(), errOut.String())
	}
	var body map[string]any
	if _, b, _ := strings.Cut(last, "/api/plugin/create "); json.Unmarshal([]byte(b), &body) != nil || body["name"] != "P" {
		t.Errorf("request %q", last)
	}
	t.Setenv("OSAURUS_BRIDGE_SOCKET", filepath.Join(t.TempDir(), "absent.sock"))
	if code := run([]string{"ping"}, nil, &out, &errOut); code != 7 || !strings.Contains(errOut.String(), "cannot reach the host bridge") {
		t.Errorf("no socket: %d %q", code, errOut.String())
	}
}
