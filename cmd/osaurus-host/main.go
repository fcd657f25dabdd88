// Command osaurus-host is the guest's client of the host API bridge. It
// talks plain HTTP/1.1 to /run/osaurus-bridge.sock; the guest agent
// relays the connection to the app and attaches the caller's identity
// from the kernel, so there is nothing to configure and no token.
//
// It is deliberately free of net/http to stay small: it is copied into
// every guest at boot.
//
// Exit codes:
//
//	0  success
//	1  the bridge answered with an error not listed below (message on stderr)
//	2  usage error
//	3  not found (404)
//	4  refused: the caller is not an agent user, or not allowed (401, 403)
//	5  rate limited (429); stderr says when to retry
//	6  the host service is unavailable (503)
//	7  the bridge socket can't be reached (the VM has no guest agent relay)
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Exit codes, see the package comment.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitNotFound    = 3
	exitRefused     = 4
	exitRateLimited = 5
	exitUnavailable = 6
	exitNoBridge    = 7
)

const defaultSocket = "/run/osaurus-bridge.sock"

const usage = `usage: osaurus-host [--json] COMMAND
  secrets get NAME              print the calling agent's secret NAME
  config get KEY                print a config value (nothing when unset)
  config set KEY VALUE          store a config value
  inference chat -m MESSAGE [--model M] [--system S] [--stream]
                                run a chat completion on the host's model
  agent dispatch ID TASK [--wait]
                                dispatch a task to yourself or to an agent your
                                dispatchTo setting lists (ID: an agent id or name);
                                --wait prints the answer when it is done
  agent memory query TEXT       search the agent's memory
  agent memory store TEXT       store a memory entry
  events emit TYPE [PAYLOAD]    emit an event (PAYLOAD: JSON or text)
  events list [--type T] [--since ID] [--limit N]
                                the events you (or your plugins) emitted, newest
                                N (100); a plugin sees its own and its type family
  events follow [--type T] [--since ID]
                                print events as they are emitted, until interrupted
  plugin create                 create a plugin from JSON on stdin
  log [LEVEL] MESSAGE           append to the agent's log buffer
  ping                          check the bridge
--json prints the bridge's raw JSON answer.
Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 refused, 5 rate limited,
6 service unavailable, 7 bridge unreachable.`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

type request struct {
	method, path string
	body         any
	// show prints a successful answer in the plain (non --json) form.
	show func(w io.Writer, resp map[string]any) error
	// stream: the answer is newline-delimited JSON printed as it comes.
	stream bool
	// query is the path's query (escaped when sent).
	query url.Values
	// follow: an events follow stream (runFollow).
	follow bool
	// then continues after a successful answer was shown (e.g. waiting
	// for a dispatched task).
	then func(sock string, resp map[string]any, stdout, stderr io.Writer) int
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	jsonOut := false
	var rest []string
	for i, a := range args {
		if a == "--json" {
			jsonOut = true
			continue
		}
		if a == "--" {
			rest = append(rest, args[i+1:]...)
			break
		}
		if a == "-h" || a == "--help" || a == "help" {
			fmt.Fprintln(stdout, usage)
			return exitOK
		}
		rest = append(rest, a)
	}
	req, err := parse(rest, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "osaurus-host: %v\n\n%s\n", err, usage)
		return exitUsage
	}
	sock := os.Getenv("OSAURUS_BRIDGE_SOCKET")
	if sock == "" {
		sock = defaultSocket
	}
	if req.stream && !jsonOut {
		return runStream(sock, req, stdout, stderr)
	}
	if req.follow {
		return runFollow(sock, req, jsonOut, stdout, stderr)
	}
	status, header, body, err := do(sock, req)
	if err != nil {
		fmt.Fprintf(stderr, "osaurus-host: cannot reach the host bridge at %s: %v\n", sock, err)
		return exitNoBridge
	}
	var resp map[string]any
	jerr := json.Unmarshal(body, &resp)
	if status >= 300 {
		return failed(status, header, body, stderr)
	}
	if jsonOut || jerr != nil || req.show == nil {
		stdout.Write(body)
		if len(body) > 0 && body[len(body)-1] != '\n' {
			fmt.Fprintln(stdout)
		}
		return exitOK
	}
	if err := req.show(stdout, resp); err != nil {
		fmt.Fprintf(stderr, "osaurus-host: %v\n", err)
		return exitFailed
	}
	if req.then != nil {
		return req.then(sock, resp, stdout, stderr)
	}
	return exitOK
}

