package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// The filter decodes an object line once and still tells text that isn't
// JSON (-32700) from JSON of the wrong shape (-32600, with its id).
func TestStdioFilterOneDecode(t *testing.T) {
	for _, tc := range []struct {
		line string
		code int
		id   string
	}{
		{`{"jsonrpc":2,"id":7,"method":"x"}`, codeInvalidRequest, "7"},
		{`{"jsonrpc":"2.0","id":"q","method":5}`, codeInvalidRequest, `"q"`},
		{`{"jsonrpc":"2.0","id":8,"method":"x"} trailing`, codeParseError, "null"},
		{`{"jsonrpc":"2.0","id":9,"method":"x",}`, codeParseError, "null"},
		{`[{"jsonrpc":"2.0"`, codeParseError, "null"},
		{`12`, codeInvalidRequest, "null"},
		{`1 2`, codeParseError, "null"},
	} {
		var out bytes.Buffer
		f := &lineFilter{r: bufio.NewReader(strings.NewReader(tc.line + "\n")), out: &out}
		if passed, _ := io.ReadAll(f); len(passed) != 0 {
			t.Errorf("%s passed to the SDK", tc.line)
			continue
		}
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(out.Bytes(), &m); err != nil || m.Error.Code != tc.code || string(m.ID) != tc.id {
			t.Errorf("%s: answered %s, want code %d id %s", tc.line, out.Bytes(), tc.code, tc.id)
		}
	}
}
