// Package agents is the registry of sandbox agents: who they are, what they
// may do, and the bearer token their MCP client presents. It lives in
// agents.json in the config directory.
//
// Each agent runs as the Linux user agent-<slug> with the home
// /workspace/agents/<slug>. The slug is derived from the name once and never
// changes, since it names a user and a directory in the VM.
//
// The CLI and the app may both modify the file. Every modification takes an
// exclusive flock on agents.json.lock, re-reads the file, applies the change
// and replaces the file atomically, so neither process loses the other's
// writes. Reads are served from memory; Reload picks up changes made by
// another process.
package agents

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
	"github.com/osaurus/osaurus-sandbox/sandboxpath"
)

// Agent is one agent as callers see it. The token is not part of it, so
// an Agent can be printed or encoded without leaking it; see
// Registry.Token.
type Agent struct {
	ID             string         `json:"id"`
	Name           string         `json:"name"`
	Slug           string         `json:"slug"`
	AutonomousExec AutonomousExec `json:"autonomousExec"`
	CreatedAt      time.Time      `json:"createdAt"`

	// Resources are the agent's limits in the VM (cgroups).
	Resources Resources `json:"resources"`
	// UID is the agent's Linux uid, fixed when it is added (see
	// AddWith) so a VM reset or another agent's removal never changes
	// whose files are whose.
	UID int `json:"uid,omitempty"`
	// AdoptHome: the agent was added to take over a home left by a removed
	// agent; the guest gives that home's files to UID.
	AdoptHome bool `json:"adoptHome,omitempty"`
	// DiskGB is the agent's disk quota in GB (1e9 bytes); 0 means
	// DefaultDiskGB.
	DiskGB float64 `json:"diskGB,omitempty"`
	// Projects are the names of the user's projects (package projects)
	// the agent works on, each through a view of its own at
	// /workspace/projects/<name>.
	Projects []string `json:"projects,omitempty"`
	// DispatchTo are the ids of the agents this agent may dispatch tasks
	// to (`osaurus-host agent dispatch`); none by default. A dispatched
	// task runs as the target, with its settings and limits.
	DispatchTo []string `json:"dispatchTo,omitempty"`
}

// MaxDispatchTo bounds the dispatchTo list.
const MaxDispatchTo = 64

// AutonomousExec is what an agent may do beyond reading files.
type AutonomousExec struct {
	// Enabled exposes the write, exec and install tools.
	Enabled bool `json:"enabled"`
	// MaxCommandsPerTurn caps commands per turn (see limit.ExecLimiter).
	MaxCommandsPerTurn int `json:"maxCommandsPerTurn"`
	// PluginCreate lets the agent register plugins it wrote.
	PluginCreate bool `json:"pluginCreate"`
	// PluginCreatorSkillOff keeps the Sandbox Plugin Creator skill out of
	// the agent's MCP instructions, prompts and task system prompt (the
	// setting pluginCreatorSkill false). The skill is on by default, as
	// in Osaurus, so the stored form is its negation.
	PluginCreatorSkillOff bool `json:"pluginCreatorSkillOff,omitempty"`
	// BackgroundProcesses allows sandbox_exec_background and
	// sandbox_process while Enabled. It is on by default, so background
	// processes follow autonomous exec as the Osaurus documentation has
	// it; a user who wants them off sets it to false.
	BackgroundProcesses bool `json:"backgroundProcesses"`
	// BackgroundKeepsAwakeOff: the agent's processes left running (its
	// background jobs, servers) don't keep the VM from sleeping when idle
	// (the setting backgroundKeepsAwake false). They keep it awake by
	// default, so the stored form is the negation.
	BackgroundKeepsAwakeOff bool `json:"backgroundKeepsAwakeOff,omitempty"`
	// Network is the agent's network policy: "none", "outbound" or a
	// comma-separated domain list (see package netpolicy). The old
	// boolean form is read as outbound/none.
	Network NetworkSetting `json:"network"`
}

// Limits of the fields.
const (
	MaxNameLen         = 64
	MaxSlugLen         = 24
	MinCommandsPerTurn = 1
	MaxCommandsPerTurn = 100
)

