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

// serveTask answers a dispatch, then each poll with the next state.
func serveTask(t *testing.T, polls []string) (string, *[]string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "bridge.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		w.Header().Set("Content-Type", "application/json")
		if r.Method == "POST" {
			fmt.Fprint(w, `{"task_id":"0123456789abcdef"}`)
			return
		}
		p := polls[0]
		polls = polls[1:]
		fmt.Fprint(w, p)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock, &seen
}

func TestDispatchWait(t *testing.T) {
	for _, tc := range []struct {
		name     string
		polls    []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"done", []string{`{"state":"running"}`, `{"state":"done","answer":"made hello.py","steps":3}`}, 0, "made hello.py\n", "dispatched"},
		{"failed", []string{`{"state":"failed","error":"the step budget of 3 model calls ran out","steps":3}`}, 1, "", "failed after 3 steps: the step budget"},
		{"cancelled", []string{`{"state":"cancelled","error":"cancelled","steps":1}`}, 1, "", "cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock, seen := serveTask(t, tc.polls)
			t.Setenv("OSAURUS_BRIDGE_SOCKET", sock)
			var out, errOut bytes.Buffer
			code := run([]string{"agent", "dispatch", "alice", "make hello.py", "--wait"}, nil, &out, &errOut)
			if code != tc.wantCode || out.String() != tc.wantOut || !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
			}
			if (*seen)[0] != `POST /api/agent/dispatch {"agent_id":"alice","task":"make hello.py"}` || (*seen)[1] != "GET /api/agent/tasks/0123456789abcdef?wait=60 " {
				t.Errorf("requests %q", *seen)
			}
		})
	}
}
