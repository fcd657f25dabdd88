package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// Sandbox is sandbox.json.
type Sandbox struct {
	CPUs      int    `json:"cpus"`      // 1–8
	MemoryGB  int    `json:"memoryGB"`  // 1–8
	Network   string `json:"network"`   // outbound | none
	AutoStart bool   `json:"autoStart"` // start the VM when the app starts
	// Accel picks QEMU's accelerator: auto (KVM when it boots, else TCG),
	// kvm or tcg. Ignored on macOS.
	Accel string `json:"accel"`
	// Machine picks QEMU's x86_64 machine type: "" (the default: microvm
	// for a kernel with its drivers built in, q35 for one with modules),
	// q35 or microvm, for diagnosis. Ignored on macOS and arm64.
	Machine string `json:"machine,omitempty"`
	// ImageManifest is the URL (https://, http://, file://) of the guest
	// image manifest; empty means the built-in default for this machine.
	ImageManifest string `json:"imageManifest,omitempty"`
	// DiagnosticsURL is fetched by the NAT diagnostic.
	DiagnosticsURL string `json:"diagnosticsUrl,omitempty"`
	// GitHubAPIURL and GitHubRawURL are where plugin imports from
	// github.com addresses go (GitHub Enterprise, tests); empty means
	// GitHub's own.
	GitHubAPIURL string `json:"githubApiUrl,omitempty"`
	GitHubRawURL string `json:"githubRawUrl,omitempty"`
	// PluginSetupAllowlist is the comma-separated host names a plugin's
	// setup and run commands may reach ("*.example.org" covers its
	// subdomains); empty means DefaultPluginSetupAllowlist. A string, not
	// a slice, so Sandbox stays comparable.
	PluginSetupAllowlist string `json:"pluginSetupAllowlist,omitempty"`
	// InferenceURL is the OpenAI-compatible base URL (…/v1) the bridge's
	// inference route and the agent runner call; empty means inference is
	// off. Its API key, if any, is in the keychain (INFERENCE_API_KEY).
	InferenceURL string `json:"inferenceUrl,omitempty"`
	// InferenceModel is the model used when a request names none.
	InferenceModel string `json:"inferenceModel,omitempty"`
	// RunnerMaxSteps and RunnerTimeoutSeconds bound one task of the agent
	// runner: model calls, and wall time.
	RunnerMaxSteps       int `json:"runnerMaxSteps,omitempty"`
	RunnerTimeoutSeconds int `json:"runnerTimeoutSeconds,omitempty"`
	// HostFreeFloorGB is the free space agents may never take the host's
	// disk below: under it every agent's commands are stopped and writes
	// refused. 0 means DefaultHostFreeFloorGB.
	HostFreeFloorGB float64 `json:"hostFreeFloorGB,omitempty"`
	// MCPPort is the loopback port of MCP over HTTP; 0 means
	// DefaultMCPPort.
	MCPPort int `json:"mcpPort,omitempty"`
	// IdleSuspendMinutes: after this long with no tool call, shell,
	// preview connection or agent process, the owner pauses the VM (0
	// turns it off; fractions allowed). Not omitempty: 0 is a choice, and
	// a missing key means the default.
	IdleSuspendMinutes float64 `json:"idleSuspendMinutes"`
	// SafetyCheckpoints is how many automatic checkpoints (taken before a
	// reset or a restore) are kept; 0 takes none before a reset (a
	// restore always saves the state it replaces).
	SafetyCheckpoints int `json:"safetyCheckpoints"`
	// RateLimits overrides Osaurus's quotas of each agent's calls per
	// minute, as comma-separated service=count pairs (the services are
	// RateServices), e.g. "exec=600,bridge=60"; empty keeps them all. A
	// string, not a map, so Sandbox stays comparable.
	RateLimits string `json:"rateLimits,omitempty"`
	// TurnIdleSeconds ends an agent's turn (and so its maxCommandsPerTurn
	// count) after this long without a command; 0 means
	// DefaultTurnIdleSeconds.
	TurnIdleSeconds float64 `json:"turnIdleSeconds,omitempty"`
	// BackgroundIdleMinutes: a background owner (started by the CLI or a
	// stdio MCP client) that has had no client, MCP request or awake VM
	// for this long stops its VM and exits (0 keeps it until `stop`;
	// fractions allowed). Not omitempty, as IdleSuspendMinutes.
	BackgroundIdleMinutes float64 `json:"backgroundIdleMinutes"`
	// SecretStore is where secrets are kept: SecretStoreKeychain (the OS
	// keychain; also "") or SecretStoreFile (Paths.SecretsFile, for a
	// server with no desktop keychain) or SecretStoreClient (the keychain
	// of the machine that drives this sandbox through a remote context,
	// asked over the control socket while one is connected). A choice the
	// user makes, never a fallback: a keychain that fails does not quietly
	// become a file.
	SecretStore string `json:"secretStore,omitempty"`
}

