package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
	"github.com/osaurus/osaurus-sandbox/tools/secretprompt"
)

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// forge returns a token that differs from tok in its first character
// (always: replacing it with a fixed letter matched the real token one
// time in 64).
func forge(tok string) string {
	if tok[0] == 'A' {
		return "B" + tok[1:]
	}
	return "A" + tok[1:]
}

// browser is the user's browser: a plain HTTP client without cookies.
type browser struct{ t *testing.T }

func (b browser) do(method, u string, form url.Values, hdr map[string]string) (int, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(out)
}

// seen records everything the MCP client received, to show the value
// never passed through it.
type seen struct {
	mu  sync.Mutex
	all strings.Builder
}

func (s *seen) add(v any) {
	b, _ := json.Marshal(v)
	s.mu.Lock()
	s.all.Write(b)
	s.mu.Unlock()
}

func (s *seen) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.all.String() }

// TestSecretPromptOverMCP runs sandbox_secret_set's prompt path with the
// go-sdk client over streamable HTTP, a real browser-like HTTP client on
// the one-time page, and a real keyring. One keyring per process, so
// every keychain test of this package is a subtest here.
func TestSecretPromptOverMCP(t *testing.T) {
	testkeyring.Start(t)
	store := secrets.NewKeychain()
	pages := &secretprompt.Pages{Store: store}
	t.Cleanup(func() { pages.Close() })
	broker := &secretprompt.Broker{Store: store, Pages: pages}

	f := newFixture(t)
	g := fakeGuest(t)
	f.cfg.Env = tools.NewEnv(tools.Options{Guest: func(context.Context) (*agentproto.Client, error) { return g, nil }, SecretStore: store, SecretPrompter: broker})
	f.set(t, "bob", func(ae *agents.AutonomousExec) { ae.Enabled = true })
	endpoint := serveHTTP(t, f)

	// connect returns a session whose client answers URL elicitations
	// with elicit (nil: the client does not support them).
	connect := func(t *testing.T, rec *seen, elicit func(*mcp.ElicitParams) string) *mcp.ClientSession {
		opts := &mcp.ClientOptions{}
		if elicit != nil {
			opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
			opts.ElicitationHandler = func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				rec.add(r.Params)
				return &mcp.ElicitResult{Action: elicit(r.Params)}, nil
			}
			opts.ElicitationCompleteHandler = func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) { rec.add(r.Params) }
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearerTransport{f.tok}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	call := func(t *testing.T, cs *mcp.ClientSession, rec *seen, args map[string]any) envelope.Envelope {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "sandbox_secret_set", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		rec.add(res)
		e, err := envelope.Parse(res.Content[0].(*mcp.TextContent).Text)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	b := browser{t}

	t.Run("the user types the value on the page", func(t *testing.T) {
		const value = "sk-from-the-page-0123456789"
		rec := &seen{}
		var pageURL string
		cs := connect(t, rec, func(p *mcp.ElicitParams) string {
			pageURL = p.URL
			if p.Mode != "url" || p.ElicitationID == "" || !strings.HasPrefix(p.URL, "http://127.0.0.1:") || !strings.Contains(p.Message, "OPENAI_API_KEY") {
				t.Errorf("elicitation: %+v", p)
				return "cancel"
			}
			u, _ := url.Parse(p.URL)
			code, page := b.do("GET", p.URL, nil, nil)
			m := csrfRE.FindStringSubmatch(page)
			if code != 200 || m == nil || !strings.Contains(page, "Bob") || !strings.Contains(page, "OPENAI_API_KEY") ||
				!strings.Contains(page, "&lt;b&gt;for the weather API&lt;/b&gt;") {
				t.Errorf("page: %d %s", code, page)
				return "cancel"
			}
			good := url.Values{"csrf": {m[1]}, "value": {value}, "action": {"save"}}
			// Attacks, each refused without using the page up.
			for _, a := range []struct {
				name string
				form url.Values
				hdr  map[string]string
				u    string
				want int
			}{
				{"another site's form", good, map[string]string{"Origin": "http://evil.example"}, p.URL, 403},
				{"a cross-site fetch", good, map[string]string{"Sec-Fetch-Site": "cross-site"}, p.URL, 403},
				{"a rebound host name", good, map[string]string{"Host": "evil.example:" + u.Port()}, p.URL, 421},
				{"no CSRF token", url.Values{"value": {"attacker"}}, nil, p.URL, 403},
				{"a forged CSRF token", url.Values{"csrf": {forge(m[1])}, "value": {"attacker"}}, nil, p.URL, 403},
				{"a guessed page", good, nil, "http://" + u.Host + "/secret/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 404},
			} {
				if code, body := b.do("POST", a.u, a.form, a.hdr); code != a.want {
					t.Errorf("%s: %d %s, want %d", a.name, code, body, a.want)
				}
			}
			if code, body := b.do("POST", p.URL, good, map[string]string{"Origin": "http://" + u.Host}); code != 200 || !strings.Contains(body, "Stored") {
				t.Errorf("save: %d %s", code, body)
			}
			return "accept"
		})
		e := call(t, cs, rec, map[string]any{"key": "OPENAI_API_KEY", "description": "<b>for the weather API</b>"})
		if !e.OK || fmt.Sprint(e.Result) != "map[key:OPENAI_API_KEY stored:true]" {
			t.Fatalf("result: %+v", e)
		}
		if v, err := store.Get("bob", "OPENAI_API_KEY"); err != nil || v != value {
			t.Fatalf("keychain: %q, %v", v, err)
		}
		if strings.Contains(rec.String(), value) || strings.Contains(rec.String(), "attacker") {
			t.Fatalf("the MCP client saw the value: %s", rec.String())
		}
		// Single use.
		if code, _ := b.do("GET", pageURL, nil, nil); code != 404 {
			t.Errorf("GET after use: %d, want 404", code)
		}
		if code, _ := b.do("POST", pageURL, url.Values{"value": {"again"}}, nil); code != 404 {
			t.Errorf("POST after use: %d, want 404", code)
		}
		ex, _ := callTool(t, cs, "sandbox_secret_check", map[string]any{"key": "OPENAI_API_KEY"})
		if fmt.Sprint(ex.Result) != "map[exists:true]" {
			t.Errorf("check: %+v", ex)
		}
	})

	t.Run("the user declines in the client", func(t *testing.T) {
		rec := &seen{}
		cs := connect(t, rec, func(*mcp.ElicitParams) string { return "decline" })
		e := call(t, cs, rec, map[string]any{"key": "DECLINED"})
		if e.OK || e.Kind != envelope.UserDenied {
			t.Fatalf("result: %+v", e)
		}
		if ex, _ := callTool(t, cs, "sandbox_secret_check", map[string]any{"key": "DECLINED"}); fmt.Sprint(ex.Result) != "map[exists:false]" {
			t.Errorf("check: %+v", ex)
		}
	})

	t.Run("the user denies on the page", func(t *testing.T) {
		rec := &seen{}
		cs := connect(t, rec, func(p *mcp.ElicitParams) string {
			_, page := b.do("GET", p.URL, nil, nil)
			m := csrfRE.FindStringSubmatch(page)
			if m == nil {
				t.Errorf("page: %s", page)
				return "cancel"
			}
			if code, body := b.do("POST", p.URL, url.Values{"csrf": {m[1]}, "action": {"deny"}}, nil); code != 200 || !strings.Contains(body, "Declined") {
				t.Errorf("deny: %d %s", code, body)
			}
			return "accept"
		})
		if e := call(t, cs, rec, map[string]any{"key": "DENIED"}); e.OK || e.Kind != envelope.UserDenied {
			t.Fatalf("result: %+v", e)
		}
	})

	t.Run("nobody answers in time", func(t *testing.T) {
		broker.Timeout = 500 * time.Millisecond
		t.Cleanup(func() { broker.Timeout = 0 })
		rec := &seen{}
		var pageURL string
		cs := connect(t, rec, func(p *mcp.ElicitParams) string { pageURL = p.URL; return "accept" })
		e := call(t, cs, rec, map[string]any{"key": "LATE"})
		if e.OK || e.Kind != envelope.UserDenied || !strings.Contains(e.Message, "no answer within") {
			t.Fatalf("result: %+v", e)
		}
		if code, body := b.do("GET", pageURL, nil, nil); code != 404 || !strings.Contains(body, "expired") {
			t.Errorf("page after the call gave up: %d %s", code, body)
		}
	})

	t.Run("a client without URL elicitation is told the CLI command", func(t *testing.T) {
		rec := &seen{}
		cs := connect(t, rec, nil)
		e := call(t, cs, rec, map[string]any{"key": "NOCHANNEL"})
		if e.OK || e.Kind != envelope.UserDenied || !strings.Contains(e.Message, "`osaurus-sandbox secret set bob NOCHANNEL`") {
			t.Fatalf("result: %+v", e)
		}
	})

	t.Run("a value passed directly is stored", func(t *testing.T) {
		rec := &seen{}
		cs := connect(t, rec, nil)
		e := call(t, cs, rec, map[string]any{"key": "DIRECT", "value": "direct-value-123"})
		if !e.OK || fmt.Sprint(e.Result) != "map[key:DIRECT stored:true]" {
			t.Fatalf("result: %+v", e)
		}
		if v, _ := store.Get("bob", "DIRECT"); v != "direct-value-123" {
			t.Fatalf("keychain: %q", v)
		}
		for _, bad := range []map[string]any{{"key": "1BAD"}, {"key": "X", "value": ""}, {"key": "X", "description": strings.Repeat("d", 501)}} {
			if e := call(t, cs, rec, bad); e.OK || e.Kind != envelope.InvalidArgs {
				t.Errorf("%v: %+v", bad, e)
			}
		}
	})
}
