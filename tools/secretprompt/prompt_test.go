package secretprompt

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// memStore records what reaches the keychain; the real keychain is
// covered in the secrets, mcpserver, ui and e2e tests.
type memStore struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *memStore) Set(agent, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]string{}
	}
	s.m[agent+"/"+key] = value
	return nil
}

func (s *memStore) get(k string) string { s.mu.Lock(); defer s.mu.Unlock(); return s.m[k] }

// elicitor is an MCP client session that accepts and reports the URL.
type elicitor struct {
	urls     chan string
	mu       sync.Mutex
	complete []string
	ids      []string
}

func (e *elicitor) ElicitURL(_ context.Context, id, u, _ string) (string, error) {
	e.mu.Lock()
	e.ids = append(e.ids, id)
	e.mu.Unlock()
	e.urls <- u
	return "accept", nil
}

func (e *elicitor) ElicitationComplete(_ context.Context, id string) {
	e.mu.Lock()
	e.complete = append(e.complete, id)
	e.mu.Unlock()
}

var alice = agents.Agent{Name: "Alice", Slug: "alice"}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func post(t *testing.T, u string, form url.Values) int {
	t.Helper()
	res, err := http.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func setup(t *testing.T) (*Broker, *memStore, *elicitor, context.Context) {
	st := &memStore{}
	p := &Pages{Store: st}
	t.Cleanup(func() { p.Close() })
	el := &elicitor{urls: make(chan string, 1)}
	return &Broker{Store: st, Pages: p}, st, el, tools.WithURLElicitor(context.Background(), el)
}

// TestFirstAnswerWins: the window answers while the page is open; the
// page is withdrawn and the client told the elicitation is complete.
func TestFirstAnswerWins(t *testing.T) {
	b, st, el, ctx := setup(t)
	release := make(chan struct{})
	defer b.SetDialog(func(context.Context, tools.SecretRequest) (string, bool) { <-release; return "from-the-dialog", true })()
	done := make(chan error, 1)
	go func() { done <- b.PromptSecret(ctx, tools.SecretRequest{Agent: alice, Key: "K"}) }()
	u := <-el.urls
	if code, _ := get(t, u); code != 200 {
		t.Fatalf("page: %d", code)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v := st.get("alice/K"); v != "from-the-dialog" {
		t.Fatalf("stored %q", v)
	}
	if code, _ := get(t, u); code != 404 {
		t.Errorf("page after the dialog answered: %d, want 404", code)
	}
	el.mu.Lock()
	defer el.mu.Unlock()
	if len(el.complete) != 1 || el.complete[0] != el.ids[0] {
		t.Errorf("completion %v for elicitation %v", el.complete, el.ids)
	}
	if strings.Contains(u, el.ids[0]) {
		t.Error("the elicitation id is the page's capability")
	}
}

// TestCancelWithdraws: cancelling the tool call closes the dialog and the
// page.
func TestCancelWithdraws(t *testing.T) {
	b, _, el, ctx := setup(t)
	ctx, cancel := context.WithCancel(ctx)
	withdrawn := make(chan struct{})
	defer b.SetDialog(func(ctx context.Context, _ tools.SecretRequest) (string, bool) {
		<-ctx.Done()
		close(withdrawn)
		return "", false
	})()
	done := make(chan error, 1)
	go func() { done <- b.PromptSecret(ctx, tools.SecretRequest{Agent: alice, Key: "K"}) }()
	u := <-el.urls
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("PromptSecret = %v, want context.Canceled", err)
	}
	<-withdrawn
	if code, body := get(t, u); code != 404 || !strings.Contains(body, "expired") {
		t.Errorf("page after cancel: %d", code)
	}
}

// TestPageRefusesBadValues: an empty or oversized value is refused
// without using the page up; the next good one is stored.
func TestPageRefusesBadValues(t *testing.T) {
	b, st, el, ctx := setup(t)
	done := make(chan error, 1)
	go func() { done <- b.PromptSecret(ctx, tools.SecretRequest{Agent: alice, Key: "K"}) }()
	u := <-el.urls
	_, page := get(t, u)
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form: %s", page)
	}
	for _, tc := range []struct {
		name, value string
		want        int
	}{{"empty", "", 400}, {"too long", strings.Repeat("x", MaxValueBytes+1), 413}, {"way too long", strings.Repeat("x", 3*MaxValueBytes), 413}} {
		if code := post(t, u, url.Values{"csrf": {m[1]}, "value": {tc.value}}); code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, code, tc.want)
		}
	}
	if code := post(t, u, url.Values{"csrf": {m[1]}, "value": {"good-value"}}); code != 200 {
		t.Fatalf("good value: %d", code)
	}
	if err := <-done; err != nil || st.get("alice/K") != "good-value" {
		t.Fatalf("%v, stored %q", err, st.get("alice/K"))
	}
}

// TestNoChannel: without a client that can open links and without the
// window, the answer names the CLI command.
func TestNoChannel(t *testing.T) {
	b := &Broker{Store: &memStore{}, Pages: &Pages{}}
	err := b.PromptSecret(context.Background(), tools.SecretRequest{Agent: alice, Key: "K"})
	var np *tools.NoPromptError
	if !errors.As(err, &np) || !strings.Contains(err.Error(), "osaurus-sandbox secret set alice K") {
		t.Fatalf("%v", err)
	}
}
