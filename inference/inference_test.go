package inference_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/inference"
	"github.com/osaurus/osaurus-sandbox/internal/scriptedmodel"
)

func client(url, model, key string) *inference.Client {
	return &inference.Client{Settings: func() (inference.Settings, error) {
		return inference.Settings{URL: url, Model: model, APIKey: key}, nil
	}}
}

func TestComplete(t *testing.T) {
	srv := scriptedmodel.Start(t, "127.0.0.1:0")
	calls := []scriptedmodel.Call{{Name: "sandbox_exec", Args: `{"command":"echo hi"}`}, {Name: "sandbox_read_file", Args: `{"path":"a.txt"}`}}
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "stream"}[stream], func(t *testing.T) {
			srv.Play(scriptedmodel.Turn{Calls: calls}, scriptedmodel.Turn{Content: "all done here"})
			c := client(srv.URL, "m1", "sk-test-key-1")
			var deltas []string
			var onDelta func(string)
			if stream {
				onDelta = func(d string) { deltas = append(deltas, d) }
			}
			m, err := c.Complete(context.Background(), inference.Request{Messages: []inference.Message{{Role: "user", Content: "hi"}},
				Tools: []inference.Tool{{Type: "function", Function: inference.Function{Name: "sandbox_exec"}}}}, onDelta)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.ToolCalls) != 2 || m.ToolCalls[0].Function.Name != "sandbox_exec" || m.ToolCalls[0].Function.Arguments != calls[0].Args ||
				m.ToolCalls[1].Function.Arguments != calls[1].Args || m.ToolCalls[0].ID == "" {
				t.Fatalf("tool calls = %+v", m.ToolCalls)
			}
			m, err = c.Complete(context.Background(), inference.Request{Model: "m2", Messages: []inference.Message{{Role: "user", Content: "hi"}}}, onDelta)
			if err != nil || m.Content != "all done here" || len(m.ToolCalls) != 0 {
				t.Fatalf("answer = %+v, %v", m, err)
			}
			if stream && strings.Join(deltas, "|") != "all |done |here" {
				t.Errorf("deltas = %q", deltas)
			}
			reqs := srv.Requests()
			last := reqs[len(reqs)-1]
			if last.Model != "m2" || last.Stream != stream || last.Authorization != "Bearer sk-test-key-1" || last.Path != "/v1/chat/completions" {
				t.Errorf("request = %+v", last)
			}
			if prev := reqs[len(reqs)-2]; prev.Model != "m1" || len(prev.ToolNames()) != 1 {
				t.Errorf("default model / tools not sent: %+v", prev)
			}
		})
	}
}

func TestCompleteErrors(t *testing.T) {
	srv := scriptedmodel.Start(t, "127.0.0.1:0")
	ctx := context.Background()
	msgs := []inference.Message{{Role: "user", Content: "hi"}}
	for _, tc := range []struct {
		name       string
		url, model string
		turn       *scriptedmodel.Turn
		want       error
		wantStatus int
		wantMsg    string
	}{
		{name: "no url", model: "m", want: inference.ErrNotConfigured, wantMsg: "inferenceUrl"},
		{name: "no model", url: srv.URL, want: inference.ErrNotConfigured, wantMsg: "inferenceModel"},
		{name: "upstream 500", url: srv.URL, model: "m", turn: &scriptedmodel.Turn{Status: 500, Error: "model exploded"}, want: inference.ErrUpstream, wantStatus: 500, wantMsg: "model exploded"},
		{name: "key not echoed", url: srv.URL, model: "m", turn: &scriptedmodel.Turn{Status: 401, Error: "bad key sk-test-key-1"}, want: inference.ErrUpstream, wantStatus: 401, wantMsg: "bad key [REDACTED:INFERENCE_API_KEY]"},
		{name: "wrong path", url: srv.URL + "/nope", model: "m", want: inference.ErrUpstream, wantStatus: 404, wantMsg: "no route"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.turn != nil {
				srv.Play(*tc.turn)
			}
			_, err := client(tc.url, tc.model, "sk-test-key-1").Complete(ctx, inference.Request{Messages: msgs}, nil)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.want, tc.wantMsg)
			}
			var ue *inference.UpstreamError
			if tc.wantStatus != 0 && (!errors.As(err, &ue) || ue.Status != tc.wantStatus) {
				t.Errorf("err = %#v, want status %d", err, tc.wantStatus)
			}
		})
	}
}
