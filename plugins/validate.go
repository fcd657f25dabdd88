package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/osaurus/osaurus-sandbox/netpolicy"
)

// Limits. MCP clients commonly cap tool names at 64 characters, which
// bounds the plugin id plus the tool id.
const (
	MaxIDLen         = 40
	MaxToolNameLen   = 64
	MaxFiles         = 500
	MaxFileBytes     = 1 << 20
	MaxPathLen       = 512
	MaxCommandBytes  = 64 << 10
	MaxTools         = 64
	MaxParameters    = 32
	MaxDependencies  = 20 // one package-manager call, like sandbox_install
	MaxSecrets       = 32
	MaxTextLen       = 4096 // name, description, author, source, metadata values
	MaxMetadataItems = 32
)

var (
	// A plugin id may not hold "_": the tool name {pluginId}_{toolId}
	// must split back into one plugin and one tool.
	pluginIDRe = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	toolIDRe   = regexp.MustCompile(`^[a-z0-9][a-z0-9_]*$`)
	paramRe    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	envNameRe  = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	// Package names as apk and apt accept them, optionally pinned with
	// =version. A leading "-" would be read as an option by the package
	// manager, so the first character must be alphanumeric.
	packageRe = regexp.MustCompile(`^[a-z0-9][a-z0-9+._-]{0,99}(=[A-Za-z0-9.+~:_-]{1,100})?$`)
	versionRe = regexp.MustCompile(`^[0-9]+(\.[0-9]+){0,2}(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
)

// PluginIDEnv is set in every plugin command's environment to the plugin's
// id, which is why a plugin may not declare a secret of that name.
const PluginIDEnv = "OSAURUS_PLUGIN_ID"

// reservedEnv are names a plugin's secrets may not take: the ones a
// command relies on to run as the agent, those that make a shell or the
// loader run other code, and our own.
var reservedEnv = map[string]bool{
	"PATH": true, "HOME": true, "SHELL": true, "USER": true, "LOGNAME": true,
	"LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true, "VIRTUAL_ENV": true,
	"PWD": true, "IFS": true, "ENV": true, "BASH_ENV": true, "PYTHONPATH": true,
	"NODE_OPTIONS": true, PluginIDEnv: true,
}

// ParamTypes are the parameter types a tool may declare (JSON Schema's).
var ParamTypes = []string{"string", "number", "integer", "boolean", "array", "object"}

// DeriveID turns a plugin name into its id the way Osaurus does
// (lowercase, spaces to hyphens); runs of white space give one hyphen.
func DeriveID(name string) string {
	return strings.Join(strings.Fields(strings.ToLower(name)), "-")
}

// ID is the plugin's id, derived from its name.
func (p *Plugin) ID() string { return DeriveID(p.Name) }

// ToolName is the MCP tool name of one of the plugin's tools.
func (p *Plugin) ToolName(toolID string) string { return p.ID() + "_" + toolID }

// EnvName is the environment variable a parameter arrives in.
func EnvName(param string) string { return "PARAM_" + strings.ToUpper(param) }

type problems struct{ list []Problem }

func (ps *problems) add(field, message, fix string) {
	ps.list = append(ps.list, Problem{field, message, fix})
}

// Validate checks everything the recipe's schema can't express and returns
// an *InvalidError (wrapping ErrInvalid) listing every problem found.
func (p *Plugin) Validate() error {
	var ps problems
	p.validateHeader(&ps)
	p.validateFiles(&ps)
	p.validateTools(&ps)
	p.validateEnv(&ps)
	// Decode caps the text; a recipe built in code (an agent's folder
	// packed into files) must fit the same cap so it can be exported and
	// imported again.
	if b, err := json.Marshal(p); err == nil && len(b) > MaxRecipeBytes {
		ps.add("(total)", fmt.Sprintf("the recipe is %d bytes as JSON, the limit is %d", len(b), MaxRecipeBytes), "move large content out of files and create it in setup")
	}
	if len(ps.list) > 0 {
		return &InvalidError{Problems: ps.list}
	}
	return nil
}

func checkText(ps *problems, field, s string, max int, multiline bool) {
	if len(s) > max {
		ps.add(field, fmt.Sprintf("is %d bytes long, the limit is %d", len(s), max), "shorten it")
	}
	if !utf8.ValidString(s) {
		ps.add(field, "is not valid UTF-8", "re-save the text as UTF-8")
	}
	for _, r := range s {
		if r == 0 || unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t' || r == '\r')) {
			ps.add(field, fmt.Sprintf("contains the control character %U", r), "remove it")
			return
		}
	}
}

func (p *Plugin) validateHeader(ps *problems) {
	switch name := strings.TrimSpace(p.Name); {
	case name == "":
		ps.add("name", "missing", `give the plugin a display name, e.g. "Python Data Tools"`)
	default:
		checkText(ps, "name", p.Name, MaxTextLen, false)
		id := p.ID()
		switch {
		case len(id) > MaxIDLen:
			ps.add("name", fmt.Sprintf("gives the id %q, longer than %d characters", id, MaxIDLen), "use a shorter name")
		case id == "sandbox":
			ps.add("name", `gives the id "sandbox", whose tools would be named like the built-in sandbox_* tools`, "pick another name")
		case !pluginIDRe.MatchString(id):
			ps.add("name", fmt.Sprintf("gives the id %q; an id may hold only a–z, 0–9 and single hyphens between words", id),
				"use only letters, digits and spaces in the name, e.g. "+fmt.Sprintf("%q", suggestName(p.Name)))
		}
	}
	if strings.TrimSpace(p.Description) == "" {
		ps.add("description", "missing", "add one sentence saying what the plugin does")
	}
	checkText(ps, "description", p.Description, MaxTextLen, true)
	if p.Version != "" && !versionRe.MatchString(p.Version) {
		ps.add("version", fmt.Sprintf("%q is not a version number", p.Version), `use a semantic version such as "1.0.0"`)
	}
	checkText(ps, "author", p.Author, MaxTextLen, false)
	checkText(ps, "source", p.Source, MaxTextLen, false)
	if len(p.Dependencies) > MaxDependencies {
		ps.add("dependencies", fmt.Sprintf("lists %d packages, the limit is %d", len(p.Dependencies), MaxDependencies), "install fewer packages")
	}
	seen := map[string]bool{}
	for i, d := range p.Dependencies {
		f := fmt.Sprintf("dependencies[%d]", i)
		switch {
		case !packageRe.MatchString(d):
			ps.add(f, fmt.Sprintf("%q is not a package name", d),
				"use the package manager's name: lowercase letters, digits and + . _ - (optionally =VERSION), starting with a letter or digit")
		case seen[d]:
			ps.add(f, fmt.Sprintf("%q is listed twice", d), "remove the duplicate")
		}
		seen[d] = true
	}
	if len(p.Setup) > MaxCommandBytes {
		ps.add("setup", fmt.Sprintf("is %d bytes long, the limit is %d", len(p.Setup), MaxCommandBytes), "move the script into files and run it from setup")
	}
	checkText(ps, "setup", p.Setup, MaxCommandBytes+1, true)
	if perm := p.Permissions; perm != nil {
		if msg := checkNetwork(perm.Network); msg != "" {
			ps.add("permissions.network", msg, `use "outbound", "none", or a comma-separated list of host names such as "api.example.com,*.example.org"`)
		}
	}
	if len(p.Metadata) > MaxMetadataItems {
		ps.add("metadata", fmt.Sprintf("holds %d entries, the limit is %d", len(p.Metadata), MaxMetadataItems), "remove some entries")
	}
	for _, k := range sortedKeys(p.Metadata) {
		checkText(ps, "metadata."+k, k, 64, false)
		checkText(ps, "metadata."+k, p.Metadata[k], MaxTextLen, true)
	}
}

func suggestName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
		default:
			b.WriteRune(' ')
		}
	}
	s := strings.Join(strings.Fields(b.String()), " ")
	if s == "" {
		return "My Plugin"
	}
	return s
}

// checkNetwork returns what is wrong with a permissions.network value, or
// "". It is the agents' checker (package netpolicy), so a plugin's
// permission means exactly what the same text means as an agent setting.
func checkNetwork(v string) string {
	if strings.TrimSpace(v) == "" {
		return ""
	}
	if _, err := netpolicy.Parse("permissions.network", v); err != nil {
		var pe *netpolicy.Error
		if errors.As(err, &pe) {
			return fmt.Sprintf("%q %s", pe.Entry, pe.Reason)
		}
		return err.Error()
	}
	return ""
}

// NetworkPolicy is the policy the plugin's permissions.network asks for.
// No permission, or an empty one, narrows nothing (outbound: the agent's
// own policy holds). A value that does not parse is none: fail closed.
func (p *Plugin) NetworkPolicy() netpolicy.Policy {
	if p.Permissions == nil || strings.TrimSpace(p.Permissions.Network) == "" {
		return netpolicy.Policy{Mode: netpolicy.Outbound}
	}
	pol, err := netpolicy.Parse("permissions.network", p.Permissions.Network)
	if err != nil {
		return netpolicy.Policy{Mode: netpolicy.None}
	}
	return pol
}

// IsDomain reports whether s is a host name of at least two labels:
// letters, digits and inner hyphens, at most 253 characters. IP literals
// are not domains.
func IsDomain(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 || net.ParseIP(s) != nil {
		return false
	}
	labels := strings.Split(s, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	last := labels[len(labels)-1]
	for i := 0; i < len(last); i++ {
		if last[i] >= '0' && last[i] <= '9' {
			return false // a top-level domain is never numeric
		}
	}
	return true
}

// CleanFilePath checks one key of files: relative, beneath the plugin
// folder, no "..", "." or empty segments, no backslashes or control
// characters. It returns what is wrong, or "".
func CleanFilePath(p string) string {
	switch {
	case p == "":
		return "is empty"
	case len(p) > MaxPathLen:
		return fmt.Sprintf("is longer than %d bytes", MaxPathLen)
	case !utf8.ValidString(p):
		return "is not valid UTF-8"
	case strings.HasPrefix(p, "/"):
		return "is absolute"
	case strings.HasPrefix(p, "~"):
		return "starts with ~"
	case strings.Contains(p, `\`):
		return "contains a backslash"
	}
	for _, r := range p {
		if unicode.IsControl(r) {
			return fmt.Sprintf("contains the control character %U", r)
		}
	}
	for _, seg := range strings.Split(p, "/") {
		switch {
		case seg == "..":
			return "contains .."
		case seg == "." || seg == "":
			return "has an empty or . segment"
		case len(seg) > 255:
			return "has a name longer than 255 bytes"
		}
	}
	return ""
}

func (p *Plugin) validateFiles(ps *problems) {
	if len(p.Files) > MaxFiles {
		ps.add("files", fmt.Sprintf("holds %d files, the limit is %d", len(p.Files), MaxFiles), "create the rest in setup")
	}
	// The plugin folder may live on a case-insensitive file system (the
	// workspace on macOS), where two paths differing only in case, or a
	// file and a folder of the same name, would overwrite each other.
	folded := map[string]string{}
	for _, k := range sortedKeys(p.Files) {
		f := fmt.Sprintf("files[%q]", k)
		if msg := CleanFilePath(k); msg != "" {
			ps.add(f, "path "+msg, `use a relative path inside the plugin folder, e.g. "scripts/run.py"`)
			continue
		}
		if n := len(p.Files[k]); n > MaxFileBytes {
			ps.add(f, fmt.Sprintf("is %d bytes, the limit per file is %d", n, MaxFileBytes), "download or generate large files in setup")
		}
		if strings.ContainsRune(p.Files[k], 0) {
			ps.add(f, "contains a NUL byte (binary content)", "files are text only: generate binary files in setup")
		}
		lk := strings.ToLower(k)
		if other, ok := folded[lk]; ok {
			ps.add(f, fmt.Sprintf("differs from %q only in letter case", other), "rename one of them")
			continue
		}
		folded[lk] = k
	}
	for _, lk := range sortedKeys(folded) {
		k := folded[lk]
		for dir := path.Dir(lk); dir != "."; dir = path.Dir(dir) {
			if other, ok := folded[dir]; ok {
				ps.add(fmt.Sprintf("files[%q]", k), fmt.Sprintf("needs %q to be a folder, but it is a file", other), "rename the file or the folder")
			}
		}
	}
}

func (p *Plugin) validateTools(ps *problems) {
	if len(p.Tools) > MaxTools {
		ps.add("tools", fmt.Sprintf("defines %d tools, the limit is %d", len(p.Tools), MaxTools), "split the plugin")
	}
	ids := map[string]bool{}
	for i, t := range p.Tools {
		f := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.ID == "":
			ps.add(f+".id", "missing", `give the tool an id such as "analyze_csv"`)
		case !toolIDRe.MatchString(t.ID):
			ps.add(f+".id", fmt.Sprintf("%q may hold only a–z, 0–9 and _ and must start with a letter or digit", t.ID), `rename it, e.g. "analyze_csv"`)
		case ids[t.ID]:
			ps.add(f+".id", fmt.Sprintf("%q is used by another tool", t.ID), "give each tool its own id")
		case len(p.ToolName(t.ID)) > MaxToolNameLen:
			ps.add(f+".id", fmt.Sprintf("the tool name %q is longer than %d characters", p.ToolName(t.ID), MaxToolNameLen), "shorten the tool id or the plugin name")
		}
		ids[t.ID] = true
		if strings.TrimSpace(t.Description) == "" {
			ps.add(f+".description", "missing", "add one sentence telling the model what the tool does")
		}
		checkText(ps, f+".description", t.Description, MaxTextLen, true)
		if strings.TrimSpace(t.Run) == "" {
			ps.add(f+".run", "missing", "give the shell command the tool runs, e.g. \"python3 scripts/analyze.py \\\"$PARAM_FILE\\\"\"")
		} else if len(t.Run) > MaxCommandBytes {
			ps.add(f+".run", fmt.Sprintf("is %d bytes long, the limit is %d", len(t.Run), MaxCommandBytes), "move the script into files and call it from run")
		} else {
			checkText(ps, f+".run", t.Run, MaxCommandBytes, true)
		}
		if len(t.Parameters) > MaxParameters {
			ps.add(f+".parameters", fmt.Sprintf("declares %d parameters, the limit is %d", len(t.Parameters), MaxParameters), "take fewer parameters")
		}
		envs := map[string]string{}
		for _, name := range sortedKeys(t.Parameters) {
			pf := fmt.Sprintf("%s.parameters.%s", f, name)
			if !paramRe.MatchString(name) || len(name) > 64 {
				ps.add(pf, "the name may hold only letters, digits and _ (up to 64), starting with a letter", `rename it, e.g. "output_format"`)
				continue
			}
			env := EnvName(name)
			if other, ok := envs[env]; ok {
				ps.add(pf, fmt.Sprintf("arrives in $%s, like the parameter %q", env, other), "rename one of them: names differing only in case collide")
			}
			envs[env] = name
			validateParam(ps, pf, t.Parameters[name])
		}
	}
}

func validateParam(ps *problems, f string, prm Parameter) {
	checkText(ps, f+".description", prm.Description, MaxTextLen, true)
	known := false
	for _, t := range ParamTypes {
		known = known || prm.Type == t
	}
	if !known {
		ps.add(f+".type", fmt.Sprintf("%q is not a parameter type", prm.Type), "use one of "+strings.Join(ParamTypes, ", "))
		return
	}
	if len(prm.Default) > 0 && !ValueHasType(prm.Default, prm.Type) {
		ps.add(f+".default", fmt.Sprintf("%s is not %s", prm.Default, aType(prm.Type)), "give a default of the parameter's type, or remove it to make the parameter required")
	}
	if prm.Enum != nil && len(prm.Enum) == 0 {
		ps.add(f+".enum", "is empty", "list the allowed values or remove enum")
	}
	if len(prm.Enum) > 0 && (prm.Type == "array" || prm.Type == "object") {
		ps.add(f+".enum", "is only allowed for string, number, integer and boolean parameters", "remove enum")
		return
	}
	inEnum := len(prm.Default) == 0
	for i, v := range prm.Enum {
		if !ValueHasType(v, prm.Type) {
			ps.add(fmt.Sprintf("%s.enum[%d]", f, i), fmt.Sprintf("%s is not %s", v, aType(prm.Type)), "make every allowed value of the parameter's type")
		}
		if len(prm.Default) > 0 && jsonEqual(v, prm.Default) {
			inEnum = true
		}
	}
	if !inEnum && len(prm.Enum) > 0 {
		ps.add(f+".default", fmt.Sprintf("%s is not one of the enum values", prm.Default), "pick a default from enum")
	}
}

// ValueHasType reports whether the JSON value v is of parameter type t.
func ValueHasType(v json.RawMessage, t string) bool {
	var x any
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil {
		return false
	}
	switch t {
	case "string":
		_, ok := x.(string)
		return ok
	case "number":
		_, ok := x.(json.Number)
		return ok
	case "integer":
		n, ok := x.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	case "boolean":
		_, ok := x.(bool)
		return ok
	case "array":
		_, ok := x.([]any)
		return ok
	case "object":
		_, ok := x.(map[string]any)
		return ok
	}
	return false
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func (p *Plugin) validateEnv(ps *problems) {
	if len(p.Secrets) > MaxSecrets {
		ps.add("secrets", fmt.Sprintf("declares %d secrets, the limit is %d", len(p.Secrets), MaxSecrets), "declare fewer secrets")
	}
	seen := map[string]bool{}
	for i, s := range p.Secrets {
		f := fmt.Sprintf("secrets[%d]", i)
		switch {
		case !envNameRe.MatchString(s) || len(s) > 64:
			ps.add(f, fmt.Sprintf("%q is not an environment variable name", s), `use upper-case letters, digits and _, e.g. "OPENAI_API_KEY"`)
		case reservedEnv[s]:
			ps.add(f, fmt.Sprintf("%q is reserved: the sandbox sets it for every command", s), "rename the secret, e.g. MY_"+s)
		case strings.HasPrefix(s, "PARAM_"):
			ps.add(f, fmt.Sprintf("%q would collide with tool parameters (PARAM_*)", s), "rename the secret without the PARAM_ prefix")
		case strings.HasPrefix(s, "OSAURUS_") || strings.HasPrefix(s, "LD_"):
			ps.add(f, fmt.Sprintf("%q uses a reserved prefix", s), "rename the secret without the OSAURUS_ or LD_ prefix")
		case seen[s]:
			ps.add(f, fmt.Sprintf("%q is listed twice", s), "remove the duplicate")
		}
		seen[s] = true
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
