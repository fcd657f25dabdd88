// Package config holds where the app keeps its files and the sandbox
// settings (sandbox.json), validated and written atomically.
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// HomeEnv moves everything the app stores (tests use it).
const HomeEnv = "OSAURUS_SANDBOX_HOME"

// Paths is the app's data layout: every path under the data folder is
// named in this file. Workspace and output live outside the
// container folder so that Reset and Remove, which delete the container,
// can't touch agents' work by accident.
type Paths struct {
	Root string
}

// DefaultPaths honours OSAURUS_SANDBOX_HOME, else the platform's place for
// application data.
func DefaultPaths() (Paths, error) {
	if h := os.Getenv(HomeEnv); h != "" {
		abs, err := filepath.Abs(h)
		if err != nil {
			return Paths{}, fmt.Errorf("%s: %w", HomeEnv, err)
		}
		return Paths{Root: abs}, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return Paths{}, fmt.Errorf("locating the home folder: %w (set %s)", err, HomeEnv)
	}
	if runtime.GOOS == "darwin" {
		return Paths{Root: filepath.Join(home, "Library", "Application Support", "Osaurus Sandbox")}, nil
	}
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" {
		data = filepath.Join(home, ".local", "share")
	}
	return Paths{Root: filepath.Join(data, "osaurus-sandbox")}, nil
}

func (p Paths) ConfigDir() string   { return filepath.Join(p.Root, "config") }
func (p Paths) SandboxJSON() string { return filepath.Join(p.ConfigDir(), "sandbox.json") }
func (p Paths) AgentsJSON() string  { return filepath.Join(p.ConfigDir(), "agents.json") }

// ContainerDir holds the provisioned VM image (provision.Layout's Dir).
func (p Paths) ContainerDir() string { return filepath.Join(p.Root, "container") }
func (p Paths) Workspace() string    { return filepath.Join(p.Root, "workspace") }
func (p Paths) Output() string       { return filepath.Join(p.Root, "output") }

// Artifacts holds the host's checked copies of shared artifacts (not
// shared with the VM): what host_path and resource links name.
func (p Paths) Artifacts() string { return filepath.Join(p.Root, "artifacts") }

func (p Paths) Logs() string       { return filepath.Join(p.Root, "logs") }
func (p Paths) ConsoleLog() string { return filepath.Join(p.Logs(), "console.log") }
func (p Paths) Run() string        { return filepath.Join(p.Root, "run") }
func (p Paths) StateFile() string  { return filepath.Join(p.Root, "state.json") }

// PluginsDir is the plugin library: one JSON file per plugin with its
// version history. Outside the container folder, so it survives Reset.
func (p Paths) PluginsDir() string { return filepath.Join(p.Root, "plugins") }

// AgentStateDir holds per-agent state kept on the host, such as each
// agent's installed plugins (agents/<id>/sandbox-plugins/installed.json).
func (p Paths) AgentStateDir() string { return filepath.Join(p.Root, "agents") }

// AgentActivity is when each agent last called a tool, written by the
// owner, read by the window's Agents tab.
func (p Paths) AgentActivity() string { return filepath.Join(p.AgentStateDir(), "activity.json") }

// AgentHomes holds the agents' homes on the host (the guest's
// /workspace/agents/<slug>).
func (p Paths) AgentHomes() string { return filepath.Join(p.Workspace(), "agents") }

// The owner's run-time files: its ownership lock, its control socket and
// the disk monitor's latest measure.
func (p Paths) OwnerLock() string     { return filepath.Join(p.Run(), "owner.lock") }
func (p Paths) ControlSocket() string { return filepath.Join(p.Run(), "control.sock") }
func (p Paths) DiskUsageFile() string { return filepath.Join(p.Run(), "disk-usage.json") }

// ServeLog is where a background owner started by the CLI logs.
func (p Paths) ServeLog() string { return filepath.Join(p.Logs(), "serve.log") }

// AgentLogDir holds each agent's bridge log buffer (osaurus-host log).
func (p Paths) AgentLogDir() string { return filepath.Join(p.Logs(), "agents") }

// ManifestCache is the image manifest kept from the last provision; its
// URL is beside it, in ManifestCache()+".url".
func (p Paths) ManifestCache() string { return filepath.Join(p.ContainerDir(), "manifest.json") }

// PackageCache keeps the packages the image's package manager downloaded
// while provisioning (apk's cache, apt's archives and lists), so a Reset
// installs them again without the network. It is inside the download
// cache: a Reset keeps it, a Remove deletes it.
func (p Paths) PackageCache() string { return filepath.Join(p.ContainerDir(), "cache", "packages") }

// BridgeDir holds the host API bridge's state: per-agent config, the
// agents' memories and the event log.
func (p Paths) BridgeDir() string       { return filepath.Join(p.Root, "bridge") }
func (p Paths) BridgeConfigDir() string { return filepath.Join(p.BridgeDir(), "config") }
func (p Paths) MemoryDB() string        { return filepath.Join(p.BridgeDir(), "memory.db") }
func (p Paths) EventsDB() string        { return filepath.Join(p.BridgeDir(), "events.db") }

// TasksDir holds the agent runner's tasks.
func (p Paths) TasksDir() string { return filepath.Join(p.Root, "tasks") }

// SecretRemovals lists the agents whose keychain secrets are still to be
// deleted (the keychain was unreachable when they were removed).
func (p Paths) SecretRemovals() string { return filepath.Join(p.ConfigDir(), "secrets-to-remove.json") }

// SecretsDir holds the file secret store (secretStore "file"): its own
// folder so it can be 0700 while the config folder stays readable.
func (p Paths) SecretsDir() string { return filepath.Join(p.Root, "secrets") }

// SecretsFile is the file secret store: every secret, in plain text,
// protected by its mode (0600) and its folder's (0700).
func (p Paths) SecretsFile() string { return filepath.Join(p.SecretsDir(), "secrets.json") }

// SecretsLock serialises writers of SecretsFile, which is replaced by
// rename and so can't carry the lock itself.
func (p Paths) SecretsLock() string { return filepath.Join(p.SecretsDir(), "secrets.lock") }

// ProjectsJSON lists the user's projects: host folders agents work on
// through views of their own (package projects).
func (p Paths) ProjectsJSON() string { return filepath.Join(p.ConfigDir(), "projects.json") }

// ProjectViews holds each agent's views of its projects, in the shared
// workspace so the guest reaches them (/workspace/.projects/<slug>/<name>)
// and the disk quota counts them; in an agent's mount namespace its own
// folder is what /workspace/projects shows.
func (p Paths) ProjectViews() string { return filepath.Join(p.Workspace(), ".projects") }

// ProjectsMount is the empty folder each agent's own views are mounted on
// (the guest's /workspace/projects).
func (p Paths) ProjectsMount() string { return filepath.Join(p.Workspace(), "projects") }

// ProjectBaselines holds, per agent id, what each project held when the
// agent's view was taken (projects/<agent id>/<name>.json), outside
// anything the guest sees.
func (p Paths) ProjectBaselines() string { return filepath.Join(p.Root, "projects") }

// PreviewsFile lists the agents' ports the owner exposes on the host's
// loopback (sandbox_expose_port), for `osaurus-sandbox ports`.
func (p Paths) PreviewsFile() string { return filepath.Join(p.Run(), "previews.json") }
