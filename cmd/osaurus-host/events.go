package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

const eventsForm = "events emit TYPE [PAYLOAD] | events list [--type T] [--since ID] [--limit N] | events follow [--type T] [--since ID]"

// parseEventsRead parses `events list|follow` flags into the route's query.
func parseEventsRead(sub string, a []string) (request, error) {
	q := url.Values{}
	for i := 0; i < len(a); i++ {
		name, val, hasVal := strings.Cut(a[i], "=")
		if !hasVal {
			if i+1 >= len(a) {
				return request{}, fmt.Errorf("events %s: %s needs a value", sub, a[i])
			}
			i++
			val = a[i]
		}
		switch {
		case name == "--type":
			q.Set("type", val)
		case name == "--since":
			if n, err := strconv.ParseInt(val, 10, 64); err != nil || n < 0 {
				return request{}, fmt.Errorf("events %s: --since %q: want an event id (a whole number)", sub, val)
			}
			q.Set("since", val)
		case name == "--limit" && sub == "list":
			q.Set("limit", val)
		default:
			return request{}, fmt.Errorf("expected: osaurus-host %s", eventsForm)
		}
	}
	if sub == "follow" {
		return request{method: "GET", path: "/api/events/follow", query: q, follow: true}, nil
	}
	return request{method: "GET", path: "/api/events", query: q, show: showEvents}, nil
}

type eventLine struct {
	ID      int64           `json:"id"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
	Time    string          `json:"time"`
	Plugin  string          `json:"plugin"`
	// A follow stream's first line, and its last.
	Following bool   `json:"following"`
	End       string `json:"end"`
	LastID    *int64 `json:"last_id"`
}

func (e eventLine) text() string {
	s := fmt.Sprintf("%d  %s  %s  %s", e.ID, e.Time, e.Type, e.Payload)
	if e.Plugin != "" {
		s += "  (plugin " + e.Plugin + ")"
	}
	return s
}

func showEvents(w io.Writer, resp map[string]any) error {
	es, _ := resp["events"].([]any)
	for _, x := range es {
		b, _ := json.Marshal(x)
		var e eventLine
		if json.Unmarshal(b, &e) == nil {
			fmt.Fprintln(w, e.text())
		}
	}
	return nil
}

// runFollow prints events as the bridge streams them, one a line (the
// raw JSON with --json), and follows on from the last one when the
// bridge ends a stream at its time limit, until interrupted.
func runFollow(sock string, req request, jsonOut bool, stdout, stderr io.Writer) int {
	for {
		end, code := followOnce(sock, req, jsonOut, stdout, stderr)
		if end == nil {
			return code
		}
		req.query.Set("since", strconv.FormatInt(*end, 10))
	}
}

// followOnce reads one stream; it returns the id to follow on from when
// the bridge ended the stream at its limit.
func followOnce(sock string, req request, jsonOut bool, stdout, stderr io.Writer) (*int64, int) {
	conn, err := send(sock, req)
	if err != nil {
		fmt.Fprintf(stderr, "osaurus-host: cannot reach the host bridge at %s: %v\n", sock, err)
		return nil, exitNoBridge
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	status, h, err := readHead(r)
	if err != nil {
		fmt.Fprintf(stderr, "osaurus-host: cannot reach the host bridge at %s: %v\n", sock, err)
		return nil, exitNoBridge
	}
	if status >= 300 || !strings.HasPrefix(h["content-type"], "application/x-ndjson") {
		body, err := readBody(r, h)
		if err != nil {
			fmt.Fprintf(stderr, "osaurus-host: %v\n", err)
			return nil, exitFailed
		}
		return nil, failed(max(status, 300), h, body, stderr)
	}
	var body io.Reader = r
	if strings.EqualFold(h["transfer-encoding"], "chunked") {
		body = &chunked{r: r}
	}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e eventLine
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintf(stderr, "osaurus-host: bad stream line %q\n", sc.Text())
			return nil, exitFailed
		}
		switch {
		case e.Following:
		case e.End != "":
			if e.LastID != nil && strings.Contains(e.End, "limit") {
				return e.LastID, exitOK
			}
			fmt.Fprintf(stderr, "osaurus-host: %s\n", e.End)
			return nil, exitFailed
		case jsonOut:
			fmt.Fprintf(stdout, "%s\n", sc.Bytes())
		default:
			fmt.Fprintln(stdout, e.text())
		}
		if f, ok := stdout.(interface{ Flush() error }); ok {
			f.Flush()
		}
	}
	err = sc.Err()
	if err == nil {
		err = errors.New("the host closed the stream")
	}
	fmt.Fprintf(stderr, "osaurus-host: following events: %v\n", err)
	return nil, exitNoBridge
}
