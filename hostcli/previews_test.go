package hostcli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/testssh"
	"github.com/osaurus/osaurus-sandbox/remotes"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/secretprompt"
)

// exposeAnswer is the far side's answer to a tools/call of tool, as its
// stdio MCP server writes it: the envelope both as structuredContent and
// as the text.
func exposeAnswer(id, tool, url string) string {
	env := fmt.Sprintf(`{"ok":true,"result":{"port":3000,"url":%q},"tool":%q}`, url, tool)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "result": map[string]any{
		"content": []any{map[string]any{"type": "text", "text": env}}, "structuredContent": json.RawMessage(env), "isError": false}})
	return string(b) + "\n"
}

// answerOf reads a rewritten answer: the envelope of its
// structuredContent, and of its text (which must be the same), or of the
// text alone when it has no structuredContent.
func answerOf(t *testing.T, line string) (id string, env map[string]any) {
	t.Helper()
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result struct {
			Content []struct {
				Type, Text string
			} `json:"content"`
			Structured map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 || json.Unmarshal([]byte(line), &m) != nil {
		t.Fatalf("not one JSON-RPC line: %q", line)
	}
	var text map[string]any
	if len(m.Result.Content) != 1 || json.Unmarshal([]byte(m.Result.Content[0].Text), &text) != nil {
		t.Fatalf("the text is not the envelope: %q", line)
	}
	if m.Result.Structured == nil { // a far side that sends only the text
		return string(m.ID), text
	}
	tb, _ := json.Marshal(text)
	sb, _ := json.Marshal(m.Result.Structured)
	if string(tb) != string(sb) {
		t.Fatalf("structuredContent %s differs from the text %s", sb, tb)
	}
	return string(m.ID), m.Result.Structured
}

// TestRewriteExpose: only an expose answer with an http URL on the far
// side's 127.0.0.1 and a port 1–65535 is forwarded and rewritten, in the
// structuredContent and the text alike; everything else passes as it
// came, without a forward being opened.
func TestRewriteExpose(t *testing.T) {
	const far = "http://127.0.0.1:41234/"
	textOnly := `{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"{\"ok\":true,\"result\":{\"port\":3000,\"url\":\"http://127.0.0.1:41234/\"},\"tool\":\"sandbox_expose_port\"}"}]}}` + "\n"
	for _, tt := range []struct {
		name     string
		line     string
		openErr  error
		wantPort int    // the port opened; 0: the line passes untouched
		wantURL  string // after the rewrite
	}{
		{"far loopback", exposeAnswer("1", exposeTool, far), nil, 41234, "http://127.0.0.1:50001/"},
		{"a path kept", exposeAnswer(`"a"`, exposeTool, "http://127.0.0.1:8080/app/?x=1"), nil, 8080, "http://127.0.0.1:50001/app/?x=1"},
		{"text only (no structuredContent)", textOnly, nil, 41234, "http://127.0.0.1:50001/"},
		{"the forward fails", exposeAnswer("1", exposeTool, far), errors.New("no ports left"), 41234, far},
		{"another host", exposeAnswer("1", exposeTool, "http://192.168.1.5:8080/"), nil, 0, ""},
		{"localhost", exposeAnswer("1", exposeTool, "http://localhost:8080/"), nil, 0, ""},
		{"IPv6 loopback", exposeAnswer("1", exposeTool, "http://[::1]:8080/"), nil, 0, ""},
		{"https", exposeAnswer("1", exposeTool, "https://127.0.0.1:8443/"), nil, 0, ""},
		{"user info", exposeAnswer("1", exposeTool, "http://me@127.0.0.1:8080/"), nil, 0, ""},
		{"a name that starts with the address", exposeAnswer("1", exposeTool, "http://127.0.0.1.evil.example:8080/"), nil, 0, ""},
		{"no port", exposeAnswer("1", exposeTool, "http://127.0.0.1/"), nil, 0, ""},
		{"port 0", exposeAnswer("1", exposeTool, "http://127.0.0.1:0/"), nil, 0, ""},
		{"port 65536", exposeAnswer("1", exposeTool, "http://127.0.0.1:65536/"), nil, 0, ""},
		{"huge port", exposeAnswer("1", exposeTool, "http://127.0.0.1:18446744073709551617/"), nil, 0, ""},
		{"leading zero", exposeAnswer("1", exposeTool, "http://127.0.0.1:08080/"), nil, 0, ""},
		{"not a URL", exposeAnswer("1", exposeTool, "127.0.0.1:8080"), nil, 0, ""},
		{"malformed JSON", `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"ok":true,"result":{"url":"http://127.0.0.1:41234/"}}` + "\n", nil, 0, ""},
		{"more after the JSON", strings.TrimSuffix(exposeAnswer("1", exposeTool, far), "\n") + `{"x":1}` + "\n", nil, 0, ""},
		{"an error envelope", `{"jsonrpc":"2.0","id":1,"result":{"isError":true,"structuredContent":{"ok":false,"result":{"url":"http://127.0.0.1:41234/"}}}}` + "\n", nil, 0, ""},
		{"a JSON-RPC error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"http://127.0.0.1:41234/"}}` + "\n", nil, 0, ""},
		{"url not a string", `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"ok":true,"result":{"url":41234}}}}` + "\n", nil, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opened := 0
			out, ok := rewriteExpose([]byte(tt.line), "box", func(p int) (int, error) {
				opened = p
				return 50001, tt.openErr
			})
			if opened != tt.wantPort || ok != (tt.wantPort != 0) {
				t.Fatalf("opened port %d (rewritten %v), want %d", opened, ok, tt.wantPort)
			}
			if !ok {
				return
			}
			id, env := answerOf(t, string(out))
			var wantID struct {
				ID json.RawMessage `json:"id"`
			}
			json.Unmarshal([]byte(tt.line), &wantID)
			res := env["result"].(map[string]any)
			if id != string(wantID.ID) || res["url"] != tt.wantURL || env["ok"] != true || res["port"] != float64(3000) {
				t.Fatalf("id %s, envelope %v", id, env)
			}
			note, _ := res["forwarded"].(string)
			warnings, _ := env["warnings"].([]any)
			if tt.openErr == nil {
				if !strings.Contains(note, "over SSH (context box)") || !strings.Contains(note, "preview http://127.0.0.1:"+strconv.Itoa(opened)+"/") || len(warnings) != 0 {
					t.Fatalf("the envelope does not say where the URL leads: %v", env)
				}
				return
			}
			if note != "" || len(warnings) != 1 || !strings.Contains(warnings[0].(string), "no ports left") || !strings.Contains(warnings[0].(string), "context box") {
				t.Fatalf("a failed forward: %v", env)
			}
		})
	}
}

// TestPreviewRelayTracking: the answer rewritten is the one to a
// tools/call of sandbox_expose_port, matched by its id exactly, once.
func TestPreviewRelayTracking(t *testing.T) {
	opened := 0
	p := &previewRelay{ctxName: "box", open: func(int) (int, error) { opened++; return 50001, nil }}
	call := func(tool string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"name":%q,"arguments":{"port":3000}}`, tool))
	}
	p.request(json.RawMessage(`1`), "tools/call", call(exposeTool))
	p.request(json.RawMessage(`"1"`), "tools/call", call("sandbox_exec"))
	p.request(json.RawMessage(`2`), "tools/call", call("sandbox_exec"))
	p.request(json.RawMessage(`3`), "tools/list", call(exposeTool))
	p.request(json.RawMessage(`4`), "tools/call", json.RawMessage(`["sandbox_expose_port"]`))
	p.request(nil, "tools/call", call(exposeTool))                     // a notification: no answer
	p.request(json.RawMessage(`null`), "tools/call", call(exposeTool)) // not a request id
	p.request(json.RawMessage(`"e"`), "tools/call", call(exposeTool))
	const far = "http://127.0.0.1:41234/"
	for _, tt := range []struct {
		id        string
		rewritten bool
	}{
		{`"1"`, false}, // the string id is another request's (sandbox_exec)
		{`1`, true},
		{`1`, false}, // answered already
		{`2`, false},
		{`3`, false},
		{`4`, false},
		{`5`, false}, // never asked
		{`null`, false},
		{`"e"`, true},
	} {
		line := exposeAnswer(tt.id, exposeTool, far)
		out := string(p.response(json.RawMessage(tt.id), []byte(line)))
		if (out != line) != tt.rewritten {
			t.Errorf("id %s: rewritten %v, want %v: %s", tt.id, out != line, tt.rewritten, out)
		}
	}
	if opened != 2 || len(p.calls) != 0 {
		t.Errorf("%d forwards opened, %d calls left tracked", opened, len(p.calls))
	}
}

// standInSSH is the test binary run as ssh (see installStandInSSH): with
// -W it connects its stdin and stdout to the target, as ssh does through
// the far side (which here is this machine); without, it is the far
// side's stdio MCP server, answering every call with an envelope that
// carries the URL of STANDIN_FAR_PORT. It leaves its pid in
// STANDIN_PIDS, so the test can tell it ended.
func standInSSH(args []string) int {
	testssh.Record(args)
	for i, a := range args {
		if a == "-W" && i+1 < len(args) {
			return testssh.ForwardW(args[i+1])
		}
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || len(m.ID) == 0 {
			continue
		}
		far := "http://127.0.0.1:" + os.Getenv("STANDIN_FAR_PORT") + "/"
		if m.Params.Name == "sandbox_secret_set" {
			// A secret prompt: the page's URL, elicited before the answer.
			fmt.Fprintf(os.Stdout, `{"jsonrpc":"2.0","id":"far-1","method":"elicitation/create","params":{"mode":"url","message":"Type it","url":%q,"elicitationId":"e1"}}`+"\n", far+"secret/x")
		}
		os.Stdout.WriteString(exposeAnswer(string(m.ID), m.Params.Name, far))
	}
	return 0
}

// installStandInSSH puts an ssh on PATH that runs this test binary as
// standInSSH; it returns the folder where the stand-ins leave their pids.
func installStandInSSH(t *testing.T) (pids string) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, pids := t.TempDir(), t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\nexec '%s' standin-ssh \"$@\"\n", self)
	if err := os.WriteFile(filepath.Join(bin, "ssh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv(testssh.PidsEnv, pids)
	return pids
}

// TestMCPRemotePreviews: `mcp --agent` through a context, the far side a
// stand-in: the answer to sandbox_expose_port has a URL here that reaches
// the far preview, other tools' answers pass as they came, and when the
// client leaves, the relay ends with no ssh left running.
func TestMCPRemotePreviews(t *testing.T) {
	t.Setenv("OSAURUS_SANDBOX_HOME", t.TempDir())
	pids := installStandInSSH(t)
	farPort := testssh.FarPreview(t)
	t.Setenv("STANDIN_FAR_PORT", strconv.Itoa(farPort))
	run(t, "context", "add", "box", "ssh://me@box") // its check fails: the stand-in is no osaurus-sandbox

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb strings.Builder
	done := make(chan int, 1)
	go func() {
		code := Main([]string{"--context", "box", "mcp", "--agent", "alice"}, inR, outW, &errb, testOwner)
		outW.Close()
		done <- code
	}()
	answers := bufio.NewReader(outR)
	ask := func(id, tool string) string {
		t.Helper()
		fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":{"port":3000}}}`+"\n", id, tool)
		line, err := answers.ReadString('\n')
		if err != nil {
			t.Fatalf("no answer to %s: %v: %s", id, err, errb.String())
		}
		return line
	}
	far := fmt.Sprintf("http://127.0.0.1:%d/", farPort)
	_, env := answerOf(t, ask("1", exposeTool))
	local, _ := env["result"].(map[string]any)["url"].(string)
	if local == far || !strings.HasPrefix(local, "http://127.0.0.1:") {
		t.Fatalf("the expose answer's URL: %v", env)
	}
	c := testssh.NoRedirects()
	defer c.CloseIdleConnections()
	if code, body, _ := testssh.Get(t, c, local, ""); code != 200 || body != "hello from the far preview, /" {
		t.Fatalf("GET %s: %d %q", local, code, body)
	}
	if line := ask(`"x"`, "sandbox_exec"); line != exposeAnswer(`"x"`, "sandbox_exec", far) {
		t.Fatalf("another tool's answer was changed: %s", line)
	}
	if _, env := answerOf(t, ask("2", exposeTool)); env["result"].(map[string]any)["url"] != local {
		t.Fatalf("the same preview again: %v, want %s", env, local)
	}
	// A secret prompt's page on the far side's loopback is elicited with
	// a URL here, through the same forward.
	fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sandbox_secret_set","arguments":{"key":"K"}}}`+"\n")
	line, err := answers.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var el struct {
		Method string
		Params struct{ URL string }
	}
	if json.Unmarshal([]byte(line), &el) != nil || el.Method != "elicitation/create" || el.Params.URL != local+"secret/x" {
		t.Fatalf("the elicitation: %s, want its URL %ssecret/x", line, local)
	}
	if _, err := answers.ReadString('\n'); err != nil { // the tool's answer
		t.Fatal(err)
	}

	inW.Close()
	if code := <-done; code != ExitOK {
		t.Fatalf("the relay: exit %d: %s", code, errb.String())
	}
	if alive := testssh.Alive(pids); len(alive) != 0 {
		t.Fatalf("ssh left running after the relay ended: %q", alive)
	}
	if _, err := http.Get(local); err == nil {
		t.Fatal("the forward still answers after the relay ended")
	}
}

