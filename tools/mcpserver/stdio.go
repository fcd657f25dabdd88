package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxStdioLine bounds one JSON-RPC message on stdio, as the SDK does.
const MaxStdioLine = mcp.DefaultMaxLineLength

// JSON-RPC error codes the stdio filter answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// StdioTransport is MCP over a pair of streams, one message per line, as
// clients speak it; unlike the SDK's own, a line that isn't a JSON-RPC
// message is answered with a JSON-RPC error (-32700 for text that isn't
// JSON, -32600 for JSON that isn't a message) and the session goes on,
// and no error a client receives names a Go type.
func StdioTransport(in io.Reader, out io.Writer) mcp.Transport {
	w := &scrubWriter{w: out}
	return &mcp.IOTransport{Reader: io.NopCloser(&lineFilter{r: bufio.NewReaderSize(in, 64<<10), out: w}), Writer: w}
}

// scrubWriter serialises writes (the filter's answers and the SDK's
// messages) and takes Go type names out of error messages.
type scrubWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *scrubWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(ScrubGoTypes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *scrubWriter) Close() error { return nil }

// goTypeRE matches what encoding/json and the SDK say about Go types:
// "into Go value of type mcp.CallToolParamsRaw", "into a
// *mcp.CallToolParamsRaw", "Go struct field X.y of type string".
var goTypeRE = regexp.MustCompile(`Go (?:value|struct field)|\*?\b(?:mcp|jsonrpc2?|json|jsonschema)\.[A-Z][A-Za-z0-9_]*`)

// handlingRE finds the method in the SDK's "handling 'tools/call': ...".
var handlingRE = regexp.MustCompile(`handling '([a-z/_]+)'`)

// ScrubGoTypes rewrites a JSON-RPC message (one line) for a client: an
// error message that names Go types becomes a sentence in the protocol's
// terms. Other messages pass unchanged.
func ScrubGoTypes(line []byte) []byte {
	if !goTypeRE.Match(line) {
		return line
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil || m["error"] == nil {
		return line
	}
	var e map[string]any
	if json.Unmarshal(m["error"], &e) != nil {
		return line
	}
	msg, _ := e["message"].(string)
	if !goTypeRE.MatchString(msg) {
		return line
	}
	what := "the params don't have the shape the method takes (see the MCP specification)"
	if h := handlingRE.FindStringSubmatch(msg); h != nil {
		e["message"] = fmt.Sprintf("invalid params for %s: %s", h[1], what)
	} else {
		e["message"] = "invalid request: " + what
	}
	delete(e, "data")
	m["error"], _ = json.Marshal(e)
	out, err := json.Marshal(m)
	if err != nil {
		return line
	}
	if bytes.HasSuffix(line, []byte("\n")) {
		out = append(out, '\n')
	}
	return out
}

// lineFilter passes well-formed JSON-RPC lines to the SDK and answers the
// rest itself.
type lineFilter struct {
	r       *bufio.Reader
	out     io.Writer
	pending []byte
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		line, err := f.readLine()
		if len(line) > 0 {
			f.pending = f.check(line)
		}
		if err != nil && len(f.pending) == 0 {
			return 0, err
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// readLine returns one line without its end; a line over MaxStdioLine is
// discarded up to its end and answered here.
func (f *lineFilter) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := f.r.ReadSlice('\n')
		if len(line)+len(chunk) > MaxStdioLine {
			line = nil
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = f.r.ReadSlice('\n')
			}
			f.answer(nil, codeParseError, fmt.Sprintf("parse error: a message is at most %d bytes on one line", MaxStdioLine))
			if err != nil {
				return nil, err
			}
			continue
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

// check returns the line (with its newline) to pass on, or nil after
// answering it. An object, every message but a batch, is decoded once:
// the decoder's syntax error is the parse error.
func (f *lineFilter) check(line []byte) []byte {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return nil
	}
	switch trimmed[0] {
	case '{':
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  *string         `json:"method"`
			Result  json.RawMessage `json:"result"`
			Error   json.RawMessage `json:"error"`
		}
		err := json.Unmarshal(trimmed, &m)
		if _, syntax := err.(*json.SyntaxError); syntax {
			f.answer(nil, codeParseError, parseErrorMsg)
			return nil
		}
		if err != nil || m.JSONRPC != "2.0" || (m.Method == nil && m.Result == nil && m.Error == nil) {
			f.answer(validID(m.ID), codeInvalidRequest, `invalid request: a message is a JSON object with "jsonrpc": "2.0" and a "method" (or a "result" or "error")`)
			return nil
		}
	case '[':
		// A batch: the SDK answers it (or refuses it in newer protocol versions).
		if !json.Valid(trimmed) {
			f.answer(nil, codeParseError, parseErrorMsg)
			return nil
		}
	default:
		if !json.Valid(trimmed) {
			f.answer(nil, codeParseError, parseErrorMsg)
		} else {
			f.answer(nil, codeInvalidRequest, "invalid request: a message is a JSON object")
		}
		return nil
	}
	return append(trimmed, '\n')
}

const parseErrorMsg = "parse error: the line is not JSON; send one JSON-RPC 2.0 message per line"

// validID is id when it is a JSON-RPC id (a string or a number).
func validID(id json.RawMessage) json.RawMessage {
	if len(id) > 0 && (id[0] == '"' || id[0] == '-' || id[0] >= '0' && id[0] <= '9') {
		return id
	}
	return nil
}

func (f *lineFilter) answer(id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	f.out.Write(append(b, '\n'))
}
