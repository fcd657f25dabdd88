package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// events follow prints each event and, when the bridge ends a stream at
// its time limit, follows on from the last id; list sends the filters.
func TestEventsFollowAndList(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "bridge.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var queries []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.Path+"?"+r.URL.RawQuery)
		n := len(queries)
		mu.Unlock()
		if r.URL.Path == "/api/events" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"events":[{"id":3,"type":"a.b","payload":{"x":1},"time":"T","plugin":"p"}]}`)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintln(w, `{"following":true}`)
		if n == 1 {
			fmt.Fprintln(w, `{"id":7,"type":"a.b","payload":null,"time":"T"}`)
			fmt.Fprintln(w, `{"end":"the stream reached its limit of 10m0s","last_id":7}`)
			return
		}
		fmt.Fprintln(w, `{"id":8,"type":"a.c","payload":"hi","time":"T"}`)
		fmt.Fprintln(w, `{"end":"the event log failed: gone","last_id":8}`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	t.Setenv("OSAURUS_BRIDGE_SOCKET", sock)

	var out, errOut bytes.Buffer
	code := run([]string{"events", "follow", "--type", "a", "--since", "5"}, nil, &out, &errOut)
	if code != exitFailed || out.String() != "7  T  a.b  null\n8  T  a.c  \"hi\"\n" || !strings.Contains(errOut.String(), "gone") {
		t.Errorf("follow: %d %q %q", code, out.String(), errOut.String())
	}
	if len(queries) != 2 || queries[0] != "/api/events/follow?since=5&type=a" || queries[1] != "/api/events/follow?since=7&type=a" {
		t.Errorf("follow requests: %q", queries)
	}
	out.Reset()
	if code := run([]string{"events", "list", "--type=a", "--limit", "1"}, nil, &out, &errOut); code != 0 || out.String() != "3  T  a.b  {\"x\":1}  (plugin p)\n" {
		t.Errorf("list: %d %q", code, out.String())
	}
	if q := queries[len(queries)-1]; q != "/api/events?limit=1&type=a" {
		t.Errorf("list request: %q", q)
	}
	if code := run([]string{"events", "list", "--since", "x"}, nil, &out, &errOut); code != exitUsage {
		t.Errorf("bad --since: %d", code)
	}
}
