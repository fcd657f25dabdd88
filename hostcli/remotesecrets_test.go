package hostcli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
	"github.com/osaurus/osaurus-sandbox/remotes"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

// A far side whose secretStore is "client" keeps its agents' secrets on
// this machine: `--context box secret set/list/remove` write this
// machine's store under the context's service (the far side names the
// agent, and never sees the value), and while `mcp --agent` relays, the
// far owner reads them from here; before and after, its reads fail
// saying to connect. The far side is a second data folder on this machine
// with an owner running, reached by the real dial-stdio through a
// stand-in ssh; this machine's store is the file store (TestMain leaves
// no keychain).
func TestSecretsFromThisMachineThroughContext(t *testing.T) {
	local, far, ctl := farAndLocal(t, []string{"agent", "add", "alice"}, []string{"agent", "set", "alice", "enabled", "true"}, []string{"config", "set", "secretStore", "client"})
	farSecrets := ctl.(*host.Host).Secrets()
	if _, errOut, code := run(t, "config", "set", "secretStore", "file"); code != ExitOK {
		t.Fatal(errOut)
	}
	lp := config.Paths{Root: local}
	// This machine's own sandbox has a secret of an agent of that name:
	// the far side must never get it.
	if err := secrets.ForDataDir(lp).Set("alice", "TOKEN", "this-machines-own-sandbox"); err != nil {
		t.Fatal(err)
	}
	farSide(t, "box", far)
	localFile := secrets.File{Path: lp.SecretsFile(), Lock: lp.SecretsLock()}
	inContext := func(key string) (string, error) {
		return localFile.Get(secrets.ClientService("box"), "alice/"+key)
	}

	const noClient = "no machine that holds this sandbox's secrets is connected"
	for _, tt := range []struct {
		args  []string
		stdin string
		code  int
		out   string // in stdout, or stderr when code != 0
	}{
		{[]string{"secret", "set", "alice", "TOKEN"}, "from-this-machine-1\n", ExitOK, "stored TOKEN for alice"},
		{[]string{"secret", "set", "alicee", "TOKEN"}, "typo-value-123\n", ExitError, "alicee"},
		{[]string{"secret", "list", "alice"}, "", ExitOK, "TOKEN"},
		{[]string{"secret", "set", "--app", secrets.InferenceKey}, "far-inference-key-3\n", ExitOK, "stored " + secrets.InferenceKey},
	} {
		var out, errOut bytes.Buffer
		code := Main(append([]string{"--context", "box"}, tt.args...), strings.NewReader(tt.stdin), &out, &errOut, Owner{})
		text := out.String()
		if code != ExitOK {
			text = errOut.String()
		}
		if code != tt.code || !strings.Contains(text, tt.out) {
			t.Errorf("%v: exit %d (want %d), want %q\nstdout: %s\nstderr: %s", tt.args, code, tt.code, tt.out, out.String(), errOut.String())
		}
	}
	if v, err := inContext("TOKEN"); err != nil || v != "from-this-machine-1" {
		t.Fatalf("this machine's entry of the context: %q, %v", v, err)
	}
	if v, err := secrets.ForDataDir(lp).Get("alice", "TOKEN"); err != nil || v != "this-machines-own-sandbox" {
		t.Fatalf("the context's set touched this machine's own sandbox: %q, %v", v, err)
	}

	// No front end offers them yet.
	if v, err := farSecrets.Get("alice", "TOKEN"); !errors.Is(err, secrets.ErrUnavailable) || !strings.Contains(err.Error(), noClient) {
		t.Fatalf("the far owner's read with no client: %q, %v", v, err)
	}

	// An MCP session through the context offers them while it lasts.
	mcpIn, feed := io.Pipe()
	outR, outW := io.Pipe()
	ended := make(chan int, 1)
	var mcpOut, mcpErr bytes.Buffer // mcpOut: the lines read below
	go func() {
		ended <- Main([]string{"--context", "box", "mcp", "--agent", "alice"}, mcpIn, outW, &mcpErr, Owner{})
		outW.Close()
	}()
	answers := bufio.NewReader(outR)
	// call sends one JSON-RPC request and returns its answer's line.
	call := func(id int, method, params string) string {
		t.Helper()
		fmt.Fprintf(feed, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
		line, err := answers.ReadString('\n')
		if err != nil {
			t.Fatalf("no answer to %s: %v\n%s", method, err, mcpErr.String())
		}
		mcpOut.WriteString(line)
		return line
	}
	testwait.Eventually(t, "the relay offers this machine's secrets", 30*time.Second, 5*time.Millisecond, func() bool {
		return farSecrets.Clients().Connected() == 1
	})
	if v, err := farSecrets.Get("alice", "TOKEN"); err != nil || v != "from-this-machine-1" {
		t.Fatalf("the far owner's read with the relay running: %q, %v", v, err)
	}
	if v, err := farSecrets.GetApp(secrets.InferenceKey); err != nil || v != "far-inference-key-3" {
		t.Errorf("the far owner's app key: %q, %v", v, err)
	}
	if got := farSecrets.Scrub("alice", "echo from-this-machine-1"); got != "echo [REDACTED:TOKEN]" {
		t.Errorf("the far side's Scrub = %q", got)
	}
	// The far side stores through the relay too (sandbox_secret_set).
	if err := farSecrets.Set("alice", "OTHER", "set-over-there-2"); err != nil {
		t.Fatal(err)
	}
	if v, err := inContext("OTHER"); err != nil || v != "set-over-there-2" {
		t.Errorf("the far side's set: %q, %v", v, err)
	}
	// The agent's secret tools, called by the MCP client through the
	// relay: the far side's mcp process can't reach this machine's store
	// itself, so it runs them in its owner, which can.
	call(1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"t","version":"1"}}`)
	fmt.Fprintln(feed, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, tt := range []struct{ params, want string }{
		{`{"name":"sandbox_secret_check","arguments":{"key":"TOKEN"}}`, `\"exists\":true`},
		{`{"name":"sandbox_secret_check","arguments":{"key":"MISSING"}}`, `\"exists\":false`},
		{`{"name":"sandbox_secret_set","arguments":{"key":"BY_TOOL","value":"set-by-the-tool-5"}}`, `\"stored\":true`},
	} {
		if line := call(2, "tools/call", tt.params); !strings.Contains(line, tt.want) {
			t.Errorf("%s through the relay: %s, want %s", tt.params, line, tt.want)
		}
	}
	if v, err := inContext("BY_TOOL"); err != nil || v != "set-by-the-tool-5" {
		t.Errorf("sandbox_secret_set through the relay stored %q, %v here", v, err)
	}
	// A prompt: the far mcp process serves the page (the MCP session is
	// there), and what the user types there is stored through its owner,
	// so here.
	fmt.Fprintln(feed, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sandbox_secret_set","arguments":{"key":"PROMPTED"}}}`)
	line, err := answers.ReadString('\n')
	var el struct {
		ID     json.RawMessage
		Method string
		Params struct{ URL string }
	}
	if err != nil || json.Unmarshal([]byte(line), &el) != nil || el.Method != "elicitation/create" {
		t.Fatalf("want the page's elicitation: %q %v\n%s", line, err, mcpErr.String())
	}
	res, err := http.Get(el.Params.URL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if csrf == nil {
		t.Fatalf("no form on %s: %s", el.Params.URL, page)
	}
	if res, err = http.PostForm(el.Params.URL, url.Values{"csrf": {string(csrf[1])}, "value": {"typed-on-the-page-6"}, "action": {"save"}}); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	fmt.Fprintf(feed, `{"jsonrpc":"2.0","id":%s,"result":{"action":"accept"}}`+"\n", el.ID)
	for {
		line, err := answers.ReadString('\n')
		if err != nil {
			t.Fatalf("no answer to the prompt: %v\n%s", err, mcpErr.String())
		}
		mcpOut.WriteString(line)
		if strings.HasPrefix(line, `{"jsonrpc":"2.0","id":3,`) {
			if !strings.Contains(line, `\"stored\":true`) {
				t.Errorf("the prompt's answer: %s", line)
			}
			break
		}
	}
	if v, err := inContext("PROMPTED"); err != nil || v != "typed-on-the-page-6" {
		t.Errorf("the prompt stored %q, %v here", v, err)
	}
	// The rest the relay writes (the elicitation's completion), read to
	// its end.
	var rest bytes.Buffer
	drained := make(chan struct{})
	go func() {
		io.Copy(&rest, answers)
		close(drained)
	}()

	// The MCP client goes: the relay ends, and its offer with it.
	feed.Close()
	if code := <-ended; code != ExitOK {
		t.Fatalf("mcp relay: exit %d\n%s", code, mcpErr.String())
	}
	<-drained
	mcpOut.Write(rest.Bytes())
	// The far owner sees the link go once ssh and its dial-stdio exit.
	testwait.Eventually(t, "the offer ends with the relay", 30*time.Second, 5*time.Millisecond, func() bool {
		return farSecrets.Clients().Connected() == 0
	})
	if _, err := farSecrets.Get("alice", "TOKEN"); !errors.Is(err, secrets.ErrUnavailable) || !strings.Contains(err.Error(), noClient) {
		t.Fatalf("the far owner's read after the relay: %v", err)
	}
	if strings.Contains(mcpErr.String()+mcpOut.String(), "from-this-machine-1") || strings.Contains(mcpOut.String(), "set-by-the-tool-5\"") || strings.Contains(mcpOut.String(), "typed-on-the-page-6") {
		t.Errorf("a value was printed:\n%s\n%s", mcpOut.String(), mcpErr.String())
	}

	if out, errOut, code := runWith(t, Owner{}, "--context", "box", "secret", "remove", "alice", "TOKEN"); code != ExitOK || !strings.Contains(out, "removed TOKEN from alice") {
		t.Fatalf("secret remove: %d %q %q", code, out, errOut)
	}
	if _, err := inContext("TOKEN"); err == nil {
		t.Error("secret remove left this machine's entry")
	}

	// A far side that keeps its secrets itself is told apart.
	t.Setenv(config.HomeEnv, far)
	if _, errOut, code := run(t, "config", "set", "secretStore", "file"); code != ExitOK {
		t.Fatal(errOut)
	}
	t.Setenv(config.HomeEnv, local)
	if _, errOut, code := runWith(t, Owner{}, "--context", "box", "secret", "list", "alice"); code != ExitError || !strings.Contains(errOut, "keeps its secrets on that machine (secretStore file)") {
		t.Errorf("secret list of a far side with its own store: %d %q", code, errOut)
	}
}

// A relay connected while the far side keeps its own secrets starts
// offering this machine's once that side switches to secretStore client,
// without reconnecting the MCP client.
func TestRelayOffersSecretsOnceTheFarSideAsks(t *testing.T) {
	_, far, ctl := farAndLocal(t, []string{"agent", "add", "alice"}, []string{"config", "set", "secretStore", "file"})
	farSecrets := ctl.(*host.Host).Secrets()
	if _, errOut, code := run(t, "config", "set", "secretStore", "file"); code != ExitOK {
		t.Fatal(errOut)
	}
	farSide(t, "box", far)
	defer func(d time.Duration) { remotes.FarStorePoll = d }(remotes.FarStorePoll)
	remotes.FarStorePoll = 10 * time.Millisecond
	checked := make(chan string, 100)
	remotes.OfferChecked = func(store string) {
		select {
		case checked <- store:
		default:
		}
	}
	defer func() { remotes.OfferChecked = func(string) {} }()

	mcpIn, feed := io.Pipe()
	ended := make(chan int, 1)
	var mcpOut, mcpErr bytes.Buffer
	go func() {
		ended <- Main([]string{"--context", "box", "mcp", "--agent", "alice"}, mcpIn, &mcpOut, &mcpErr, Owner{})
	}()
	defer func() {
		feed.Close()
		if code := <-ended; code != ExitOK {
			t.Errorf("mcp relay: exit %d\n%s", code, mcpErr.String())
		}
	}()
	// The relay has found the far side keeping its own secrets.
	if store := <-checked; store != config.SecretStoreFile {
		t.Fatalf("the relay's first look at the far side: secretStore %q", store)
	}
	if _, errOut, code := run(t, "--context", "box", "config", "set", "secretStore", "client"); code != ExitOK {
		t.Fatal(errOut)
	}
	testwait.Eventually(t, "the running relay offers this machine's secrets", 30*time.Second, 5*time.Millisecond, func() bool {
		return farSecrets.Clients().Connected() == 1
	})
}
