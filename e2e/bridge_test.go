//go:build linux

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// TestBridge is the host API bridge on the real guest with a real
// keyring: a user stores a secret with the CLI, the agent reads it inside
// the VM with osaurus-host while the model only sees it redacted, and no
// other user of the guest can get at it.
func TestBridge(t *testing.T) {
	testkeyring.Start(t)
	// The owner's bridge with a small quota (the rateLimits setting), so
	// the 429 path is reachable in a few calls.
	h := sharedHost(t, func(c *config.Sandbox) { c.RateLimits = "bridge=60" })
	te := toolsEnvOf(t, h)
	home, reg := te.home, te.reg
	ctx := context.Background()
	te.addAgent(t, "alice", autonomous(100, false))
	te.addAgent(t, "bob", autonomous(100, false))
	alice, bob := te.http(t, "alice"), te.http(t, "bob")
	cli := cliRun{t: t, bin: te.bin, home: home}

	const value = "sk-test-123456"
	t.Run("done means", func(t *testing.T) {
		cmd := exec.Command(te.bin, "secret", "set", "alice", "OPENAI_API_KEY")
		cmd.Env = append(os.Environ(), config.HomeEnv+"="+home)
		cmd.Stdin = strings.NewReader(value)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("secret set: %v\n%s", err, out)
		}
		if out, _, code := cli.run("secret", "list", "alice", "--json"); code != 0 || strings.TrimSpace(out) != `["OPENAI_API_KEY"]` {
			t.Fatalf("secret list: %d %q", code, out)
		}
		sum := sha256.Sum256([]byte(value + "\n"))
		r := alice.ok(t, "sandbox_exec", map[string]any{"command": "osaurus-host secrets get OPENAI_API_KEY | sha256sum"})
		if got := str(r["stdout"]); !strings.HasPrefix(got, hex.EncodeToString(sum[:])) {
			t.Errorf("alice's hash of the secret: %q (%v), want %x", got, r, sum)
		}
		r = alice.ok(t, "sandbox_exec", map[string]any{"command": "osaurus-host secrets get OPENAI_API_KEY"})
		if got := str(r["stdout"]); got != "[REDACTED:OPENAI_API_KEY]\n" {
			t.Errorf("alice's tool result shows %q, want it redacted", got)
		}
		r = bob.ok(t, "sandbox_exec", map[string]any{"command": "osaurus-host secrets get OPENAI_API_KEY"})
		if num(r["exit_code"]) != 3 || !strings.Contains(str(r["stderr"]), "not found") || strings.Contains(str(r["stdout"]), "sk-") {
			t.Errorf("bob reading alice's secret: %v, want exit 3 and not found", r)
		}
	})

	g := te.m.Agent()
	t.Run("identity comes from the kernel", func(t *testing.T) {
		// bob claims to be alice in the identity header: ignored.
		out, errOut, st := sh(t, g, "agent-bob", `curl -sS --unix-socket /run/osaurus-bridge.sock -H 'X-Osaurus-Agent: alice' -w '\n%{http_code}' http://bridge/api/secrets/OPENAI_API_KEY`)
		if st.Code != 0 || !strings.HasSuffix(strings.TrimSpace(out), "404") || strings.Contains(out, value) {
			t.Errorf("spoofed header: %q %q %v", out, errOut, st)
		}
		out, _, _ = sh(t, g, "agent-bob", `curl -sS --unix-socket /run/osaurus-bridge.sock -H 'X-Osaurus-Agent: alice' http://bridge/api/ping`)
		var ping map[string]string
		if json.Unmarshal([]byte(out), &ping) != nil || ping["agent"] != "bob" {
			t.Errorf("ping as bob claiming alice: %q", out)
		}
		// root and system users are no agent.
		for _, user := range []string{"", "nobody"} {
			out, errOut, st := sh(t, g, user, "osaurus-host secrets get OPENAI_API_KEY")
			if st.Code != 4 || !strings.Contains(errOut, "not an agent user") || strings.Contains(out, value) {
				t.Errorf("%q: exit %d %q %q, want 4 (refused)", user, st.Code, out, errOut)
			}
			out, _, _ = sh(t, g, user, `curl -s -o /dev/null -w '%{http_code}' --unix-socket /run/osaurus-bridge.sock http://bridge/api/ping`)
			if out != "403" {
				t.Errorf("%q: ping HTTP %q, want 403", user, out)
			}
		}
	})

	t.Run("routes", func(t *testing.T) {
		code := func(req string) string {
			t.Helper()
			out, errOut, _ := sh(t, g, "agent-alice", "curl -s -o /dev/null -w '%{http_code}' --unix-socket /run/osaurus-bridge.sock "+req)
			if errOut != "" {
				t.Logf("curl %s: %s", req, errOut)
			}
			return out
		}
		for _, tc := range []struct{ req, want string }{
			{"http://bridge/api/ping", "200"},
			{"http://bridge/api/secrets/OPENAI_API_KEY", "200"},
			{"http://bridge/api/secrets/NOPE", "404"},
			{"http://bridge/api/config/color", "200"},
			{"-X POST -d '{\"value\":\"blue\"}' http://bridge/api/config/color", "200"},
			{"-X POST -d 'not json' http://bridge/api/config/color", "400"},
			{"-X POST -d '{\"level\":\"info\",\"message\":\"hi\"}' http://bridge/api/log", "200"},
			{"-X POST -d '{}' http://bridge/api/log", "400"},
			{"-X DELETE http://bridge/api/config/color", "404"},
			{"http://bridge/api/inference/chat", "404"},
			{"http://bridge/nothing", "404"},
			{"-X POST -H 'Content-Type: application/json' --data-binary @/tmp/big http://bridge/api/log", "413"},
		} {
			if tc.want == "413" {
				if _, _, st := sh(t, g, "agent-alice", "head -c 9000000 /dev/zero | tr '\\0' a > /tmp/big"); st.Code != 0 {
					t.Fatal("making a big body failed")
				}
			}
			if got := code(tc.req); got != tc.want {
				t.Errorf("%s: HTTP %s, want %s", tc.req, got, tc.want)
			}
		}
		out, errOut, st := sh(t, g, "agent-alice", "osaurus-host config set color green && osaurus-host config get color && osaurus-host --json config get color && osaurus-host config get unset; echo rc=$?")
		if st.Code != 0 || out != "green\n{\"value\":\"green\"}\nrc=0\n" {
			t.Errorf("config via osaurus-host: %q %q", out, errOut)
		}
		// bob's config is his own.
		if out, _, _ := sh(t, g, "agent-bob", "osaurus-host --json config get color"); strings.TrimSpace(out) != "{}" {
			t.Errorf("bob sees alice's config: %q", out)
		}
		// Inference without a model server set answers 503 (exit 6),
		// naming the setting; TestHostServices sets one.
		out, errOut, st = sh(t, g, "agent-alice", "osaurus-host inference chat -m hi")
		if st.Code != 6 || !strings.Contains(errOut, "config set inferenceUrl") {
			t.Errorf("inference chat without the service: %d %q %q", st.Code, out, errOut)
		}
		if _, errOut, st := sh(t, g, "agent-alice", "osaurus-host frobnicate"); st.Code != 2 || !strings.Contains(errOut, "unknown command") {
			t.Errorf("bad usage: %d %q", st.Code, errOut)
		}
	})

	t.Run("log lines are scrubbed", func(t *testing.T) {
		if out, errOut, st := sh(t, g, "agent-alice", `osaurus-host log warn "my key is $(osaurus-host secrets get OPENAI_API_KEY)"`); st.Code != 0 {
			t.Fatalf("log: %q %q", out, errOut)
		}
		out, _, code := cli.run("logs", "--agent", "alice")
		if code != 0 || !strings.Contains(out, "warn my key is [REDACTED:OPENAI_API_KEY]") || strings.Contains(out, value) {
			t.Errorf("logs --agent alice: %d %q", code, out)
		}
	})

	t.Run("a secret cut by truncation is redacted in both halves", func(t *testing.T) {
		head := tools.StdoutCap * 2 / 5
		// 5 characters of the value end the head, 4 are omitted, the last
		// 5 start the tail.
		script := `v=$(osaurus-host secrets get OPENAI_API_KEY); python3 -c 'import sys; v=sys.argv[1]; h=int(sys.argv[2]); n=int(sys.argv[3]); sys.stdout.write("a"*(h-5) + v + "b"*(n-h-5))' "$v" ` +
			strconv.Itoa(head) + " " + strconv.Itoa(tools.StdoutCap)
		r := alice.ok(t, "sandbox_exec", map[string]any{"command": script})
		got := str(r["stdout"])
		if !strings.Contains(got, "omitted") {
			t.Fatalf("output was not truncated: %d chars", len(got))
		}
		for _, piece := range []string{"sk-te", "3456b", value} {
			if strings.Contains(got, piece) {
				t.Errorf("truncated output shows %q of the secret", piece)
			}
		}
		if strings.Count(got, "[REDACTED:OPENAI_API_KEY]") != 2 {
			t.Errorf("want both halves redacted; around the cut: %q", around(got, "omitted"))
		}
	})

	t.Run("a secret typed on the prompt page reaches the agent's commands", func(t *testing.T) {
		const typed = "sk-prompted-987654"
		var (
			seenMu sync.Mutex
			seen   strings.Builder
		)
		tok, _ := reg.Token("alice")
		c := mcp.NewClient(&mcp.Implementation{Name: "e2e-elicit", Version: "1"}, &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
			ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				b, _ := json.Marshal(r.Params)
				seenMu.Lock()
				seen.Write(b)
				seenMu.Unlock()
				// The user's browser: load the page, type, save.
				res, err := http.Get(r.Params.URL)
				if err != nil {
					return nil, err
				}
				page, _ := io.ReadAll(res.Body)
				res.Body.Close()
				m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
				if m == nil {
					return nil, fmt.Errorf("no form on the page: %s", page)
				}
				res, err = http.PostForm(r.Params.URL, url.Values{"csrf": {string(m[1])}, "value": {typed}, "action": {"save"}})
				if err != nil {
					return nil, err
				}
				res.Body.Close()
				return &mcp.ElicitResult{Action: "accept"}, nil
			},
		})
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: te.url, HTTPClient: &http.Client{Transport: bearer(tok)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sandbox_secret_set", Arguments: map[string]any{"key": "PROMPTED", "description": "e2e"}})
		if err != nil {
			t.Fatal(err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		seenMu.Lock()
		defer seenMu.Unlock()
		if res.IsError || !strings.Contains(text, `"stored":true`) || strings.Contains(text+seen.String(), typed) {
			t.Fatalf("result %s; the client saw %s", text, seen.String())
		}
		sum := sha256.Sum256([]byte(typed + "\n"))
		r := alice.ok(t, "sandbox_exec", map[string]any{"command": "osaurus-host secrets get PROMPTED | sha256sum"})
		if got := str(r["stdout"]); !strings.HasPrefix(got, hex.EncodeToString(sum[:])) {
			t.Errorf("alice's hash of the prompted secret: %q, want %x", got, sum)
		}
	})

	t.Run("without a channel the prompt names the CLI command, which works", func(t *testing.T) {
		// The real binary over stdio: no URL elicitation, no window.
		s := te.stdio(t, "alice")
		e := s.fails(t, "sandbox_secret_set", map[string]any{"key": "FROM_CLI"}, envelope.UserDenied)
		if !strings.Contains(e.Message, "`osaurus-sandbox secret set alice FROM_CLI`") {
			t.Fatalf("message: %s", e.Message)
		}
		cmd := exec.Command(te.bin, "secret", "set", "alice", "FROM_CLI")
		cmd.Env = append(os.Environ(), config.HomeEnv+"="+home)
		cmd.Stdin = strings.NewReader("cli-value-123456")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("secret set: %v\n%s", err, out)
		}
		if r := s.ok(t, "sandbox_secret_check", map[string]any{"key": "FROM_CLI"}); r["exists"] != true {
			t.Fatalf("check after the CLI set it: %v", r)
		}
		r := alice.ok(t, "sandbox_exec", map[string]any{"command": "osaurus-host secrets get FROM_CLI"})
		if got := str(r["stdout"]); got != "[REDACTED:FROM_CLI]\n" {
			t.Errorf("alice's tool result shows %q, want it redacted", got)
		}
	})

	t.Run("diagnostics bridge passes", func(t *testing.T) {
		rs := diagnostics.Run(ctx, diagnostics.Env{Agent: g, Bridge: diagnostics.CheckBridge}, selectChecks("agent-user", "bridge"), nil)
		if len(rs) != 2 {
			t.Fatalf("%d results, want the agent-user and bridge checks': %+v", len(rs), rs)
		}
		for _, r := range rs {
			if r.Outcome != diagnostics.Pass {
				t.Errorf("%s: %s: %s", r.Name, r.Outcome, r.Detail)
			}
		}
	})

	t.Run("rate limited", func(t *testing.T) {
		out, errOut, _ := sh(t, g, "agent-bob", `for i in $(seq 80); do osaurus-host ping >/dev/null 2>"$HOME/.err" || { echo rc=$?; cat "$HOME/.err"; break; }; done`)
		if !strings.Contains(out, "rc=5") || !strings.Contains(out, "retry after") {
			t.Errorf("80 pings with a quota of 60: %q %q", out, errOut)
		}
	})
}

func selectChecks(names ...string) []diagnostics.Check {
	var out []diagnostics.Check
	for _, c := range diagnostics.Checks() {
		for _, n := range names {
			if c.Name == n {
				out = append(out, c)
			}
		}
	}
	return out
}

func around(s, mark string) string {
	i := strings.Index(s, mark)
	if i < 0 {
		return ""
	}
	return s[max(0, i-60):min(len(s), i+80)]
}
