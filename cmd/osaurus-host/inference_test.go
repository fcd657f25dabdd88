package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

func TestChatFlags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		wantReq  string
		wantCode int
	}{
		{"all flags", []string{"inference", "chat", "--system", "be brief", "-m", "hi", "--model", "m1"}, `POST /api/inference/chat {"messages":[{"content":"be brief","role":"system"},{"content":"hi","role":"user"}],"model":"m1"}`, 0},
		{"no message", []string{"inference", "chat", "--model", "m1"}, "", 2},
		{"empty message", []string{"inference", "chat", "-m", " "}, "", 2},
		{"flag without value", []string{"inference", "chat", "-m"}, "", 2},
		{"unknown flag", []string{"inference", "chat", "-m", "x", "--temp", "1"}, "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var last string
			t.Setenv("OSAURUS_BRIDGE_SOCKET", serve(t, 200, `{"content":"yo"}`, &last))
			var out, errOut bytes.Buffer
			if code := run(tc.args, strings.NewReader(""), &out, &errOut); code != tc.wantCode || last != tc.wantReq {
				t.Errorf("exit %d (stderr %q), request %q; want %d, %q", code, errOut.String(), last, tc.wantCode, tc.wantReq)
			}
		})
	}
}

// serveStream answers with newline-delimited JSON lines, flushing each
// (a chunked body, as the bridge sends it).
func serveStream(t *testing.T, status int, lines []string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "bridge.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		if status != 200 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprint(w, lines[0])
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, l := range lines {
			fmt.Fprintln(w, l)
			w.(http.Flusher).Flush()
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func TestChatStream(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		lines    []string
		wantOut  string
		wantCode int
		wantErr  string
	}{
		{"deltas", 200, []string{`{"delta":"one "}`, `{"delta":"two"}`, `{"content":"one two"}`}, "one two\n", 0, ""},
		{"error midway", 200, []string{`{"delta":"one "}`, `{"error":"the model server answered HTTP 500: boom"}`}, "one \n", 1, "boom"},
		{"cut short", 200, []string{`{"delta":"one "}`}, "one \n", 1, "ended before"},
		{"not configured", 503, []string{`{"error":"inference is not configured: inferenceUrl is empty"}`}, "", 6, "inferenceUrl"},
		{"upstream", 502, []string{`{"error":"the model server answered HTTP 500: boom"}`}, "", 1, "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OSAURUS_BRIDGE_SOCKET", serveStream(t, tc.status, tc.lines))
			var out, errOut bytes.Buffer
			code := run([]string{"inference", "chat", "-m", "count", "--stream"}, nil, &out, &errOut)
			if code != tc.wantCode || out.String() != tc.wantOut || !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, ...%q...", code, out.String(), errOut.String(), tc.wantCode, tc.wantOut, tc.wantErr)
			}
		})
	}
}
