package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSettingsParsedFully: every URL and image setting is parsed whole
// when set, so a value that would fail later is refused now, naming the
// key and what it takes.
func TestSettingsParsedFully(t *testing.T) {
	tests := []struct {
		key, value string
		wantMsg    string // "" means accepted
	}{
		{"githubApiUrl", "https://", "githubApiUrl: \"https://\" has no host"},
		{"githubApiUrl", "https://ghe.example.com:8443/api/v3", ""},
		{"githubApiUrl", "http://ghe.example.com/api/v3", "has the wrong scheme"},
		{"githubRawUrl", "https://user:pw@raw.example.com/", "carries credentials"},
		{"githubRawUrl", "https://raw.example.com/?token=abc", "carries a credential in its query (token=)"},
		{"githubRawUrl", "https://raw.example.com:0/", "port outside 1–65535"},
		{"githubRawUrl", "https://raw.example.com:/", "has an empty port"},
		{"inferenceUrl", "http://127.0.0.1:99999/v1", "port outside 1–65535"},
		{"inferenceUrl", "http://127.0.0.1:11434/v1", ""},
		{"inferenceUrl", "http://me:pw@127.0.0.1:11434/v1", "secret set --app INFERENCE_API_KEY"},
		{"inferenceUrl", "http://127.0.0.1:11434/v1?x=1", "has a query"},
		{"imageManifest", "builtin:alpine", ""},
		{"imageManifest", "builtin:debian", `"builtin:debian" is not a built-in image; the built-in images are builtin:alpine`},
		{"imageManifest", "file:///srv/images/manifest.json", ""},
		{"imageManifest", "file://images/manifest.json", "absolute path"},
		{"imageManifest", "file:manifest.json", "absolute path"},
		{"imageManifest", "https://images.example.com/m.json?sig=abc", "carries a credential"},
		{"diagnosticsUrl", "https://:443/", "has no host"},
		{"diagnosticsUrl", "file:///etc/passwd", "has the wrong scheme"},
		{"mcpPort", "47900", ""},
		{"mcpPort", "80", "mcpPort: 80, allowed 1024–65535"},
		{"mcpPort", "70000", "mcpPort: 70000"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			_, err := Defaults().Set(tt.key, tt.value)
			switch {
			case tt.wantMsg == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantMsg != "" && (err == nil || !strings.Contains(err.Error(), tt.wantMsg) || !strings.Contains(err.Error(), tt.key)):
				t.Fatalf("got %v, want an error naming %s with %q", err, tt.key, tt.wantMsg)
			}
		})
	}
}

// TestRepairHandEdited: a hand-edited file with an unknown key and a bad
// value is read key by key (each problem with its line), and set and
// reset repair it without touching the user's other entries.
func TestRepairHandEdited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandbox.json")
	os.WriteFile(path, []byte(`{
  "cpus": 4,
  "colour": "red",
  "memoryGB": 64,
  "inferenceModel": "llama3"
}
`), 0o644)
	if _, err := LoadSandbox(path); err == nil {
		t.Fatal("the strict loader accepted the file")
	}
	s, probs, err := LoadSandboxLenient(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUs != 4 || s.InferenceModel != "llama3" || s.MemoryGB != Defaults().MemoryGB {
		t.Errorf("lenient settings: %+v", s)
	}
	text := ProblemsText(probs)
	for _, want := range []string{`sandbox.json line 3: invalid setting: unknown key "colour"`, "config reset colour", "sandbox.json line 4: invalid setting: memoryGB: 64, allowed 1–8", "config set memoryGB VALUE"} {
		if !strings.Contains(text, want) {
			t.Errorf("problems %q lack %q", text, want)
		}
	}
	if _, _, left, err := SetKey(path, "memoryGB", "4"); err != nil || len(left) != 1 || left[0].Key != "colour" {
		t.Fatalf("set memoryGB: left %v, %v", left, err)
	}
	if _, _, left, err := ResetKey(path, "colour"); err != nil || len(left) != 0 {
		t.Fatalf("reset colour: left %v, %v", left, err)
	}
	s, err = LoadSandbox(path)
	if err != nil || s.CPUs != 4 || s.MemoryGB != 4 || s.InferenceModel != "llama3" {
		t.Fatalf("after the repair: %+v, %v", s, err)
	}
	if _, _, _, err := ResetKey(path, "nosuch"); err == nil || !strings.Contains(err.Error(), `unknown key "nosuch"`) {
		t.Errorf("reset of a key neither known nor in the file: %v", err)
	}
	if _, _, left, err := ResetKey(path, "cpus"); err != nil || len(left) != 0 {
		t.Fatal(left, err)
	}
	if s, _ := LoadSandbox(path); s.CPUs != Defaults().CPUs {
		t.Errorf("reset cpus left %d", s.CPUs)
	}
	os.WriteFile(path, []byte("{\n  \"cpus\": 4,\n  \"memoryGB\" 2\n}\n"), 0o644)
	if _, _, err := LoadSandboxLenient(path); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("a file that isn't JSON: %v, want the line", err)
	}
}