// DefaultAutonomousExec are the settings of a new agent.
func DefaultAutonomousExec() AutonomousExec {
	return AutonomousExec{
		Enabled:             false,
		MaxCommandsPerTurn:  10,
		PluginCreate:        true,
		BackgroundProcesses: true,
		Network:             netpolicy.SettingOutbound,
	}
}

// BackgroundKeepsAwake reports whether the agent's running processes
// count as activity for idle suspend (the backgroundKeepsAwake setting).
func (a Agent) BackgroundKeepsAwake() bool { return !a.AutonomousExec.BackgroundKeepsAwakeOff }

// User is the agent's Linux user in the VM.
func (a Agent) User() string { return "agent-" + a.Slug }

// Home is the agent's home directory in the VM.
func (a Agent) Home() string { return sandboxpath.AgentHome(a.Slug) }

// Paths is the path policy of the agent's tools.
func (a Agent) Paths() sandboxpath.Policy { return sandboxpath.ForAgent(a.Slug) }

// Errors callers branch on.
var (
	ErrNotFound = agentproto.Class(agentproto.ErrNotFound, "agent not found")
	// ErrAmbiguous: a name or slug matches more than one agent.
	ErrAmbiguous = agentproto.Class(agentproto.ErrInvalid, "more than one agent matches")
	ErrInvalid   = agentproto.Class(agentproto.ErrInvalid, "invalid agent setting")
)

// ValidationError is a setting out of range. Its message names the field,
// what it got and what it wants, e.g. "maxCommandsPerTurn: 0, want 1–100".
type ValidationError struct {
	Field string
	Got   string
	Want  string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("%s: %s, want %s", e.Field, e.Got, e.Want)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool {
	return target == ErrInvalid || errors.Is(ErrInvalid, target)
}

// Validate checks the fields a user can set.
func (a Agent) Validate() error {
	if err := validateName(a.Name); err != nil {
		return err
	}
	if !ValidSlug(a.Slug) {
		return &ValidationError{Field: "slug", Got: fmt.Sprintf("%q", a.Slug),
			Want: fmt.Sprintf("1–%d characters of a-z, 0-9 and -, not starting or ending with -", MaxSlugLen)}
	}
	if n := a.AutonomousExec.MaxCommandsPerTurn; n < MinCommandsPerTurn || n > MaxCommandsPerTurn {
		return &ValidationError{Field: "maxCommandsPerTurn", Got: fmt.Sprint(n),
			Want: fmt.Sprintf("%d–%d", MinCommandsPerTurn, MaxCommandsPerTurn)}
	}
	if _, err := a.NetworkPolicy(); err != nil {
		return err
	}
	if err := a.Resources.Validate(); err != nil {
		return err
	}
	if a.UID != 0 && (a.UID < FirstUID || a.UID > LastUID) {
		return &ValidationError{Field: "uid", Got: fmt.Sprint(a.UID), Want: fmt.Sprintf("%d–%d", FirstUID, LastUID)}
	}
	for _, p := range a.Projects {
		if !ValidProjectName(p) {
			return &ValidationError{Field: "projects", Got: fmt.Sprintf("%q", p), Want: ProjectNameRule}
		}
	}
	if len(a.DispatchTo) > MaxDispatchTo {
		return &ValidationError{Field: "dispatchTo", Got: fmt.Sprintf("%d agents", len(a.DispatchTo)), Want: fmt.Sprintf("at most %d", MaxDispatchTo)}
	}
	for _, id := range a.DispatchTo {
		if id == "" || id == a.ID || len(id) > 64 {
			return &ValidationError{Field: "dispatchTo", Got: fmt.Sprintf("%q", id), Want: "ids of other agents"}
		}
	}
	if g := a.DiskGB; g != 0 && !(g >= MinDiskGB && g <= MaxDiskGB) {
		return &ValidationError{Field: "diskGB", Got: fmt.Sprint(g), Want: fmt.Sprintf("%g–%g (GB; fractions allowed, e.g. 0.5)", MinDiskGB, MaxDiskGB)}
	}
	return nil
}

// Disk quota limits, in GB.
const (
	DefaultDiskGB = 10.0
	MinDiskGB     = 0.01
	MaxDiskGB     = 100000.0
)

// DiskQuota is the agent's disk quota in bytes.
func (a Agent) DiskQuota() int64 {
	g := a.DiskGB
	if g == 0 {
		g = DefaultDiskGB
	}
	return int64(g * 1e9)
}

func validateName(name string) error {
	want := fmt.Sprintf("1–%d printable characters", MaxNameLen)
	switch {
	case strings.TrimSpace(name) == "":
		return &ValidationError{Field: "name", Got: "empty", Want: want}
	case name != strings.TrimSpace(name):
		return &ValidationError{Field: "name", Got: fmt.Sprintf("%q", name), Want: want + " without leading or trailing spaces"}
	case len([]rune(name)) > MaxNameLen:
		return &ValidationError{Field: "name", Got: fmt.Sprintf("%d characters", len([]rune(name))), Want: want}
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return &ValidationError{Field: "name", Got: fmt.Sprintf("%q", name), Want: want}
		}
	}
	return nil
}

