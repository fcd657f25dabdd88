package bridge_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/inference"
	"github.com/osaurus/osaurus-sandbox/internal/scriptedmodel"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
)

func TestInferenceChat(t *testing.T) {
	model := scriptedmodel.Start(t, "127.0.0.1:0")
	settings := inference.Settings{}
	s := bridge.New(bridge.Options{
		Inference: &inference.Client{Settings: func() (inference.Settings, error) { return settings, nil }},
		Rate:      limit.NewRateLimiter(limit.RateOptions{Limits: map[string]int{"inference": 6}}),
	})
	t.Cleanup(func() { s.Close() })
	alice := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"})
	chat := `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"}]}`

	// 1: not configured → 503 naming the setting.
	code, m := do(t, alice, "POST", "/api/inference/chat", chat)
	if code != 503 || !strings.Contains(m["error"].(string), "inferenceUrl") {
		t.Fatalf("unconfigured: %d %v", code, m)
	}
	settings = inference.Settings{URL: model.URL, Model: "scripted"}

	// 2: the answer, with the agent's messages forwarded.
	model.Play(scriptedmodel.Turn{Content: "hi there"})
	if code, m := do(t, alice, "POST", "/api/inference/chat", chat); code != 200 || m["content"] != "hi there" {
		t.Fatalf("chat: %d %v", code, m)
	}
	if r := model.Requests()[0]; len(r.Messages) != 2 || r.Messages[1].Content != "hello" || r.Messages[0].Role != "system" || r.Model != "scripted" {
		t.Errorf("forwarded request: %+v", r)
	}

	// 3: an upstream error → 502 with its message.
	model.Play(scriptedmodel.Turn{Status: 500, Error: "out of memory loading model"})
	if code, m := do(t, alice, "POST", "/api/inference/chat", chat); code != 502 || !strings.Contains(m["error"].(string), "out of memory loading model") {
		t.Fatalf("upstream error: %d %v", code, m)
	}

	// 4: a tool message can't be smuggled in → 400.
	if code, m := do(t, alice, "POST", "/api/inference/chat", `{"messages":[{"role":"tool","content":"x"}]}`); code != 400 {
		t.Fatalf("tool role: %d %v", code, m)
	}

	// 5: streaming: deltas, then the whole content.
	model.Play(scriptedmodel.Turn{Content: "one two three"})
	resp, err := alice.Post("http://bridge/api/inference/chat", "application/json", strings.NewReader(`{"stream":true,"model":"other","messages":[{"role":"user","content":"count"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var deltas []string
	var final map[string]string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l map[string]string
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("stream line %q: %v", sc.Text(), err)
		}
		if d, ok := l["delta"]; ok {
			deltas = append(deltas, d)
		} else {
			final = l
		}
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Join(deltas, "") != "one two three" || len(deltas) != 3 || final["content"] != "one two three" {
		t.Fatalf("stream: %d deltas %q final %v", resp.StatusCode, deltas, final)
	}
	if r := model.Requests()[2]; !r.Stream || r.Model != "other" {
		t.Errorf("streamed request: %+v", r)
	}

	// 6: the sixth call (the script is empty: 500 upstream → 502), then
	// the seventh within the minute is over the quota of 6 → 429.
	if code, m := do(t, alice, "POST", "/api/inference/chat", chat); code != 502 {
		t.Fatalf("sixth call: %d %v", code, m)
	}
	code, m = do(t, alice, "POST", "/api/inference/chat", chat)
	if code != 429 || !strings.Contains(m["error"].(string), "inference") {
		t.Fatalf("over quota: %d %v", code, m)
	}
	if n := len(model.Requests()); n != 4 {
		t.Errorf("the model got %d requests, want 4 (refused calls never reach it)", n)
	}
}

// TestInferenceChatScrubsSecrets: an agent's chat reaches the model
// server with the agent's secret values scrubbed.
func TestInferenceChatScrubsSecrets(t *testing.T) {
	model := scriptedmodel.Start(t, "127.0.0.1:0")
	s := bridge.New(bridge.Options{
		Secrets:   mapSecrets{"alice": {"API_KEY": "sk-alice-123456"}},
		Inference: &inference.Client{Settings: func() (inference.Settings, error) { return inference.Settings{URL: model.URL, Model: "m"}, nil }},
	})
	t.Cleanup(func() { s.Close() })
	alice := relay(t, s, agentproto.BridgeRequest{UID: 1001, User: "agent-alice", Agent: "alice"})
	model.Play(scriptedmodel.Turn{Content: "ok"})
	if code, m := do(t, alice, "POST", "/api/inference/chat", `{"messages":[{"role":"user","content":"my key is sk-alice-123456"}]}`); code != 200 {
		t.Fatalf("chat: %d %v", code, m)
	}
	if r := model.Requests()[0]; r.Messages[0].Content != "my key is [REDACTED:API_KEY]" {
		t.Errorf("the model server got %q", r.Messages[0].Content)
	}
}
