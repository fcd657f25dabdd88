package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestStdioLineFilter: well-formed messages pass through in order; every
// other line is answered with its JSON-RPC error, including one too long
// to buffer, and reading goes on.
func TestStdioLineFilter(t *testing.T) {
	ok1 := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	ok2 := `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`
	in := strings.Join([]string{
		ok1 + "\r",
		"",
		"   ",
		"not json",
		`{"jsonrpc":"2.0","id":"a","params":{}}`,
		`"just a string"`,
		`{"jsonrpc":"2.0","id":3,"method":"x"`,
		`{"x":"` + strings.Repeat("y", MaxStdioLine) + `"}`,
		ok2,
	}, "\n")
	var out bytes.Buffer
	f := &lineFilter{r: bufio.NewReaderSize(strings.NewReader(in), 64<<10), out: &out}
	passed, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if string(passed) != ok1+"\n"+ok2+"\n" {
		t.Errorf("passed %q", passed)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m struct {
			ID    any `json:"id"`
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("answer not JSON: %s", l)
		}
		got = append(got, strings.TrimSpace(strings.Join([]string{itoa(m.Error.Code), anyStr(m.ID)}, " ")))
	}
	want := []string{"-32700 <nil>", "-32600 a", "-32600 <nil>", "-32700 <nil>", "-32700 <nil>"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("answers %v, want %v", got, want)
	}
}

// TestScrubGoTypes: an error naming Go types is rewritten; other messages
// pass unchanged.
func TestScrubGoTypes(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"handling 'tools/call': invalid params: unmarshaling \"x\" into a *mcp.CallToolParamsRaw: json: cannot unmarshal string into Go value of type mcp.CallToolParamsRaw"}}` + "\n"
	out := string(ScrubGoTypes([]byte(in)))
	if strings.Contains(out, "mcp.") || strings.Contains(out, "Go value") || !strings.Contains(out, "invalid params for tools/call") || !strings.HasSuffix(out, "}\n") {
		t.Errorf("scrubbed: %s", out)
	}
	ok := `{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"see mcp.Server docs"}]}}` + "\n"
	if got := string(ScrubGoTypes([]byte(ok))); got != ok {
		t.Errorf("a result was changed: %s", got)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func anyStr(v any) string {
	if v == nil {
		return "<nil>"
	}
	s, _ := v.(string)
	return s
}

// TestHTTPErrorsNameNoGoTypes: over HTTP too, a request whose params have
// the wrong shape gets an error in the protocol's terms.
func TestHTTPErrorsNameNoGoTypes(t *testing.T) {
	f := newFixture(t)
	url := serveHTTP(t, f)
	post := func(body, session string) (string, string) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+f.tok)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.Header.Get("Mcp-Session-Id")
	}
	_, session := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`, "")
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, session)
	body, _ := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":"sandbox_read_file"}`, session)
	if !strings.Contains(body, "invalid params for tools/call") || strings.Contains(body, "mcp.") || strings.Contains(body, "Go value") {
		t.Errorf("bad params over HTTP: %s", body)
	}
}