// failed reports an error answer and returns its exit code.
func failed(status int, header map[string]string, body []byte, stderr io.Writer) int {
	msg := strings.TrimSpace(string(body))
	var resp map[string]any
	if json.Unmarshal(body, &resp) == nil {
		if e, ok := resp["error"].(string); ok {
			msg = e
		}
	}
	if ra := header["retry-after"]; status == 429 && ra != "" {
		msg += " (retry after " + ra + "s)"
	}
	fmt.Fprintf(stderr, "osaurus-host: %s (HTTP %d)\n", msg, status)
	switch status {
	case 404:
		return exitNotFound
	case 401, 403:
		return exitRefused
	case 429:
		return exitRateLimited
	case 503:
		return exitUnavailable
	}
	return exitFailed
}

func printField(name string) func(io.Writer, map[string]any) error {
	return func(w io.Writer, resp map[string]any) error {
		v, ok := resp[name]
		if !ok {
			return nil
		}
		if s, ok := v.(string); ok {
			_, err := fmt.Fprintln(w, s)
			return err
		}
		b, _ := json.Marshal(v)
		_, err := fmt.Fprintln(w, string(b))
		return err
	}
}

func quiet(io.Writer, map[string]any) error { return nil }

var logLevels = map[string]bool{"debug": true, "info": true, "warn": true, "warning": true, "error": true}

func parse(a []string, stdin io.Reader) (request, error) {
	want := func(n int, form string) error {
		if len(a) != n {
			return fmt.Errorf("expected: osaurus-host %s", form)
		}
		return nil
	}
	if len(a) == 0 {
		return request{}, errors.New("no command")
	}
	p := url.PathEscape
	switch a[0] {
	case "ping":
		return request{method: "GET", path: "/api/ping", show: printField("status")}, want(1, "ping")
	case "secrets":
		if len(a) >= 2 && a[1] == "get" {
			if err := want(3, "secrets get NAME"); err != nil {
				return request{}, err
			}
			return request{method: "GET", path: "/api/secrets/" + p(a[2]), show: printField("value")}, nil
		}
		return request{}, errors.New("expected: osaurus-host secrets get NAME")
	case "config":
		switch {
		case len(a) >= 2 && a[1] == "get":
			if err := want(3, "config get KEY"); err != nil {
				return request{}, err
			}
			return request{method: "GET", path: "/api/config/" + p(a[2]), show: printField("value")}, nil
		case len(a) >= 2 && a[1] == "set":
			if err := want(4, "config set KEY VALUE"); err != nil {
				return request{}, err
			}
			return request{method: "POST", path: "/api/config/" + p(a[2]), body: map[string]string{"value": a[3]}, show: quiet}, nil
		}
		return request{}, errors.New("expected: osaurus-host config get KEY | config set KEY VALUE")
	case "inference":
		if len(a) >= 2 && a[1] == "chat" {
			return parseChat(a[2:])
		}
		return request{}, errors.New("expected: osaurus-host inference chat -m MESSAGE [--model M] [--system S] [--stream]")
	case "agent":
		switch {
		case len(a) >= 2 && a[1] == "dispatch":
			return parseDispatch(a[2:])
		case len(a) == 4 && a[1] == "memory" && a[2] == "query":
			return request{method: "POST", path: "/api/agent/memory/query", body: map[string]string{"query": a[3]}, show: showMemory}, nil
		case len(a) == 4 && a[1] == "memory" && a[2] == "store":
			return request{method: "POST", path: "/api/agent/memory/store", body: map[string]string{"content": a[3]}, show: quiet}, nil
		}
		return request{}, errors.New("expected: osaurus-host agent dispatch ID TASK [--wait] | agent memory query TEXT | agent memory store TEXT")
	case "events":
		if (len(a) == 3 || len(a) == 4) && a[1] == "emit" {
			body := map[string]any{"type": a[2]}
			if len(a) == 4 {
				var v any
				if json.Unmarshal([]byte(a[3]), &v) == nil {
					body["payload"] = v
				} else {
					body["payload"] = a[3]
				}
			}
			return request{method: "POST", path: "/api/events/emit", body: body, show: quiet}, nil
		}
		if len(a) >= 2 && (a[1] == "list" || a[1] == "follow") {
			return parseEventsRead(a[1], a[2:])
		}
		return request{}, errors.New("expected: osaurus-host " + eventsForm)
	case "plugin":
		if len(a) == 2 && a[1] == "create" {
			b, err := io.ReadAll(io.LimitReader(stdin, 8<<20+1))
			if err != nil {
				return request{}, fmt.Errorf("reading the plugin JSON from stdin: %w", err)
			}
			if !json.Valid(b) {
				return request{}, errors.New("plugin create: stdin is not valid JSON")
			}
			return request{method: "POST", path: "/api/plugin/create", body: json.RawMessage(b), show: printField("plugin_id")}, nil
		}
		return request{}, errors.New("expected: osaurus-host plugin create < plugin.json")
	case "log":
		switch {
		case len(a) == 2:
			return request{method: "POST", path: "/api/log", body: map[string]string{"level": "info", "message": a[1]}, show: quiet}, nil
		case len(a) == 3 && logLevels[strings.ToLower(a[1])]:
			return request{method: "POST", path: "/api/log", body: map[string]string{"level": strings.ToLower(a[1]), "message": a[2]}, show: quiet}, nil
		}
		return request{}, errors.New("expected: osaurus-host log [debug|info|warn|error] MESSAGE")
	}
	return request{}, fmt.Errorf("unknown command %q", a[0])
}

