package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func loadTestdata(t testing.TB, name string) *Plugin {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := DecodeBytes(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

func TestSeedExampleIsValid(t *testing.T) {
	p := loadTestdata(t, "python-data-tools.json")
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.ID() != "python-data-tools" || p.ToolName("analyze_csv") != "python-data-tools_analyze_csv" {
		t.Fatalf("id %q", p.ID())
	}
	if EnvName("output_format") != "PARAM_OUTPUT_FORMAT" {
		t.Fatal(EnvName("output_format"))
	}
}

func TestDecodeRefusals(t *testing.T) {
	for _, tt := range []struct {
		name, json, field, text string
	}{
		{"unknown top-level", `{"name":"a b","description":"x","colour":"red"}`, "colour", "known fields here: author, dependencies"},
		{"unknown in tool", `{"name":"a","description":"x","tools":[{"id":"t","description":"d","run":"r","timeout":3}]}`, "tools[0].timeout", "unknown field"},
		{"unknown in parameter", `{"name":"a","description":"x","tools":[{"id":"t","description":"d","run":"r","parameters":{"f":{"type":"string","required":true}}}]}`, "tools[0].parameters.f.required", "unknown field"},
		{"unknown in permissions", `{"name":"a","description":"x","permissions":{"net":"none"}}`, "permissions.net", "unknown field"},
		{"duplicate key", `{"name":"a","description":"x","setup":"true","setup":"curl evil"}`, "setup", "appears twice"},
		{"duplicate file", `{"name":"a","description":"x","files":{"a":"1","a":"2"}}`, "files.a", "appears twice"},
		{"wrong type", `{"name":"a","description":"x","dependencies":"python3"}`, "dependencies", "want an array"},
		{"wrong nested type", `{"name":"a","description":"x","tools":[{"id":5}]}`, "tools.id", "want a string"},
		{"not an object", `["name"]`, "(file)", "not a JSON object"},
		{"trailing data", `{"name":"a","description":"x"} {}`, "(file)", "data after the plugin object"},
		{"syntax", `{"name":"a",}`, "(", "not valid JSON"},
		{"empty", ``, "(file)", "not valid JSON"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeBytes([]byte(tt.json))
			var ie *InvalidError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v", err)
			}
			pr := ie.Problems[0]
			if !strings.HasPrefix(pr.Field, tt.field) || !strings.Contains(pr.String(), tt.text) || pr.Fix == "" {
				t.Fatalf("problem = %+v, want field %q and text %q", pr, tt.field, tt.text)
			}
		})
	}
}

func TestDecodeSizeCap(t *testing.T) {
	big := `{"name":"a","description":"x","setup":"` + strings.Repeat("a", MaxRecipeBytes) + `"}`
	_, err := Decode(strings.NewReader(big))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "larger than 4 MiB") {
		t.Fatal(err)
	}
}