// The values of SecretStore.
const (
	SecretStoreKeychain = "keychain"
	SecretStoreFile     = "file"
	// SecretStoreClient keeps the secrets on the user's own machine: a
	// server reached through a remote context never holds them.
	SecretStoreClient = "client"
)

// SecretBackend is the secret store in use: SecretStoreKeychain,
// SecretStoreFile or SecretStoreClient.
func (s Sandbox) SecretBackend() string {
	if s.SecretStore == "" {
		return SecretStoreKeychain
	}
	return s.SecretStore
}

// DefaultBackgroundIdleMinutes is how long an unused background owner
// lingers, so a client that comes back soon finds it warm.
const DefaultBackgroundIdleMinutes = 10

// BackgroundIdle is how long an unused background owner lingers; 0 means
// until `stop`.
func (s Sandbox) BackgroundIdle() time.Duration {
	return time.Duration(s.BackgroundIdleMinutes * float64(time.Minute))
}

// RateServices are the services RateLimits may set: the tools' file
// reads and writes, commands, package installs, secrets and plugin
// registrations, and the bridge's calls, inference, dispatched tasks,
// memory and events.
var RateServices = []string{"sandbox.read", "sandbox.write", "exec", "install", "secrets", "http", "bridge", "inference", "dispatch", "memory", "events"}

// MaxRateLimit bounds one service's quota per minute.
const MaxRateLimit = 1_000_000_000

// DefaultTurnIdleSeconds and MaxTurnIdleSeconds bound TurnIdleSeconds.
const (
	DefaultTurnIdleSeconds = 15
	MaxTurnIdleSeconds     = 3600
)

// Rates is RateLimits as a map (nil when empty), or an error naming the
// bad pair and the fix.
func (s Sandbox) Rates() (map[string]int, error) {
	if strings.TrimSpace(s.RateLimits) == "" {
		return nil, nil
	}
	out := map[string]int{}
	for _, pair := range strings.Split(s.RateLimits, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		n, err := strconv.Atoi(strings.TrimSpace(v))
		k = strings.TrimSpace(k)
		switch {
		case !ok || err != nil:
			return nil, fmt.Errorf("%w: rateLimits: %q is not service=count; give pairs such as \"exec=600,bridge=60\", or empty for the defaults", ErrInvalid, pair)
		case !slices.Contains(RateServices, k):
			return nil, fmt.Errorf("%w: rateLimits: %q is not a service; the services are %s", ErrInvalid, k, strings.Join(RateServices, ", "))
		case n < 1 || n > MaxRateLimit:
			return nil, fmt.Errorf("%w: rateLimits: %s=%d, allowed 1–%d calls per minute", ErrInvalid, k, n, MaxRateLimit)
		}
		out[k] = n
	}
	return out, nil
}

// TurnIdle is TurnIdleSeconds as a duration, the default for 0.
func (s Sandbox) TurnIdle() time.Duration {
	if s.TurnIdleSeconds == 0 {
		return DefaultTurnIdleSeconds * time.Second
	}
	return time.Duration(s.TurnIdleSeconds * float64(time.Second))
}

// DefaultSafetyCheckpoints and MaxSafetyCheckpoints bound the automatic
// checkpoints kept.
const (
	DefaultSafetyCheckpoints = 3
	MaxSafetyCheckpoints     = 50
)

// DefaultIdleSuspendMinutes is the idle time before the VM sleeps.
const DefaultIdleSuspendMinutes = 15

// MaxIdleSuspendMinutes bounds the setting (a day).
const MaxIdleSuspendMinutes = 24 * 60

// IdleSuspend is how long the VM may be idle before it is paused; 0 means
// never.
func (s Sandbox) IdleSuspend() time.Duration {
	return time.Duration(s.IdleSuspendMinutes * float64(time.Minute))
}