// ValidSlug reports whether s can name an agent's user and home.
func ValidSlug(s string) bool {
	if s == "" || len(s) > MaxSlugLen || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// MaxProjectNameLen bounds a project's name, which names folders on the
// host and in the guest.
const MaxProjectNameLen = 64

// ProjectNameRule says what ValidProjectName accepts.
const ProjectNameRule = "1–64 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit"

// ValidProjectName reports whether s can name a project: it becomes a
// folder name on the host and in the guest, so nothing that could climb
// (no "/", no leading dot) or need quoting.
func ValidProjectName(s string) bool {
	if s == "" || len(s) > MaxProjectNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// reserved slugs belong to the system: the diagnostics user is agent-diag.
var reserved = map[string]bool{"diag": true}

// Slugify derives a slug base from a display name: lower case, common
// Latin accents folded, every other run of characters outside [a-z0-9]
// turned into one "-", at most MaxSlugLen characters. A name with nothing
// usable gives "agent".
func Slugify(name string) string { return slugify(name, MaxSlugLen) }

// folded is name as its slug would be without the length limit: names
// that fold alike ("Data Analyst", "data-analyst", "data_analyst") would
// be told apart only by -2, -3 suffixes, so only one of them is allowed.
func folded(name string) string { return slugify(name, 1<<30) }

func slugify(name string, limit int) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if f, ok := fold[r]; ok {
			r = f
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		} else {
			dash = true
		}
		if b.Len() >= limit {
			break
		}
	}
	s := strings.TrimRight(b.String()[:min(b.Len(), limit)], "-")
	if s == "" {
		return "agent"
	}
	return s
}

// uniqueSlug derives a slug for name that no agent in taken uses: base,
// then base-2, base-3, ..., shortening base so the suffix fits.
func uniqueSlug(name string, taken map[string]bool) string {
	base := Slugify(name)
	if !taken[base] && !reserved[base] {
		return base
	}
	for n := 2; ; n++ {
		suffix := fmt.Sprintf("-%d", n)
		b := base[:min(len(base), MaxSlugLen-len(suffix))]
		s := strings.TrimRight(b, "-") + suffix
		if !taken[s] && !reserved[s] {
			return s
		}
	}
}

var fold = map[rune]rune{
	'à': 'a', 'á': 'a', 'â': 'a', 'ã': 'a', 'ä': 'a', 'å': 'a', 'ā': 'a', 'ą': 'a',
	'ç': 'c', 'ć': 'c', 'č': 'c', 'ď': 'd', 'đ': 'd',
	'è': 'e', 'é': 'e', 'ê': 'e', 'ë': 'e', 'ē': 'e', 'ę': 'e', 'ě': 'e',
	'ì': 'i', 'í': 'i', 'î': 'i', 'ï': 'i', 'ī': 'i', 'ł': 'l', 'ľ': 'l',
	'ñ': 'n', 'ń': 'n', 'ň': 'n',
	'ò': 'o', 'ó': 'o', 'ô': 'o', 'õ': 'o', 'ö': 'o', 'ø': 'o', 'ō': 'o', 'ő': 'o',
	'ř': 'r', 'ś': 's', 'š': 's', 'ş': 's', 'ß': 's', 'ť': 't', 'ţ': 't',
	'ù': 'u', 'ú': 'u', 'û': 'u', 'ü': 'u', 'ū': 'u', 'ů': 'u', 'ű': 'u',
	'ý': 'y', 'ÿ': 'y', 'ź': 'z', 'ż': 'z', 'ž': 'z',
}
