package control

import (
	"encoding/json"
	"time"
)

// The owner's operations on the data files it alone writes (api.DataOps):
// the agents' memory, the event log, the bridge's config and logs, the
// image's description, the plugin library and the tasks.
const (
	OpMemoryList   = "ctl.memory_list"   // MemoryQuery → MemoryList
	OpMemoryRemove = "ctl.memory_remove" // MemoryRemove → MemoryRemoved
	OpEventsList   = "ctl.events_list"   // EventFilter → []Event
	// OpEventsFollow streams every event the filter selects (its Last
	// for the backlog), then each new one as an event, until cancelled.
	OpEventsFollow = "ctl.events_follow"
	OpEventsLast   = "ctl.events_last"  // Empty → EventsLast
	OpEventsEmit   = "ctl.events_emit"  // EventEmit → Event
	OpAgentStores  = "ctl.agent_stores" // AgentRef → AgentStores
	OpAgentLog     = "ctl.agent_log"    // AgentRef → AgentLog
	OpImagePlan    = "ctl.image_plan"   // ImagePlanRequest → ImagePlan
	// OpConsoleLog answers with a raw pipe carrying the VM's console log
	// (ConsoleLogRequest), and with Follow what is written to it after,
	// until the caller closes it.
	OpConsoleLog = "ctl.console_log"
)

// ConsoleLogRequest asks for the VM's console log; Follow keeps the pipe
// open for what the VM writes next (and waits for a first boot's log).
type ConsoleLogRequest struct {
	Follow bool `json:"follow,omitempty"`
}

// MemoryEntry is one of an agent's memories.
type MemoryEntry struct {
	ID        int64     `json:"id"`
	Agent     string    `json:"agent"`
	Content   string    `json:"content"`
	Salience  float64   `json:"salience"`
	CreatedAt time.Time `json:"created_at"`
}

// MemoryQuery selects an agent's (slug) memories: the best matches of
// Search, or the newest Limit (all when 0).
type MemoryQuery struct {
	Agent  string `json:"agent"`
	Search string `json:"search,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// MemoryList is what a MemoryQuery selects, with how many entries the
// agent has and may keep.
type MemoryList struct {
	Entries []MemoryEntry `json:"entries"`
	Count   int           `json:"count"`
	Max     int           `json:"max"`
}

// MemoryRemove forgets an agent's (slug) entry ID, or every one with All.
type MemoryRemove struct {
	Agent string `json:"agent"`
	ID    int64  `json:"id,omitempty"`
	All   bool   `json:"all,omitempty"`
}

// MemoryRemoved says how many entries went.
type MemoryRemoved struct {
	Removed int64 `json:"removed"`
}

// Event is one emitted event. Payload is compact JSON, or null.
type Event struct {
	ID      int64           `json:"id"`
	Agent   string          `json:"agent"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
	Time    time.Time       `json:"time"`
	// Plugin is the plugin (id) of Agent whose command emitted the event;
	// empty for the agent's own commands and the host.
	Plugin string `json:"plugin,omitempty"`
}

// EventFilter selects events: of Agent (all when empty), with ids above
// After, the Last n of those (all when 0), oldest first. Type, when set,
// keeps events of that type family; Plugin, when set, keeps only what
// that plugin may see: the events it emitted and those of its own type
// family (its id).
type EventFilter struct {
	Agent  string `json:"agent,omitempty"`
	After  int64  `json:"after,omitempty"`
	Last   int    `json:"last,omitempty"`
	Type   string `json:"type,omitempty"`
	Plugin string `json:"plugin,omitempty"`
}

// EventsLast is the id of the newest event (0 when there is none).
type EventsLast struct {
	ID int64 `json:"id"`
}