// storedSecrets is a secretprompt.Store that keeps what was set.
type storedSecrets struct {
	mu  sync.Mutex
	set map[string]string
}

func (s *storedSecrets) Set(agent, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		s.set = map[string]string{}
	}
	s.set[agent+"/"+key] = value
	return nil
}

// TestSecretPageForwarded: a far agent's secret prompt reaches the MCP
// client as a URL elicitation of a one-time page on the far machine's
// loopback; the relay forwards it here, and the page works through the
// forward: it loads, a form posted from it (its own Origin, here) stores
// the value, and a form from another site is refused there. Other
// requests and other elicitations pass as they came.
func TestSecretPageForwarded(t *testing.T) {
	pids := installStandInSSH(t)
	fs := &remotes.Forwards{CtxName: "box", Argv: func(p int) []string { return []string{"ssh", "-W", "127.0.0.1:" + strconv.Itoa(p), "--", "box"} }}
	defer fs.CloseAll()
	store := &storedSecrets{}
	pages := &secretprompt.Pages{Store: store} // the far owner's, on loopback
	defer pages.Close()
	pg, err := pages.Open(tools.SecretRequest{Agent: agents.Agent{Name: "alice", Slug: "alice"}, Key: "API_TOKEN"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p := &previewRelay{ctxName: "box", open: fs.Open}
	ask := func(params string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":` + params + "}\n"
	}
	for _, line := range []string{
		ask(`{"mode":"form","message":"m","requestedSchema":{"type":"object"}}`),
		ask(`{"mode":"url","message":"m","url":"https://example.com/secret/x","elicitationId":"e"}`),
		`{"jsonrpc":"2.0","id":8,"method":"ping"}` + "\n",
	} {
		var m struct{ Method string }
		json.Unmarshal([]byte(line), &m)
		if got := string(p.elicitation(m.Method, []byte(line))); got != line {
			t.Errorf("changed:\n%s\nto\n%s", line, got)
		}
	}
	out := p.elicitation("elicitation/create", []byte(ask(fmt.Sprintf(`{"mode":"url","message":"Type API_TOKEN","url":%q,"elicitationId":"e1"}`, pg.URL))))
	var got struct {
		ID     int `json:"id"`
		Params struct {
			Mode, Message, URL, ElicitationID string
		} `json:"params"`
	}
	if err := json.Unmarshal(out, &got); err != nil || got.ID != 7 || got.Params.ElicitationID != "e1" || got.Params.Mode != "url" {
		t.Fatalf("rewritten: %s (%v)", out, err)
	}
	local := got.Params.URL
	if local == pg.URL || !strings.HasPrefix(local, "http://127.0.0.1:") || !strings.Contains(got.Params.Message, "context box") {
		t.Fatalf("the elicitation's URL %q (far %q), message %q", local, pg.URL, got.Params.Message)
	}
	c := testssh.NoRedirects()
	defer c.CloseIdleConnections()
	code, body, _ := testssh.Get(t, c, local, "")
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if code != 200 || !strings.Contains(body, "Secret for agent alice") || csrf == nil {
		t.Fatalf("GET %s: %d %q", local, code, body)
	}
	u, _ := url.Parse(local)
	post := func(origin string) (int, string) {
		form := url.Values{"csrf": {csrf[1]}, "value": {"tok-123"}, "action": {"save"}}
		req, _ := http.NewRequest("POST", local, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("http://evil.example"); code != http.StatusForbidden {
		t.Fatalf("a form from another site: %d %q", code, body)
	}
	if code, body := post("http://" + u.Host); code != 200 || !strings.Contains(body, "Stored") {
		t.Fatalf("the page's own form: %d %q", code, body)
	}
	if err := <-pg.Done; err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	v := store.set["alice/API_TOKEN"]
	store.mu.Unlock()
	if v != "tok-123" {
		t.Fatalf("stored %q", v)
	}
	c.CloseIdleConnections()
	fs.CloseAll()
	if alive := testssh.Alive(pids); len(alive) != 0 {
		t.Fatalf("ssh left running: %q", alive)
	}
}
