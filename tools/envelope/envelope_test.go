package envelope

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/sandboxpath"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
)

func TestKindDefaults(t *testing.T) {
	want := map[Kind]bool{
		InvalidArgs: true, Rejected: false, Timeout: true, ExecutionError: true,
		NotFound: false, ToolNotFound: false, Unavailable: true, UserDenied: false,
	}
	if len(Kinds) != len(want) {
		t.Fatalf("Kinds has %d entries, want %d", len(Kinds), len(want))
	}
	for _, k := range Kinds {
		r, ok := want[k]
		if !ok {
			t.Fatalf("unexpected kind %q", k)
		}
		if k.Retryable() != r {
			t.Errorf("%s.Retryable() = %v, want %v", k, k.Retryable(), r)
		}
	}
}

func TestJSON(t *testing.T) {
	type listing struct {
		Kind       string `json:"kind"`
		Path       string `json:"path"`
		EntryCount int    `json:"entry_count"`
		Truncated  bool   `json:"truncated"`
	}
	tests := []struct {
		name string
		env  Envelope
		want string
	}{
		{"ok null", OK("", nil), `{"ok":true,"result":null}`},
		{"ok tool", OK("sandbox_exec", map[string]any{"stdout": "a && b < c", "exit_code": 0, "stderr": ""}, "empty stderr"),
			`{"ok":true,"result":{"exit_code":0,"stderr":"","stdout":"a && b < c"},"tool":"sandbox_exec","warnings":["empty stderr"]}`},
		{"struct fields sorted", OK("sandbox_list_directory", listing{"listing", "/w", 2, false}),
			`{"ok":true,"result":{"entry_count":2,"kind":"listing","path":"/w","truncated":false},"tool":"sandbox_list_directory"}`},
		{"text", Text("t", "hi"), `{"ok":true,"result":{"text":"hi"},"tool":"t"}`},
		{"big int kept exact", OK("", map[string]int64{"size": math.MaxInt64}), `{"ok":true,"result":{"size":9223372036854775807}}`},
		{"invalid_args", InvalidArg("sandbox_read_file", "path", "a path under /workspace/agents/bob", "Argument `path` rejected: traversal. Got `../x`."),
			"{\"expected\":\"a path under /workspace/agents/bob\",\"field\":\"path\",\"kind\":\"invalid_args\",\"message\":\"Argument `path` rejected: traversal. Got `../x`.\",\"ok\":false,\"retryable\":true,\"tool\":\"sandbox_read_file\"}"},
		{"rejected", Fail("sandbox_exec", Rejected, "limit"), `{"kind":"rejected","message":"limit","ok":false,"retryable":false,"tool":"sandbox_exec"}`},
		{"timeout", Fail("sandbox_exec", Timeout, "timed out"), `{"kind":"timeout","message":"timed out","ok":false,"retryable":true,"tool":"sandbox_exec"}`},
		{"execution_error", Fail("x", ExecutionError, "exit 1"), `{"kind":"execution_error","message":"exit 1","ok":false,"retryable":true,"tool":"x"}`},
		{"not_found", Fail("x", NotFound, "no file"), `{"kind":"not_found","message":"no file","ok":false,"retryable":false,"tool":"x"}`},
		{"tool_not_found", Fail("", ToolNotFound, "no tool"), `{"kind":"tool_not_found","message":"no tool","ok":false,"retryable":false}`},
		{"unavailable", Fail("x", Unavailable, "vm down"), `{"kind":"unavailable","message":"vm down","ok":false,"retryable":true,"tool":"x"}`},
		{"user_denied", Failf("sandbox_secret_set", UserDenied, "user cancelled %s", "KEY"), `{"kind":"user_denied","message":"user cancelled KEY","ok":false,"retryable":false,"tool":"sandbox_secret_set"}`},
		{"override retryable", Fail("x", ExecutionError, "m").WithRetryable(false), `{"kind":"execution_error","message":"m","ok":false,"retryable":false,"tool":"x"}`},
		{"failure ignores result", Envelope{Kind: NotFound, Message: "m", Result: 1, Warnings: []string{"w"}}, `{"kind":"not_found","message":"m","ok":false,"retryable":false}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.env.JSON(); got != tt.want {
				t.Fatalf("JSON()\n got %s\nwant %s", got, tt.want)
			}
			// Round trip.
			p, err := Parse(tt.env.JSON())
			if err != nil {
				t.Fatal(err)
			}
			if p.JSON() != tt.want {
				t.Fatalf("after Parse: %s", p.JSON())
			}
			// Embedding in other JSON gives the same bytes (json.Marshal
			// would HTML-escape them; the encoder can be told not to).
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(map[string]Envelope{"e": tt.env}); err != nil {
				t.Fatal(err)
			}
			if b.String() != `{"e":`+tt.want+"}\n" {
				t.Fatalf("embedded = %s", b.String())
			}
		})
	}
}

func TestJSONUnencodableResult(t *testing.T) {
	got := OK("t", map[string]any{"c": make(chan int)}).JSON()
	p, err := Parse(got)
	if err != nil {
		t.Fatalf("not valid JSON: %s", got)
	}
	if p.OK || p.Kind != ExecutionError || p.Tool != "t" {
		t.Fatalf("got %s, want execution_error", got)
	}
}

func TestParseRejectsNonEnvelopes(t *testing.T) {
	for _, s := range []string{"", "{}", "[1]", `{"ok":`} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) succeeded", s)
		}
	}
}

func TestFromError(t *testing.T) {
	_, pathErr := sandboxpath.ForAgent("bob").Resolve("path", "../x")
	execLim := limit.NewExecLimiter(limit.ExecOptions{})
	_ = execLim.Allow("bob", 1)
	limErr := execLim.Allow("bob", 1)
	remote := func(code, msg string) error {
		return fmt.Errorf("read: %w", &agentproto.RemoteError{Op: "read_file", Code: code, Message: msg})
	}
	tests := []struct {
		name       string
		err        error
		kind       Kind
		retry      bool
		field      string
		wantMsg    string // exact, when set
		wantPrefix string
	}{
		{name: "path rejection", err: fmt.Errorf("wrapped: %w", pathErr), kind: InvalidArgs, retry: true, field: "path",
			wantMsg: "Argument `path` rejected: traversal. Got `../x`."},
		{name: "plugin files", err: sandboxpath.ValidatePluginFiles(map[string]string{"a": "", "./a": ""}), kind: InvalidArgs, retry: true},
		{name: "limit", err: limErr, kind: Rejected, retry: false, wantMsg: limErr.Error()},
		{name: "rate", err: rateErr(), kind: Rejected, retry: false},
		{name: "own kind", err: fmt.Errorf("x: %w", Errorf(UserDenied, "user said no")), kind: UserDenied, wantMsg: "user said no"},
		{name: "own arg", err: ArgErrorf("old_string", "text that occurs exactly once", "old_string matched 3 times"), kind: InvalidArgs, retry: true, field: "old_string", wantMsg: "old_string matched 3 times"},
		{name: "session ended", err: fmt.Errorf("agent exec: %w: eof", agentproto.ErrSessionEnded), kind: Unavailable, retry: true},
		{name: "cancelled", err: fmt.Errorf("exec: %w", context.Canceled), kind: Unavailable, retry: true},
		{name: "deadline", err: context.DeadlineExceeded, kind: Timeout, retry: true},
		{name: "guest timeout", err: remote("timeout", "exec timed out after 30s"), kind: Timeout, retry: true, wantMsg: "timed out: exec timed out after 30s"},
		{name: "escape", err: remote("escape", "open notes/link: path escapes its root"), kind: Rejected, retry: false, wantPrefix: "access refused: the path leads outside"},
		{name: "permission", err: remote("permission", "open /workspace/agents/alice: permission denied"), kind: Rejected, retry: false, wantPrefix: "permission denied: the agent's Linux user"},
		{name: "not found", err: remote("not_found", "open /workspace/agents/bob/x: not found"), kind: NotFound, retry: false, wantMsg: "open /workspace/agents/bob/x: not found"},
		{name: "invalid", err: fmt.Errorf("bad: %w", agentproto.ErrInvalid), kind: InvalidArgs, retry: true, wantMsg: "bad: invalid argument"},
		{name: "is dir", err: remote("is_dir", "read /w: is a directory"), kind: ExecutionError, retry: true, wantMsg: "read /w: is a directory"},
		{name: "no user", err: remote("no_user", "no such user"), kind: ExecutionError, retry: true},
		{name: "other", err: errors.New("boom"), kind: ExecutionError, retry: true, wantMsg: "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil {
				t.Fatal("test error is nil")
			}
			e := FromError("sandbox_read_file", tt.err)
			if e.OK || e.Kind != tt.kind || e.Retryable != tt.retry || e.Field != tt.field || e.Tool != "sandbox_read_file" {
				t.Fatalf("FromError = %s", e.JSON())
			}
			if tt.wantMsg != "" && e.Message != tt.wantMsg {
				t.Fatalf("message = %q, want %q", e.Message, tt.wantMsg)
			}
			if tt.wantPrefix != "" && (len(e.Message) < len(tt.wantPrefix) || e.Message[:len(tt.wantPrefix)] != tt.wantPrefix) {
				t.Fatalf("message = %q, want prefix %q", e.Message, tt.wantPrefix)
			}
			if e.Message == "" {
				t.Fatal("empty message")
			}
			if tt.field != "" && e.Expected == "" {
				t.Fatal("field without expected")
			}
		})
	}
	if e := FromError("t", nil); !e.OK || e.JSON() != `{"ok":true,"result":null,"tool":"t"}` {
		t.Fatalf("FromError(nil) = %s", e.JSON())
	}
}

func rateErr() error {
	r := limit.NewRateLimiter(limit.RateOptions{Limits: map[string]int{"x": 1}, Window: time.Hour})
	_ = r.Allow("bob", "x")
	return r.Allow("bob", "x")
}

func BenchmarkExecResultJSON(b *testing.B) {
	out := strings.Repeat("line of output & more <x>\n", 2000) // ~50 KB, the stdout cap
	res := map[string]any{"stdout": out, "stderr": "", "exit_code": 0, "cwd": "/workspace/agents/bob"}
	for b.Loop() {
		_ = OK("sandbox_exec", res).JSON()
	}
}