// EventEmit adds an event of Agent (a slug).
type EventEmit struct {
	Agent   string          `json:"agent"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// AgentLog is an agent's log buffer (osaurus-host log).
type AgentLog struct {
	Text string `json:"text"`
}

// AgentStores is what an agent keeps in the host-side stores, beside
// each store's per-agent bound, as `agent show` prints it. A store that
// could not be read is -1 and named in Problems.
type AgentStores struct {
	ConfigKeys     int      `json:"configKeys"`
	ConfigBytes    int      `json:"configBytes"`
	LogBytes       int64    `json:"logBytes"`
	Events         int      `json:"events"`
	Memories       int      `json:"memories"`
	Tasks          int      `json:"tasks"`
	CreatedPlugins int      `json:"createdPlugins"`
	Problems       []string `json:"problems,omitempty"`

	MaxConfigKeys     int   `json:"maxConfigKeys"`
	MaxConfigBytes    int   `json:"maxConfigBytes"`
	MaxLogBytes       int64 `json:"maxLogBytes"`
	MaxEvents         int   `json:"maxEvents"`
	MaxMemories       int   `json:"maxMemories"`
	MaxTasks          int   `json:"maxTasks"`
	MaxCreatedPlugins int   `json:"maxCreatedPlugins"`
}

// ImagePlanRequest names the image manifest to describe ("": the
// built-in image of this machine).
type ImagePlanRequest struct {
	Manifest string `json:"manifest,omitempty"`
}

// Download is one file provisioning fetches.
type Download struct {
	URL string `json:"url"`
	// Size in bytes, or -1 when the server didn't say.
	Size int64 `json:"size"`
}

// ImagePlan is what provisioning an image will fetch, and where it goes.
type ImagePlan struct {
	Distro    string     `json:"distro"`
	Arch      string     `json:"arch"`
	Downloads []Download `json:"downloads"`
	// Packages are installed at the first boot, from the distro's mirror.
	Packages []string `json:"packages,omitempty"`
	// DiskSize is how large the VM's disk may grow, in bytes.
	DiskSize int64 `json:"diskSize"`
}

// The agent runner's tasks: the owner works them and keeps their records.
const (
	OpTaskList   = "ctl.task_list"   // TaskQuery → the tasks, newest first
	OpTaskGet    = "ctl.task_get"    // TaskRef → the task
	OpTaskCancel = "ctl.task_cancel" // TaskRef → the task as it was asked to stop
	// OpTaskRun works a task in the owner, streaming the task at each
	// change; a caller that goes away leaves it interrupted.
	OpTaskRun = "ctl.task_run" // TaskRun → the finished task
)

// TaskQuery selects tasks: an agent's (a slug), or all when empty.
type TaskQuery struct {
	Agent string `json:"agent,omitempty"`
}

// TaskRef names a task by its id.
type TaskRef struct {
	ID string `json:"id"`
}

// TaskRun is a task for an agent (id, slug or name) from Source ("cli").
type TaskRun struct {
	Agent  string `json:"agent"`
	Task   string `json:"task"`
	Source string `json:"source"`
}

// The plugin library's writes: the front ends fetch, review and ask for
// consent; the owner saves (api.PluginSaveRequest and the like).
const (
	OpPluginSave      = "ctl.plugin_save"      // api.PluginSaveRequest → api.PluginSaved
	OpPluginDuplicate = "ctl.plugin_duplicate" // PluginRequest → api.PluginSaved
	// OpPluginRemove uninstalls a plugin from every agent (each as an
	// event: a report line), then deletes it from the library.
	OpPluginRemove = "ctl.plugin_remove" // PluginRequest → api.PluginRemoved
	OpPluginRepair = "ctl.plugin_repair" // Empty → api.PluginRepairs
	// OpPluginLibrary reads the library (and an agent's installs) as the
	// owner has them: what a remote context's plugin commands show and
	// review, since the library files are the far side's.
	OpPluginLibrary = "ctl.plugin_library" // PluginLibraryRequest → api.PluginLibrary
)

// The owner's settings (sandbox.json) and what its agents expose: a
// front end on another machine has neither file of its own to read.
const (
	OpSettings     = "ctl.settings"      // Empty → api.SettingsFile
	OpSettingsSave = "ctl.settings_save" // api.SettingsSave → api.SettingsFile
	OpPreviews     = "ctl.previews"      // Empty → []api.Preview
)

// PluginLibraryRequest asks for the whole library, or only Plugin (an
// id); with Agent (id, slug or name), only that agent's installs.
type PluginLibraryRequest struct {
	Plugin string `json:"plugin,omitempty"`
	Agent  string `json:"agent,omitempty"`
}