func showMemory(w io.Writer, resp map[string]any) error {
	rs, _ := resp["results"].([]any)
	for _, r := range rs {
		if m, ok := r.(map[string]any); ok {
			fmt.Fprintln(w, m["content"])
		}
	}
	return nil
}

// do sends one request and reads the answer. Header names are lower case.
func do(sock string, req request) (int, map[string]string, []byte, error) {
	conn, err := send(sock, req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer conn.Close()
	return readResponse(bufio.NewReader(conn))
}

// send connects and writes one request.
func send(sock string, req request) (net.Conn, error) {
	conn, err := net.DialTimeout("unix", sock, 10*time.Second)
	if err != nil {
		return nil, err
	}
	var body []byte
	if req.body != nil {
		if body, err = json.Marshal(req.body); err != nil {
			conn.Close()
			return nil, err
		}
	}
	var b bytes.Buffer
	target := req.path
	if len(req.query) > 0 {
		target += "?" + req.query.Encode()
	}
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: bridge\r\nUser-Agent: osaurus-host\r\nAccept: application/json\r\nConnection: close\r\n", req.method, target)
	if body != nil {
		fmt.Fprintf(&b, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	if _, err := conn.Write(b.Bytes()); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// readResponse parses an HTTP/1.1 response: status line, headers, and a
// body by Content-Length, chunked, or up to EOF.
func readResponse(r *bufio.Reader) (int, map[string]string, []byte, error) {
	status, h, err := readHead(r)
	if err != nil {
		return 0, nil, nil, err
	}
	body, err := readBody(r, h)
	if err != nil {
		return 0, nil, nil, err
	}
	return status, h, body, nil
}

// readHead reads the status line and the headers (names lower case).
func readHead(r *bufio.Reader) (int, map[string]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, nil, fmt.Errorf("no answer: %w", err)
	}
	f := strings.Fields(line)
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/1.") {
		return 0, nil, fmt.Errorf("bad status line %q", strings.TrimSpace(line))
	}
	status, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, nil, fmt.Errorf("bad status line %q", strings.TrimSpace(line))
	}
	h := map[string]string{}
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return 0, nil, fmt.Errorf("reading headers: %w", err)
		}
		l = strings.TrimRight(l, "\r\n")
		if l == "" {
			break
		}
		if k, v, ok := strings.Cut(l, ":"); ok {
			h[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	return status, h, nil
}

// readBody reads a body by Content-Length, chunked, or up to EOF.
func readBody(r *bufio.Reader, h map[string]string) ([]byte, error) {
	var err error
	const max = 64 << 20
	var body []byte
	switch {
	case strings.EqualFold(h["transfer-encoding"], "chunked"):
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return nil, fmt.Errorf("reading body: %w", err)
			}
			sz, _, _ := strings.Cut(strings.TrimSpace(l), ";")
			n, err := strconv.ParseInt(sz, 16, 64)
			if err != nil || n < 0 || int64(len(body))+n > max {
				return nil, fmt.Errorf("bad chunk size %q", strings.TrimSpace(l))
			}
			if n == 0 {
				break
			}
			chunk := make([]byte, n)
			if _, err := io.ReadFull(r, chunk); err != nil {
				return nil, fmt.Errorf("reading body: %w", err)
			}
			body = append(body, chunk...)
			if _, err := r.Discard(2); err != nil {
				return nil, fmt.Errorf("reading body: %w", err)
			}
		}
	case h["content-length"] != "":
		n, err := strconv.ParseInt(h["content-length"], 10, 64)
		if err != nil || n < 0 || n > max {
			return nil, fmt.Errorf("bad content length %q", h["content-length"])
		}
		body = make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, fmt.Errorf("reading body: %w", err)
		}
	default:
		if body, err = io.ReadAll(io.LimitReader(r, max)); err != nil {
			return nil, fmt.Errorf("reading body: %w", err)
		}
	}
	return body, nil
}
