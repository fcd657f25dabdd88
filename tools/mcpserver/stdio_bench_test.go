package mcpserver

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

// BenchmarkStdioFilter is the stdio filter's cost per JSON-RPC line: a
// sandbox_exec call as a client sends it.
func BenchmarkStdioFilter(b *testing.B) {
	line := `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"sandbox_exec","arguments":{"command":"` +
		strings.Repeat("echo hello; ", 20) + `true","timeout_seconds":60}}}` + "\n"
	in := strings.Repeat(line, 100)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		f := &lineFilter{r: bufio.NewReaderSize(strings.NewReader(in), 64<<10), out: io.Discard}
		n, err := io.Copy(io.Discard, f)
		if err != nil || n != int64(len(in)) {
			b.Fatal(n, err)
		}
	}
}
