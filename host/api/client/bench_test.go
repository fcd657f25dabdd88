package client

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api/server"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// BenchmarkRunToolOverSocket is the control socket's hop of a tool call:
// the client sends ctl.tool, a stand-in owner answers with an envelope
// like sandbox_exec's, the client decodes it. "true" is `true`'s
// envelope; "stdout-16KiB" carries 16 KiB of output with quotes and line
// ends, where encoding the envelope as a string (escaped) costs most.
func BenchmarkRunToolOverSocket(b *testing.B) {
	line := `say "hi" \ and tab	` + strings.Repeat("x", 40) + "\n"
	for _, bc := range []struct {
		name string
		env  envelope.Envelope
	}{
		{"true", envelope.OK("sandbox_exec", map[string]any{"exit_code": 0, "stdout": "", "stderr": "", "duration_ms": 3})},
		{"stdout-16KiB", envelope.OK("sandbox_exec", map[string]any{"exit_code": 0, "stdout": strings.Repeat(line, 16<<10/len(line)), "stderr": "", "duration_ms": 3})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dir, err := os.MkdirTemp("", "owner")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { os.RemoveAll(dir) })
			p := config.Paths{Root: dir}
			ln, err := server.Listen(p)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				(&server.Server{Ctl: &stubCtl{run: func(context.Context, string) envelope.Envelope { return bc.env }}}).Serve(ctx, ln)
			}()
			b.Cleanup(func() { cancel(); ln.Close(); <-done })
			cl, err := Dial(ctx, p)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(cl.Close)
			args := json.RawMessage(`{"command":"true"}`)
			for b.Loop() {
				if e := cl.RunTool(ctx, "a1", "sandbox_exec", args); !e.OK {
					b.Fatalf("%+v", e)
				}
			}
		})
	}
}

// The envelope crosses the socket as JSON inside the reply, not as a
// string holding JSON, and comes back whole.
func TestToolReplyCarriesJSON(t *testing.T) {
	env := envelope.OK("sandbox_exec", map[string]any{"exit_code": 0, "stdout": "say \"hi\"\n", "n": json.Number("12345678901234567890")})
	b, err := json.Marshal(control.ToolReply{Envelope: env.JSONBytes()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"envelope":{"ok":true,`) {
		t.Fatalf("the reply on the wire is %s", b)
	}
	p := testPaths(t)
	serve(t, p, &stubCtl{run: func(context.Context, string) envelope.Envelope { return env }})
	cl, err := Dial(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.RunTool(context.Background(), "a1", "sandbox_exec", nil); got.JSON() != env.JSON() {
		t.Errorf("came back as %s, sent %s", got.JSON(), env.JSON())
	}
}