func TestValidateProblems(t *testing.T) {
	base := func() *Plugin { return loadTestdata(t, "minimal.json") }
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, tt := range []struct {
		name   string
		change func(p *Plugin)
		field  string
		text   string
	}{
		{"no name", func(p *Plugin) { p.Name = " " }, "name", "missing"},
		{"bad id", func(p *Plugin) { p.Name = "Data/Tools!" }, "name", `e.g. "Data Tools"`},
		{"underscore id", func(p *Plugin) { p.Name = "my_tools" }, "name", `gives the id "my_tools"`},
		{"sandbox id", func(p *Plugin) { p.Name = "Sandbox" }, "name", "built-in sandbox_* tools"},
		{"long id", func(p *Plugin) { p.Name = strings.Repeat("a", 41) }, "name", "longer than 40"},
		{"no description", func(p *Plugin) { p.Description = "" }, "description", "missing"},
		{"version", func(p *Plugin) { p.Version = "v1" }, "version", "semantic version"},
		{"control char", func(p *Plugin) { p.Author = "a\x1b[31m" }, "author", "control character"},
		{"dep flag", func(p *Plugin) { p.Dependencies = []string{"--allow-untrusted"} }, "dependencies[0]", "not a package name"},
		{"dep shell", func(p *Plugin) { p.Dependencies = []string{"curl;reboot"} }, "dependencies[0]", "not a package name"},
		{"dep twice", func(p *Plugin) { p.Dependencies = []string{"jq", "jq"} }, "dependencies[1]", "twice"},
		{"absolute file", func(p *Plugin) { p.Files = map[string]string{"/etc/passwd": ""} }, `files["/etc/passwd"]`, "absolute"},
		{"dotdot file", func(p *Plugin) { p.Files = map[string]string{"a/../../x": ""} }, `files["a/../../x"]`, "contains .."},
		{"home file", func(p *Plugin) { p.Files = map[string]string{"~/x": ""} }, `files["~/x"]`, "starts with ~"},
		{"empty segment", func(p *Plugin) { p.Files = map[string]string{"a//b": ""} }, `files["a//b"]`, "empty or ."},
		{"backslash", func(p *Plugin) { p.Files = map[string]string{`a\..\b`: ""} }, `files["a\\..\\b"]`, "backslash"},
		{"case clash", func(p *Plugin) { p.Files = map[string]string{"A.txt": "", "a.txt": ""} }, `files["a.txt"]`, "only in letter case"},
		{"file is dir", func(p *Plugin) { p.Files = map[string]string{"a": "", "a/b": ""} }, `files["a/b"]`, "to be a folder"},
		{"big file", func(p *Plugin) { p.Files = map[string]string{"a": strings.Repeat("x", MaxFileBytes+1)} }, `files["a"]`, "limit per file"},
		{"binary file", func(p *Plugin) { p.Files = map[string]string{"a": "x\x00y"} }, `files["a"]`, "NUL"},
		{"total size", func(p *Plugin) {
			p.Files = map[string]string{}
			for i := 0; i < 5; i++ {
				p.Files[string(rune('a'+i))] = strings.Repeat("x", MaxFileBytes-1)
			}
		}, "(total)", "limit is"},
		{"tool id", func(p *Plugin) { p.Tools[0].ID = "Hi-There" }, "tools[0].id", "a–z, 0–9 and _"},
		{"tool twice", func(p *Plugin) { p.Tools = append(p.Tools, p.Tools[0]) }, "tools[1].id", "used by another tool"},
		{"tool name long", func(p *Plugin) { p.Tools[0].ID = strings.Repeat("t", 60) }, "tools[0].id", "longer than 64"},
		{"no run", func(p *Plugin) { p.Tools[0].Run = "" }, "tools[0].run", "missing"},
		{"no tool description", func(p *Plugin) { p.Tools[0].Description = "" }, "tools[0].description", "missing"},
		{"param type", func(p *Plugin) { p.Tools[0].Parameters["who"] = Parameter{Type: "str"} }, "tools[0].parameters.who.type", "use one of string, number"},
		{"param name", func(p *Plugin) { p.Tools[0].Parameters["a-b"] = Parameter{Type: "string"} }, "tools[0].parameters.a-b", "letters, digits and _"},
		{"param env clash", func(p *Plugin) { p.Tools[0].Parameters["WHO"] = Parameter{Type: "string"} }, "tools[0].parameters.who", "$PARAM_WHO"},
		{"default type", func(p *Plugin) { p.Tools[0].Parameters["n"] = Parameter{Type: "integer", Default: raw(`1.5`)} }, "tools[0].parameters.n.default", "is not an integer"},
		{"enum type", func(p *Plugin) {
			p.Tools[0].Parameters["n"] = Parameter{Type: "string", Enum: []json.RawMessage{raw(`"a"`), raw(`2`)}}
		}, "tools[0].parameters.n.enum[1]", "is not a string"},
		{"default not in enum", func(p *Plugin) {
			p.Tools[0].Parameters["n"] = Parameter{Type: "string", Enum: []json.RawMessage{raw(`"a"`)}, Default: raw(`"b"`)}
		}, "tools[0].parameters.n.default", "not one of the enum"},
		{"empty enum", func(p *Plugin) { p.Tools[0].Parameters["n"] = Parameter{Type: "string", Enum: []json.RawMessage{}} }, "tools[0].parameters.n.enum", "is empty"},
		{"secret reserved", func(p *Plugin) { p.Secrets = []string{"LD_PRELOAD"} }, "secrets[0]", "reserved"},
		{"secret plugin var", func(p *Plugin) { p.Secrets = []string{PluginIDEnv} }, "secrets[0]", "reserved"},
		{"secret bash env", func(p *Plugin) { p.Secrets = []string{"BASH_ENV"} }, "secrets[0]", "reserved"},
		{"secret param", func(p *Plugin) { p.Secrets = []string{"PARAM_WHO"} }, "secrets[0]", "PARAM_"},
		{"secret name", func(p *Plugin) { p.Secrets = []string{"api-key"} }, "secrets[0]", "environment variable name"},
		{"network", func(p *Plugin) { p.Permissions = &Permissions{Network: "api.example.com,*"} }, "permissions.network", `"*" has a "*" that is not the whole first label`},
		{"network ip", func(p *Plugin) { p.Permissions = &Permissions{Network: "10.0.0.1"} }, "permissions.network", "is an IP address"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := base()
			tt.change(p)
			err := p.Validate()
			var ie *InvalidError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v", err)
			}
			for _, pr := range ie.Problems {
				if pr.Field == tt.field && strings.Contains(pr.String(), tt.text) && pr.Fix != "" {
					return
				}
			}
			t.Fatalf("no problem with field %q and text %q in:\n%v", tt.field, tt.text, err)
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	p := loadTestdata(t, "minimal.json")
	p.Name = "  My   Tools 2 "
	p.Version = "2.1"
	p.Dependencies = []string{"py3-pip", "g++", "libstdc++6=12.2.0-14"}
	p.Files = map[string]string{"scripts/run.py": "print(1)\n", ".config/x": "", "a/b/c.txt": "ü"}
	p.Secrets = []string{"OPENAI_API_KEY"}
	p.Permissions = &Permissions{Network: "api.example.com, example.org"}
	p.Tools[0].Parameters["n"] = Parameter{Type: "number", Default: json.RawMessage(`2.5`), Enum: []json.RawMessage{json.RawMessage(`2.5`), json.RawMessage(`3`)}}
	p.Tools[0].Parameters["o"] = Parameter{Type: "object", Default: json.RawMessage(`{"a":1}`)}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.ID() != "my-tools-2" {
		t.Fatal(p.ID())
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	p := loadTestdata(t, "python-data-tools.json")
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	q, err := DecodeBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := q.Encode()
	if !bytes.Equal(b, c) {
		t.Fatalf("round trip differs:\n%s\n%s", b, c)
	}
}