// DefaultMCPPort is the port of MCP over HTTP when none is set.
const DefaultMCPPort = 47821

// MCPAddr is the loopback address MCP over HTTP listens on.
func (s Sandbox) MCPAddr() string {
	p := s.MCPPort
	if p == 0 {
		p = DefaultMCPPort
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

// DefaultHostFreeFloorGB is the free-space floor when none is set.
const DefaultHostFreeFloorGB = 2.0

// HostFreeFloor is the floor in bytes.
func (s Sandbox) HostFreeFloor() int64 {
	g := s.HostFreeFloorGB
	if g == 0 {
		g = DefaultHostFreeFloorGB
	}
	return int64(g * 1e9)
}

// Runner budget defaults and bounds.
const (
	DefaultRunnerMaxSteps       = 20
	MaxRunnerMaxSteps           = 200
	DefaultRunnerTimeoutSeconds = 600
	MaxRunnerTimeoutSeconds     = 24 * 3600
)

// DefaultPluginSetupAllowlist is Osaurus's setup allowlist: the package
// hosts of Alpine, Python, Node and Rust, and GitHub with its release
// assets.
var DefaultPluginSetupAllowlist = []string{
	"dl-cdn.alpinelinux.org",
	"pypi.org", "files.pythonhosted.org",
	"registry.npmjs.org",
	"github.com", "objects.githubusercontent.com",
	"crates.io", "static.crates.io",
}

// SetupAllowlist is the effective plugin setup allowlist.
func (s Sandbox) SetupAllowlist() []string {
	if strings.TrimSpace(s.PluginSetupAllowlist) == "" {
		return slices.Clone(DefaultPluginSetupAllowlist)
	}
	var out []string
	for _, h := range strings.Split(s.PluginSetupAllowlist, ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// allowlistEntry accepts a host name or *.host name.
func allowlistEntry(h string) bool {
	h = strings.TrimPrefix(h, "*.")
	if len(h) > 253 || !strings.Contains(h, ".") {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Defaults are Osaurus's.
func Defaults() Sandbox {
	return Sandbox{CPUs: 2, MemoryGB: 2, Network: "outbound", AutoStart: true, Accel: "auto",
		RunnerMaxSteps: DefaultRunnerMaxSteps, RunnerTimeoutSeconds: DefaultRunnerTimeoutSeconds,
		IdleSuspendMinutes: DefaultIdleSuspendMinutes, SafetyCheckpoints: DefaultSafetyCheckpoints,
		BackgroundIdleMinutes: DefaultBackgroundIdleMinutes}
}

// ErrInvalid is wrapped by every validation failure.
var ErrInvalid = errdefs.Class(errdefs.ErrInvalid, "invalid setting")

// Validate names the first bad key and what it accepts.
func (s Sandbox) Validate() error {
	switch {
	case s.CPUs < 1 || s.CPUs > 8:
		return fmt.Errorf("%w: cpus: %d, allowed 1–8", ErrInvalid, s.CPUs)
	case s.MemoryGB < 1 || s.MemoryGB > 8:
		return fmt.Errorf("%w: memoryGB: %d, allowed 1–8", ErrInvalid, s.MemoryGB)
	case s.Network != "outbound" && s.Network != "none":
		return fmt.Errorf("%w: network: %q, allowed \"outbound\" or \"none\"", ErrInvalid, s.Network)
	case !slices.Contains([]string{"auto", "kvm", "tcg"}, s.Accel):
		return fmt.Errorf("%w: accel: %q, allowed \"auto\", \"kvm\" or \"tcg\"", ErrInvalid, s.Accel)
	case !slices.Contains([]string{"", "q35", "microvm"}, s.Machine):
		return fmt.Errorf("%w: machine: %q, allowed \"q35\", \"microvm\" or \"\" for the default", ErrInvalid, s.Machine)
	case s.HostFreeFloorGB != 0 && !(s.HostFreeFloorGB >= 0.1 && s.HostFreeFloorGB <= 100000):
		return fmt.Errorf("%w: hostFreeFloorGB: %g, allowed 0.1–100000 (GB, fractions allowed)", ErrInvalid, s.HostFreeFloorGB)
	case s.RunnerMaxSteps < 1 || s.RunnerMaxSteps > MaxRunnerMaxSteps:
		return fmt.Errorf("%w: runnerMaxSteps: %d, allowed 1–%d", ErrInvalid, s.RunnerMaxSteps, MaxRunnerMaxSteps)
	case s.RunnerTimeoutSeconds < 10 || s.RunnerTimeoutSeconds > MaxRunnerTimeoutSeconds:
		return fmt.Errorf("%w: runnerTimeoutSeconds: %d, allowed 10–%d", ErrInvalid, s.RunnerTimeoutSeconds, MaxRunnerTimeoutSeconds)
	case s.MCPPort != 0 && (s.MCPPort < 1024 || s.MCPPort > 65535):
		return fmt.Errorf("%w: mcpPort: %d, allowed 1024–65535, or 0 for %d", ErrInvalid, s.MCPPort, DefaultMCPPort)
	case !(s.IdleSuspendMinutes >= 0 && s.IdleSuspendMinutes <= MaxIdleSuspendMinutes):
		return fmt.Errorf("%w: idleSuspendMinutes: %g, allowed 0–%d (minutes, fractions allowed; 0 never suspends)", ErrInvalid, s.IdleSuspendMinutes, MaxIdleSuspendMinutes)
	case !(s.BackgroundIdleMinutes >= 0 && s.BackgroundIdleMinutes <= MaxIdleSuspendMinutes):
		return fmt.Errorf("%w: backgroundIdleMinutes: %g, allowed 0–%d (minutes, fractions allowed; 0 keeps it until `osaurus-sandbox stop`)", ErrInvalid, s.BackgroundIdleMinutes, MaxIdleSuspendMinutes)
	case s.SafetyCheckpoints < 0 || s.SafetyCheckpoints > MaxSafetyCheckpoints:
		return fmt.Errorf("%w: safetyCheckpoints: %d, allowed 0–%d (0 takes none before a reset)", ErrInvalid, s.SafetyCheckpoints, MaxSafetyCheckpoints)
	case !slices.Contains([]string{"", SecretStoreKeychain, SecretStoreFile, SecretStoreClient}, s.SecretStore):
		return fmt.Errorf("%w: secretStore: %s, allowed \"keychain\" (the OS keychain, the default), \"file\" (a file only you can read, for a server without a keychain) or \"client\" (the keychain of the machine that drives this sandbox through a remote context)", ErrInvalid, QuoteShort(s.SecretStore))
	case len(s.InferenceModel) > 256 || strings.ContainsFunc(s.InferenceModel, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%w: inferenceModel: %q, want a model name of at most 256 printable characters, or empty", ErrInvalid, s.InferenceModel)
	}
	if s.TurnIdleSeconds != 0 && !(s.TurnIdleSeconds >= 0.001 && s.TurnIdleSeconds <= MaxTurnIdleSeconds) {
		return fmt.Errorf("%w: turnIdleSeconds: %g, allowed 0.001–%d (seconds, fractions allowed), or 0 for %d", ErrInvalid, s.TurnIdleSeconds, MaxTurnIdleSeconds, DefaultTurnIdleSeconds)
	}
	if _, err := s.Rates(); err != nil {
		return err
	}
	if err := checkInferenceURL(s.InferenceURL); err != nil {
		return err
	}
	for _, u := range []struct{ key, val string }{{"githubApiUrl", s.GitHubAPIURL}, {"githubRawUrl", s.GitHubRawURL}} {
		if err := CheckURL(u.key, u.val, "an https:// URL, or empty for GitHub's", "https"); err != nil {
			return err
		}
	}
	for _, h := range s.SetupAllowlist() {
		if !allowlistEntry(h) {
			return fmt.Errorf("%w: pluginSetupAllowlist: %q is not a host name; give comma-separated names such as \"example.org,*.example.net\", or empty for the default", ErrInvalid, h)
		}
	}
	if strings.HasPrefix(s.ImageManifest, BuiltinPrefix) {
		if !slices.Contains(BuiltinImages, s.ImageManifest) {
			return fmt.Errorf("%w: imageManifest: %q is not a built-in image; the built-in images are %s, or give an http(s):// or file:/// URL", ErrInvalid, s.ImageManifest, strings.Join(BuiltinImages, ", "))
		}
	} else if err := CheckURL("imageManifest", s.ImageManifest, "an http(s):// or file:/// URL of a manifest, "+strings.Join(BuiltinImages, " or ")+", or empty for the default", "https", "http", "file"); err != nil {
		return err
	}
	return CheckURL("diagnosticsUrl", s.DiagnosticsURL, "an http(s):// URL, or empty for the default", "https", "http")
}

// BuiltinPrefix starts the names of images compiled into the app;
// BuiltinImages are those names (provision resolves them).
const BuiltinPrefix = "builtin:"

var BuiltinImages = []string{BuiltinPrefix + "alpine"}

// credentialParams are query parameters that carry credentials: a URL
// setting is stored in plain text, so they belong in the keychain.
var credentialParams = []string{"token", "access_token", "api_key", "apikey", "key", "password", "passwd", "secret", "auth", "signature", "sig"}

// CheckURL parses v fully: one of schemes; for http(s) a host and a port
// in 1–65535; for file an absolute path; no credentials anywhere (user
// info, or a query parameter such as token). Empty is accepted. want says
// what the key takes, for the message.
func CheckURL(key, v, want string, schemes ...string) error {
	if v == "" {
		return nil
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: %s: %q %s; want %s", ErrInvalid, key, v, why, want)
	}
	u, err := url.Parse(v)
	if err != nil {
		return bad("does not parse")
	}
	if !slices.Contains(schemes, u.Scheme) {
		return bad("has the wrong scheme")
	}
	if u.User != nil {
		return bad("carries credentials (user or password); keep them out of settings")
	}
	for name := range u.Query() {
		if slices.Contains(credentialParams, strings.ToLower(name)) {
			return bad(fmt.Sprintf("carries a credential in its query (%s=)", name))
		}
	}
	if u.Fragment != "" {
		return bad("has a #fragment")
	}
	if u.Scheme == "file" {
		if u.Opaque != "" || (u.Host != "" && u.Host != "localhost") || !strings.HasPrefix(u.Path, "/") {
			return bad("is not a file URL of an absolute path (file:///path/to/file)")
		}
		return nil
	}
	if u.Hostname() == "" {
		return bad("has no host")
	}
	if strings.HasSuffix(u.Host, ":") {
		return bad("has an empty port")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("has a port outside 1–65535")
		}
	}
	return nil
}

// NeedsRestart reports whether changing from old to s takes effect only
// after the VM restarts.
func (s Sandbox) NeedsRestart(old Sandbox) bool {
	return s.CPUs != old.CPUs || s.MemoryGB != old.MemoryGB || s.Network != old.Network || s.Accel != old.Accel || s.Machine != old.Machine
}

// LoadSandbox reads sandbox.json; a missing file gives the defaults.
// Unknown keys are refused so a typo doesn't silently do nothing.
func LoadSandbox(path string) (Sandbox, error) {
	s := Defaults()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if _, err := readRaw(path); err != nil {
		return Defaults(), err // not JSON: named, with the fix
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Defaults(), fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
	}
	if err := s.Validate(); err != nil {
		return Defaults(), fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// SaveSandbox validates and writes sandbox.json atomically.
func SaveSandbox(path string, s Sandbox) error {
	if err := s.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o644)
}

// Keys lists the settable keys, for `config get|set` and help.
var keyDocs = []struct{ Key, Doc string }{
	{"cpus", "virtual CPUs, 1–8 (restart required)"},
	{"memoryGB", "memory in GB, 1–8 (restart required)"},
	{"network", "outbound or none (restart required)"},
	{"autoStart", "true or false: start the VM when the app starts"},
	{"accel", "auto, kvm or tcg (Linux; restart required)"},
	{"machine", "QEMU machine type on x86_64: q35, microvm, or empty for the default (Linux; restart required)"},
	{"imageManifest", "guest image manifest URL (https://, http://, file:///), or builtin:alpine; empty for the default"},
	{"diagnosticsUrl", "URL the NAT diagnostic fetches; empty for the default"},
	{"githubApiUrl", "GitHub API base URL for plugin imports (GitHub Enterprise); empty for GitHub's"},
	{"githubRawUrl", "GitHub raw-content base URL for plugin imports; empty for GitHub's"},
	{"hostFreeFloorGB", "free space in GB agents may never take the host's disk below (default 2)"},
	{"pluginSetupAllowlist", "comma-separated hosts plugin setup and run commands may reach (*.host for subdomains); empty for the default"},
	{"inferenceUrl", "OpenAI-compatible base URL for inference and the agent runner, e.g. http://127.0.0.1:11434/v1; empty turns inference off"},
	{"inferenceModel", "model to use when a request names none"},
	{"runnerMaxSteps", "model calls one agent-runner task may make, 1–200"},
	{"runnerTimeoutSeconds", "wall time of one agent-runner task in seconds, 10–86400"},
	{"idleSuspendMinutes", "minutes without tool calls, shells, previews or agent processes (but those of agents with backgroundKeepsAwake false) before the VM is paused (default 15; 0 never; fractions allowed)"},
	{"safetyCheckpoints", "automatic checkpoints kept, taken before a reset, an apply or a restore, 0–50 (default 3; 0 takes none before a reset or an apply)"},
	{"rateLimits", "each agent's calls per minute, as service=count pairs overriding the defaults, e.g. exec=600,bridge=60 (services: sandbox.read, sandbox.write, exec, install, secrets, http, bridge, inference, dispatch, memory, events; restart required)"},
	{"turnIdleSeconds", "seconds without a command that end an agent's turn and its maxCommandsPerTurn count (default 15; restart required)"},
	{"backgroundIdleMinutes", "minutes a background owner (started by a command or a stdio MCP client) lingers with no client, MCP request or awake VM before it stops the VM and exits (default 10; 0 never; fractions allowed)"},
	{"secretStore", "where secrets are kept: keychain (the OS keychain, default) file (a file in the data folder only you can read, for a server without a keychain) or client (the keychain of the machine that drives this sandbox with --context, asked while it is connected); see docs/secrets.md"},
	{"mcpPort", "loopback port of MCP over HTTP, 1024–65535 (default 47821; the owner must restart)"},
}

// KeyDocs returns each key with a one-line description.
func KeyDocs() [][2]string {
	out := make([][2]string, len(keyDocs))
	for i, k := range keyDocs {
		out[i] = [2]string{k.Key, k.Doc}
	}
	return out
}

// Get returns one key's value as text.
func (s Sandbox) Get(key string) (string, error) {
	switch key {
	case "cpus":
		return strconv.Itoa(s.CPUs), nil
	case "memoryGB":
		return strconv.Itoa(s.MemoryGB), nil
	case "network":
		return s.Network, nil
	case "autoStart":
		return strconv.FormatBool(s.AutoStart), nil
	case "accel":
		return s.Accel, nil
	case "machine":
		return s.Machine, nil
	case "imageManifest":
		return s.ImageManifest, nil
	case "diagnosticsUrl":
		return s.DiagnosticsURL, nil
	case "githubApiUrl":
		return s.GitHubAPIURL, nil
	case "githubRawUrl":
		return s.GitHubRawURL, nil
	case "pluginSetupAllowlist":
		return strings.Join(s.SetupAllowlist(), ","), nil
	case "hostFreeFloorGB":
		return strconv.FormatFloat(float64(s.HostFreeFloor())/1e9, 'g', -1, 64), nil
	case "inferenceUrl":
		return s.InferenceURL, nil
	case "inferenceModel":
		return s.InferenceModel, nil
	case "runnerMaxSteps":
		return strconv.Itoa(s.RunnerMaxSteps), nil
	case "runnerTimeoutSeconds":
		return strconv.Itoa(s.RunnerTimeoutSeconds), nil
	case "safetyCheckpoints":
		return strconv.Itoa(s.SafetyCheckpoints), nil
	case "idleSuspendMinutes":
		return strconv.FormatFloat(s.IdleSuspendMinutes, 'g', -1, 64), nil
	case "backgroundIdleMinutes":
		return strconv.FormatFloat(s.BackgroundIdleMinutes, 'g', -1, 64), nil
	case "secretStore":
		return s.SecretBackend(), nil
	case "mcpPort":
		_, p, _ := strings.Cut(s.MCPAddr(), ":")
		return p, nil
	}
	return "", unknownKey(key)
}

func unknownKey(key string) error {
	var names []string
	for _, k := range keyDocs {
		names = append(names, k.Key)
	}
	return fmt.Errorf("%w: unknown key %q; known keys: %s", ErrInvalid, key, strings.Join(names, ", "))
}

// Set parses value for key and validates the result.
func (s Sandbox) Set(key, value string) (Sandbox, error) {
	atoi := func() (int, error) {
		n, err := strconv.Atoi(value)
		if err != nil {
			return 0, fmt.Errorf("%w: %s: %q is not a whole number", ErrInvalid, key, value)
		}
		return n, nil
	}
	var err error
	switch key {
	case "cpus":
		s.CPUs, err = atoi()
	case "memoryGB":
		s.MemoryGB, err = atoi()
	case "network":
		s.Network = value
	case "autoStart":
		// The spellings `agent set` takes for its switches too.
		b, ok := map[string]bool{"true": true, "on": true, "yes": true, "1": true, "false": false, "off": false, "no": false, "0": false}[strings.ToLower(value)]
		if !ok {
			err = fmt.Errorf("%w: autoStart: %s, allowed true or false (or on/off, yes/no)", ErrInvalid, QuoteShort(value))
		}
		s.AutoStart = b
	case "accel":
		s.Accel = value
	case "machine":
		s.Machine = value
	case "imageManifest":
		s.ImageManifest = value
	case "diagnosticsUrl":
		s.DiagnosticsURL = value
	case "githubApiUrl":
		s.GitHubAPIURL = value
	case "githubRawUrl":
		s.GitHubRawURL = value
	case "pluginSetupAllowlist":
		s.PluginSetupAllowlist = value
	case "hostFreeFloorGB":
		s.HostFreeFloorGB, err = strconv.ParseFloat(value, 64)
		if err != nil {
			err = fmt.Errorf("%w: hostFreeFloorGB: %q is not a number of GB (0.1–100000)", ErrInvalid, value)
		}
	case "inferenceUrl":
		s.InferenceURL = strings.TrimRight(strings.TrimSpace(value), "/")
	case "inferenceModel":
		s.InferenceModel = strings.TrimSpace(value)
	case "runnerMaxSteps":
		s.RunnerMaxSteps, err = atoi()
	case "runnerTimeoutSeconds":
		s.RunnerTimeoutSeconds, err = atoi()
	case "mcpPort":
		s.MCPPort, err = atoi()
	case "safetyCheckpoints":
		s.SafetyCheckpoints, err = atoi()
	case "idleSuspendMinutes":
		s.IdleSuspendMinutes, err = strconv.ParseFloat(value, 64)
		if err != nil {
			err = fmt.Errorf("%w: idleSuspendMinutes: %q is not a number of minutes (0–%d, 0 never suspends)", ErrInvalid, value, MaxIdleSuspendMinutes)
		}
	case "rateLimits":
		s.RateLimits = value
	case "secretStore":
		s.SecretStore = value
	case "turnIdleSeconds":
		s.TurnIdleSeconds, err = strconv.ParseFloat(value, 64)
		if err != nil {
			err = fmt.Errorf("%w: turnIdleSeconds: %q is not a number of seconds (0.001–%d, or 0 for %d)", ErrInvalid, value, MaxTurnIdleSeconds, DefaultTurnIdleSeconds)
		}
	case "backgroundIdleMinutes":
		s.BackgroundIdleMinutes, err = strconv.ParseFloat(value, 64)
		if err != nil {
			err = fmt.Errorf("%w: backgroundIdleMinutes: %q is not a number of minutes (0–%d, 0 never exits)", ErrInvalid, value, MaxIdleSuspendMinutes)
		}
	default:
		return s, unknownKey(key)
	}
	if err != nil {
		return s, err
	}
	return s, s.Validate()
}

// checkInferenceURL accepts an empty value or an http(s) URL with a host,
// no credentials (the key belongs in the keychain), query or fragment.
func checkInferenceURL(v string) error {
	const want = "an OpenAI-compatible base URL such as http://127.0.0.1:11434/v1, or empty to turn inference off"
	if u, err := url.Parse(v); err == nil && u.User != nil {
		return fmt.Errorf("%w: inferenceUrl: %q carries credentials (store the API key with `osaurus-sandbox secret set --app INFERENCE_API_KEY`); want %s", ErrInvalid, v, want)
	}
	if err := CheckURL("inferenceUrl", v, want, "http", "https"); err != nil {
		return err
	}
	if u, _ := url.Parse(v); v != "" && u.RawQuery != "" {
		return fmt.Errorf("%w: inferenceUrl: %q has a query; want %s", ErrInvalid, v, want)
	}
	return nil
}

// QuoteShort quotes a value for an error message, shortened when long: a
// 100 KB value pasted by mistake is not echoed back whole.
func QuoteShort(v string) string {
	const max = 80
	if len(v) <= max {
		return strconv.Quote(v)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(v[:cut]), len(v))
}
