package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidateNamesKeyAndRange(t *testing.T) {
	tests := []struct {
		key, value string
		wantMsg    string // "" means accepted
	}{
		{"cpus", "8", ""},
		{"cpus", "0", "cpus: 0, allowed 1–8"},
		{"cpus", "9", "cpus: 9, allowed 1–8"},
		{"cpus", "two", `cpus: "two" is not a whole number`},
		{"memoryGB", "1", ""},
		{"memoryGB", "16", "memoryGB: 16, allowed 1–8"},
		{"network", "none", ""},
		{"network", "bridged", `network: "bridged", allowed "outbound" or "none"`},
		{"autoStart", "false", ""},
		{"autoStart", "maybe", "autoStart"},
		{"accel", "tcg", ""},
		{"accel", "hvf", "accel"},
		{"machine", "microvm", ""},
		{"machine", "q35", ""},
		{"machine", "", ""},
		{"machine", "pc", `machine: "pc", allowed "q35", "microvm" or "" for the default`},
		{"imageManifest", "ftp://x", "imageManifest"},
		{"colour", "red", `unknown key "colour"`},
		{"githubApiUrl", "https://ghe.example.com/api/v3", ""},
		{"githubApiUrl", "http://ghe.example.com/api/v3", "githubApiUrl"},
		{"githubRawUrl", "ftp://x", "githubRawUrl"},
		{"pluginSetupAllowlist", "example.org, *.example.net", ""},
		{"pluginSetupAllowlist", "", ""},
		{"pluginSetupAllowlist", "example.org,https://x.org", `pluginSetupAllowlist: "https://x.org" is not a host name`},
		{"pluginSetupAllowlist", "*", "pluginSetupAllowlist"},
		{"inferenceUrl", "http://127.0.0.1:11434/v1", ""},
		{"inferenceUrl", "https://models.example/v1/", ""},
		{"inferenceUrl", "", ""},
		{"inferenceUrl", "ftp://x/v1", "inferenceUrl"},
		{"inferenceUrl", "http://user:pw@127.0.0.1/v1", "carries credentials"},
		{"inferenceUrl", "http:///v1", "has no host"},
		{"inferenceUrl", "http://h/v1?x=1", "query"},
		{"inferenceModel", "llama3.2:3b", ""},
		{"inferenceModel", "a\nb", "inferenceModel"},
		{"runnerMaxSteps", "1", ""},
		{"runnerMaxSteps", "0", "runnerMaxSteps: 0, allowed 1–200"},
		{"runnerMaxSteps", "201", "runnerMaxSteps"},
		{"runnerTimeoutSeconds", "9", "runnerTimeoutSeconds"},
		{"runnerTimeoutSeconds", "60", ""},
		{"backgroundIdleMinutes", "0", ""},
		{"backgroundIdleMinutes", "0.01", ""},
		{"backgroundIdleMinutes", "-1", "backgroundIdleMinutes: -1, allowed 0–1440"},
		{"backgroundIdleMinutes", "later", `backgroundIdleMinutes: "later" is not a number`},
		{"idleSuspendMinutes", "0", ""},
		{"idleSuspendMinutes", "0.05", ""},
		{"idleSuspendMinutes", "1440", ""},
		{"idleSuspendMinutes", "-1", "idleSuspendMinutes: -1, allowed 0–1440"},
		{"idleSuspendMinutes", "1441", "idleSuspendMinutes"},
		{"idleSuspendMinutes", "NaN", "idleSuspendMinutes"},
		{"safetyCheckpoints", "0", ""},
		{"safetyCheckpoints", "50", ""},
		{"safetyCheckpoints", "51", "safetyCheckpoints: 51, allowed 0–50"},
		{"safetyCheckpoints", "-1", "safetyCheckpoints"},
		{"idleSuspendMinutes", "soon", `idleSuspendMinutes: "soon" is not a number`},
		{"rateLimits", "exec=600, bridge=60", ""},
		{"rateLimits", "", ""},
		{"rateLimits", "exec", `rateLimits: "exec" is not service=count`},
		{"rateLimits", "exec=many", `rateLimits: "exec=many" is not service=count`},
		{"rateLimits", "shell=5", `rateLimits: "shell" is not a service`},
		{"rateLimits", "exec=0", "rateLimits: exec=0, allowed 1–1000000000"},
		{"turnIdleSeconds", "0.001", ""},
		{"turnIdleSeconds", "0", ""},
		{"turnIdleSeconds", "3601", "turnIdleSeconds: 3601, allowed 0.001–3600"},
		{"turnIdleSeconds", "-1", "turnIdleSeconds"},
		{"turnIdleSeconds", "soon", `turnIdleSeconds: "soon" is not a number`},
		{"secretStore", "file", ""},
		{"secretStore", "keychain", ""},
		{"secretStore", "client", ""},
		{"secretStore", "Client", `"client" (the keychain of the machine that drives`},
		{"secretStore", "", ""},
		{"secretStore", "File", `secretStore: "File", allowed "keychain"`},
		{"secretStore", "plaintext", `secretStore: "plaintext", allowed "keychain"`},
	}
	for _, tc := range tests {
		_, err := Defaults().Set(tc.key, tc.value)
		if tc.wantMsg == "" {
			if err != nil {
				t.Errorf("set %s=%s: %v", tc.key, tc.value, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantMsg) {
			t.Errorf("set %s=%s: %v, want %q", tc.key, tc.value, err, tc.wantMsg)
		}
	}
}

func TestLoadSaveRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config", "sandbox.json")
	s, err := LoadSandbox(p)
	if err != nil || s != Defaults() {
		t.Fatalf("missing file: %+v %v, want defaults", s, err)
	}
	s.CPUs, s.Network = 4, "none"
	if err := SaveSandbox(p, s); err != nil {
		t.Fatal(err)
	}
	got, err := LoadSandbox(p)
	if err != nil || got != s {
		t.Fatalf("reloaded %+v %v, want %+v", got, err, s)
	}
	bad := s
	bad.MemoryGB = 64
	if err := SaveSandbox(p, bad); err == nil {
		t.Fatal("saved an invalid config")
	}
	if got, _ := LoadSandbox(p); got != s {
		t.Fatal("a refused save changed the file")
	}
}

func TestLoadRejectsTyposAndBadValues(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sandbox.json")
	for _, body := range []string{`{"cpu": 4}`, `{"cpus": 12}`, `{not json`} {
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := LoadSandbox(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", body, err)
		}
	}
}

func TestNeedsRestart(t *testing.T) {
	d := Defaults()
	a := d
	a.AutoStart = false
	if a.NeedsRestart(d) {
		t.Error("autoStart change asks for a restart")
	}
	a.CPUs = 4
	if !a.NeedsRestart(d) {
		t.Error("cpus change does not ask for a restart")
	}
	a = d
	a.Machine = "q35"
	if !a.NeedsRestart(d) {
		t.Error("machine change does not ask for a restart")
	}
}

// A missing idleSuspendMinutes means the default; a saved 0 stays off.
func TestIdleSuspendDefaultAndOff(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sandbox.json")
	os.WriteFile(p, []byte(`{"cpus": 2}`), 0o644)
	s, err := LoadSandbox(p)
	if err != nil || s.IdleSuspend() != DefaultIdleSuspendMinutes*time.Minute {
		t.Fatalf("missing key: %v %v, want %d minutes", s.IdleSuspend(), err, DefaultIdleSuspendMinutes)
	}
	s.IdleSuspendMinutes = 0
	if err := SaveSandbox(p, s); err != nil {
		t.Fatal(err)
	}
	if s, err = LoadSandbox(p); err != nil || s.IdleSuspend() != 0 {
		t.Fatalf("saved 0: %v %v, want off", s.IdleSuspend(), err)
	}
}

// secretStore reads back as the store in use, "keychain" when unset, and
// a file that names a store that does not exist is refused on load rather
// than taken for the keychain.
func TestSecretStoreSetting(t *testing.T) {
	tests := []struct {
		body, want string
		bad        bool
	}{
		{`{}`, SecretStoreKeychain, false},
		{`{"secretStore": "keychain"}`, SecretStoreKeychain, false},
		{`{"secretStore": "file"}`, SecretStoreFile, false},
		{`{"secretStore": "client"}`, SecretStoreClient, false},
		{`{"secretStore": "disk"}`, "", true},
	}
	for _, tc := range tests {
		p := filepath.Join(t.TempDir(), "sandbox.json")
		os.WriteFile(p, []byte(tc.body), 0o644)
		s, err := LoadSandbox(p)
		if tc.bad {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "secretStore") {
				t.Errorf("%s: %v, want a refusal naming secretStore", tc.body, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.body, err)
			continue
		}
		if got, _ := s.Get("secretStore"); got != tc.want || s.SecretBackend() != tc.want {
			t.Errorf("%s: Get = %q, SecretBackend = %q, want %q", tc.body, got, s.SecretBackend(), tc.want)
		}
	}
}
