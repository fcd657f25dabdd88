package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

const chatForm = "inference chat -m MESSAGE [--model M] [--system S] [--stream]"

// parseChat reads the flags of `inference chat`, in any order.
func parseChat(a []string) (request, error) {
	var msg, model, system string
	var haveMsg, stream bool
	for i := 0; i < len(a); i++ {
		val := func() (string, error) {
			if i+1 >= len(a) {
				return "", fmt.Errorf("%s needs a value; expected: osaurus-host %s", a[i], chatForm)
			}
			i++
			return a[i], nil
		}
		var err error
		switch a[i] {
		case "-m", "--message":
			msg, err = val()
			haveMsg = true
		case "--model":
			model, err = val()
		case "--system", "-s":
			system, err = val()
		case "--stream":
			stream = true
		default:
			return request{}, fmt.Errorf("unexpected %q; expected: osaurus-host %s", a[i], chatForm)
		}
		if err != nil {
			return request{}, err
		}
	}
	if !haveMsg || strings.TrimSpace(msg) == "" {
		return request{}, fmt.Errorf("a message is required; expected: osaurus-host %s", chatForm)
	}
	var msgs []map[string]string
	if system != "" {
		msgs = append(msgs, map[string]string{"role": "system", "content": system})
	}
	msgs = append(msgs, map[string]string{"role": "user", "content": msg})
	body := map[string]any{"messages": msgs}
	if model != "" {
		body["model"] = model
	}
	if stream {
		body["stream"] = true
	}
	return request{method: "POST", path: "/api/inference/chat", body: body, show: printField("content"), stream: stream}, nil
}

// runStream prints a streamed answer's deltas as they arrive.
func runStream(sock string, req request, stdout, stderr io.Writer) int {
	conn, err := send(sock, req)
	if err != nil {
		fmt.Fprintf(stderr, "osaurus-host: cannot reach the host bridge at %s: %v\n", sock, err)
		return exitNoBridge
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	status, h, err := readHead(r)
	if err != nil {
		fmt.Fprintf(stderr, "osaurus-host: cannot reach the host bridge at %s: %v\n", sock, err)
		return exitNoBridge
	}
	if status >= 300 || !strings.HasPrefix(h["content-type"], "application/x-ndjson") {
		body, err := readBody(r, h)
		if err != nil {
			fmt.Fprintf(stderr, "osaurus-host: %v\n", err)
			return exitFailed
		}
		if status >= 300 {
			return failed(status, h, body, stderr)
		}
		var resp map[string]any
		if json.Unmarshal(body, &resp) != nil {
			stdout.Write(body)
			return exitOK
		}
		printField("content")(stdout, resp)
		return exitOK
	}
	var body io.Reader = r
	if strings.EqualFold(h["transfer-encoding"], "chunked") {
		body = &chunked{r: r}
	}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var l struct {
			Delta   *string `json:"delta"`
			Content *string `json:"content"`
			Error   *string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			fmt.Fprintf(stderr, "osaurus-host: bad stream line %q\n", sc.Text())
			return exitFailed
		}
		switch {
		case l.Delta != nil:
			io.WriteString(stdout, *l.Delta)
		case l.Error != nil:
			fmt.Fprintf(stdout, "\n")
			fmt.Fprintf(stderr, "osaurus-host: %s\n", *l.Error)
			return exitFailed
		case l.Content != nil:
			fmt.Fprintln(stdout)
			return exitOK
		}
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stderr, "osaurus-host: the stream ended before the answer was complete")
	return exitFailed
}

// chunked decodes an HTTP/1.1 chunked body as it arrives.
type chunked struct {
	r    *bufio.Reader
	left int64 // bytes left in the current chunk
	done bool
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.done {
		return 0, io.EOF
	}
	if c.left == 0 {
		l, err := c.r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		sz, _, _ := strings.Cut(strings.TrimSpace(l), ";")
		n, err := strconv.ParseInt(sz, 16, 64)
		if err != nil || n < 0 {
			return 0, errors.New("bad chunk size " + strconv.Quote(strings.TrimSpace(l)))
		}
		if n == 0 {
			c.done = true
			return 0, io.EOF
		}
		c.left = n
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left == 0 && err == nil {
		_, err = c.r.Discard(2) // the CRLF after the chunk
	}
	return n, err
}
