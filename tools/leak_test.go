package tools

import (
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// valueRedactor scrubs one secret the way the keychain store does.
type valueRedactor map[string]string

func (v valueRedactor) Redact(_, s string) string { return secrets.ScrubValues(v, s) }

const leakSecret = "zq7XkW9vPq2mTr4L"

// leaks returns every piece of leakSecret of 4+ characters found in s.
func leaks(s string) []string {
	var out []string
	for n := len(leakSecret); n >= 4; n-- {
		for i := 0; i+n <= len(leakSecret); i++ {
			if p := leakSecret[i : i+n]; strings.Contains(s, p) {
				out = append(out, p)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// TestSecretsDoNotLeakThroughFailures: a command or install that fails or
// times out quotes its output in the envelope's message; the agent's
// secret values are scrubbed from it, and from every other field, as
// from a success, including a value the message's own cut splits.
func TestSecretsDoNotLeakThroughFailures(t *testing.T) {
	pad := strings.Repeat("x", 5000)
	// A secret straddling the point where the timeout message keeps the
	// last 2000 characters of stdout.
	straddle := pad + leakSecret[:7] + leakSecret[7:] + strings.Repeat("y", 2000-len(leakSecret[7:]))
	cases := []struct {
		name   string
		tool   string
		args   map[string]any
		stdout string
		stderr string
		st     agentproto.ExitStatus
		kind   envelope.Kind
	}{
		{"exec timed out", "sandbox_exec", map[string]any{"command": "echo"}, "token=" + leakSecret + "\n", "err " + leakSecret, agentproto.ExitStatus{TimedOut: true, Code: -1}, envelope.Timeout},
		{"exec hit a limit", "sandbox_exec", map[string]any{"command": "echo"}, leakSecret, leakSecret, agentproto.ExitStatus{Limit: "memory", Code: 137}, envelope.ExecutionError},
		{"exec timed out, secret cut by the message", "sandbox_exec", map[string]any{"command": "echo"}, straddle, "", agentproto.ExitStatus{TimedOut: true, Code: -1}, envelope.Timeout},
		{"install failed", "sandbox_install", map[string]any{"packages": []string{"jq"}}, "E: 401 for https://u:" + leakSecret + "@repo\n", "", agentproto.ExitStatus{Code: 100}, envelope.ExecutionError},
		{"install failed, secret cut by the message", "sandbox_install", map[string]any{"packages": []string{"jq"}}, straddle, "", agentproto.ExitStatus{Code: 100}, envelope.ExecutionError},
		{"pip failed", "sandbox_pip_install", map[string]any{"packages": []string{"requests"}}, "Looking in indexes: https://" + leakSecret + "@pypi\n", "", agentproto.ExitStatus{Code: 1}, envelope.ExecutionError},
		{"npm timed out", "sandbox_npm_install", map[string]any{"packages": []string{"left-pad"}}, "npm ERR! " + leakSecret, "", agentproto.ExitStatus{TimedOut: true, Code: -1}, envelope.Timeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.Redactor = valueRedactor{"TOKEN": leakSecret} })
			h.guest.put("/var/lib/apt/lists/x_Packages", "")
			h.guest.put("/workspace/agents/bob/.venv/bin/pip", "")
			h.guest.exec = printer(tc.stdout, tc.stderr, tc.st)
			e := h.call(tc.tool, tc.args)
			if e.OK || e.Kind != tc.kind {
				t.Fatalf("%s: %s, want a %s failure", tc.tool, e.JSON(), tc.kind)
			}
			if l := leaks(e.JSON()); l != nil {
				t.Errorf("the envelope shows %q of the secret:\n%s", l, e.JSON())
			}
			if !strings.Contains(e.Message, "[REDACTED:TOKEN]") {
				t.Errorf("the message does not say a secret was there: %s", e.Message)
			}
		})
	}
}

func TestEnvelopeScrubCoversEveryField(t *testing.T) {
	f := func(s string) string { return strings.ReplaceAll(s, "s3cr3t", "[R]") }
	e := envelope.OK("t", map[string]any{"a": []any{"s3cr3t", map[string]any{"s3cr3t": "x s3cr3t"}}}, "w s3cr3t").Scrub(f)
	fail := envelope.InvalidArg("t", "s3cr3t", "s3cr3t or", "m s3cr3t").Scrub(f)
	for _, x := range []envelope.Envelope{e, fail} {
		if s := x.JSON(); strings.Contains(s, "s3cr3t") || !strings.Contains(s, "[R]") {
			t.Errorf("scrubbed envelope: %s", s)
		}
	}
}
