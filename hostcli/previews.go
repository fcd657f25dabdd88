package hostcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// The mcp relay's part in previews through a remote context
// (docs/remote.md): answers to sandbox_expose_port with a URL on the far
// machine's loopback get a URL on this machine's 127.0.0.1 instead,
// forwarded over the context's ssh (remotes.Forwards).

const exposeTool = "sandbox_expose_port"

// farPreviewPort reads u as a preview on the far side's loopback: exactly
// http://127.0.0.1:PORT[/path], PORT 1–65535 and written out. Anything
// else (another host, localhost, IPv6, https, user info) is not one.
func farPreviewPort(raw string) (*url.URL, int, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.User != nil || u.Opaque != "" || u.Hostname() != "127.0.0.1" {
		return nil, 0, false
	}
	if !portRe.MatchString(u.Port()) {
		return nil, 0, false
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil || p < 1 || p > 65535 {
		return nil, 0, false
	}
	return u, p, true
}

var portRe = regexp.MustCompile(`^[1-9][0-9]{0,4}$`)

// previewRelay is the mcp relay's part in previews: it notes which
// requests call sandbox_expose_port and rewrites their answers.
type previewRelay struct {
	ctxName string
	// open gives the local URL for the far side's port (forwards.open).
	open func(farPort int) (localPort int, err error)

	mu    sync.Mutex
	calls map[string]bool // ids of sandbox_expose_port calls unanswered
}

// request notes a client's message bound for the far side.
func (p *previewRelay) request(id json.RawMessage, method string, params json.RawMessage) {
	if method != "tools/call" || len(id) == 0 || string(id) == "null" {
		return
	}
	var call struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(params, &call) != nil || call.Name != exposeTool {
		return
	}
	p.mu.Lock()
	if p.calls == nil {
		p.calls = map[string]bool{}
	}
	p.calls[string(id)] = true
	p.mu.Unlock()
}

// response is the far side's answer line as the client gets it: an
// answer to a sandbox_expose_port call with a far loopback URL has a
// forwarded local one; every other line is passed as it came.
func (p *previewRelay) response(id json.RawMessage, line []byte) []byte {
	p.mu.Lock()
	ours := p.calls[string(id)]
	delete(p.calls, string(id))
	p.mu.Unlock()
	if !ours {
		return line
	}
	if out, ok := rewriteExpose(line, p.ctxName, p.open); ok {
		return out
	}
	return line
}

// elicitation is the far side's request line to the client as the client
// gets it: a URL elicitation (a secret prompt's one-time page, served on
// the far machine's loopback) has a forwarded URL here instead, as a
// preview does, so the user's browser reaches the page; every other line
// passes as it came. When the forward fails the line passes too: the
// client shows a link that can't open, and the prompt's other channels
// (the window there) still ask.
func (p *previewRelay) elicitation(method string, line []byte) []byte {
	if method != "elicitation/create" {
		return line
	}
	var msg map[string]json.RawMessage
	if decodeStrict(line, &msg) != nil || msg["params"] == nil {
		return line
	}
	var params map[string]json.RawMessage
	if decodeStrict(msg["params"], &params) != nil {
		return line
	}
	var mode, raw, message string
	if json.Unmarshal(params["mode"], &mode) != nil || mode != "url" || json.Unmarshal(params["url"], &raw) != nil {
		return line
	}
	far, farPort, isFar := farPreviewPort(raw)
	if !isFar {
		return line
	}
	lp, err := p.open(farPort)
	if err != nil {
		return line
	}
	u := *far
	u.Host = "127.0.0.1:" + strconv.Itoa(lp)
	if params["url"], err = encodeJSON(u.String()); err != nil {
		return line
	}
	if json.Unmarshal(params["message"], &message) == nil && message != "" {
		note := fmt.Sprintf(" (The page is on the machine of context %s, forwarded over SSH to this one while this MCP session runs.)", p.ctxName)
		if params["message"], err = encodeJSON(message + note); err != nil {
			return line
		}
	}
	if msg["params"], err = encodeJSON(params); err != nil {
		return line
	}
	b, err := encodeJSON(msg)
	if err != nil {
		return line
	}
	return append(b, '\n')
}

// rewriteExpose rewrites a tools/call answer of sandbox_expose_port whose
// envelope (structuredContent, or the text for clients without it) holds
// a preview URL on the far side's loopback: open forwards it, and the URL
// becomes the local one, with a note of where it leads, in both the
// structuredContent and the text. When open fails, the URL stays and a
// warning says why. ok is false when line is not such an answer.
func rewriteExpose(line []byte, ctxName string, open func(int) (int, error)) (out []byte, ok bool) {
	var msg map[string]json.RawMessage
	if decodeStrict(line, &msg) != nil || msg["result"] == nil {
		return nil, false
	}
	var res map[string]json.RawMessage
	if decodeStrict(msg["result"], &res) != nil {
		return nil, false
	}
	var isErr bool
	if res["isError"] != nil && (json.Unmarshal(res["isError"], &isErr) != nil || isErr) {
		return nil, false
	}
	var content []map[string]json.RawMessage
	if res["content"] != nil && json.Unmarshal(res["content"], &content) != nil {
		return nil, false
	}
	texts := make([]string, len(content))
	for i, c := range content {
		var typ string
		if json.Unmarshal(c["type"], &typ) == nil && typ == "text" {
			json.Unmarshal(c["text"], &texts[i])
		}
	}
	// The envelope: structuredContent, else the first text that is one.
	var env map[string]any
	if res["structuredContent"] != nil {
		if decodeStrict(res["structuredContent"], &env) != nil {
			return nil, false
		}
	} else {
		for _, t := range texts {
			if t != "" && decodeStrict([]byte(t), &env) == nil {
				break
			}
			env = nil
		}
	}
	result, _ := env["result"].(map[string]any)
	raw, _ := result["url"].(string)
	if env["ok"] != true || result == nil {
		return nil, false
	}
	far, farPort, isFar := farPreviewPort(raw)
	if !isFar {
		return nil, false
	}
	old := clone(env)
	local := ""
	if lp, err := open(farPort); err != nil {
		warnings, _ := env["warnings"].([]any)
		env["warnings"] = append(warnings, fmt.Sprintf("%s is on the machine of context %s, not the user's: forwarding it over SSH failed: %v", raw, ctxName, err))
	} else {
		u := *far
		u.Host = "127.0.0.1:" + strconv.Itoa(lp)
		local = u.String()
		result["url"] = local
		result["forwarded"] = fmt.Sprintf("%s is on the user's machine, forwarded over SSH (context %s) to the preview %s on the sandbox's machine; it works while this MCP session runs", local, ctxName, raw)
	}
	envJSON, err := encodeJSON(env)
	if err != nil {
		return nil, false
	}
	if res["structuredContent"] != nil {
		res["structuredContent"] = envJSON
	}
	for i, c := range content {
		if texts[i] == "" {
			continue
		}
		var t map[string]any
		text := texts[i]
		switch {
		case decodeStrict([]byte(text), &t) == nil && reflect.DeepEqual(t, old):
			text = string(envJSON)
		case local != "":
			text = strings.ReplaceAll(text, raw, local)
		}
		if c["text"], err = encodeJSON(text); err != nil {
			return nil, false
		}
	}
	if content != nil {
		if res["content"], err = encodeJSON(content); err != nil {
			return nil, false
		}
	}
	if msg["result"], err = encodeJSON(res); err != nil {
		return nil, false
	}
	b, err := encodeJSON(msg)
	if err != nil {
		return nil, false
	}
	return append(b, '\n'), true
}

// decodeStrict decodes one JSON value, numbers kept as written, nothing
// after it.
func decodeStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("more after the JSON value")
	}
	return nil
}

// encodeJSON is compact JSON on one line with keys sorted and without
// HTML escaping, as the envelope is written.
func encodeJSON(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// clone copies a decoded JSON object deeply enough for rewriteExpose's
// changes (the result object and the warnings) not to reach it.
func clone(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = clone(sub)
		}
		c[k] = v
	}
	return c
}
