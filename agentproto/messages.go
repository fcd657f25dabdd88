package agentproto

import "time"

// Operation names, the "op" of a Request frame.
const (
	OpHello     = "hello"
	OpExec      = "exec"
	OpStartBg   = "start_background"
	OpSignal    = "signal"
	OpWait      = "wait"
	OpReadFile  = "read_file"
	OpWriteFile = "write_file"
	OpStat      = "stat"
	OpList      = "list"
	OpMkdir     = "mkdir"
	OpRemove    = "remove"
	OpMove      = "move"
	OpUserAdd   = "user_add"
	OpUserDel   = "user_del"
	OpUserLimit = "user_limit" // minor 5
	OpShutdown  = "shutdown"
	OpUsage     = "usage" // minor 4
)

// HelloRequest opens a session. The guest sets its clock from TimeUnixNano.
type HelloRequest struct {
	Major        int   `json:"major"`
	Minor        int   `json:"minor"`
	TimeUnixNano int64 `json:"time_unix_nano"`
	// HostAddrs are the host's own addresses (minor 6), which the guest
	// denies to every agent.
	HostAddrs []string `json:"host_addrs,omitempty"`
	// Seed is fresh randomness from the host (minor 10), mixed into the
	// guest's kernel random pool and forcing a reseed: a VM resumed from
	// a saved memory image would otherwise give every copy the same keys.
	Seed []byte `json:"seed,omitempty"`
}

// HelloResponse describes the guest.
type HelloResponse struct {
	Major        int      `json:"major"`
	Minor        int      `json:"minor"`
	AgentVersion string   `json:"agent_version"`
	Kernel       string   `json:"kernel"`
	Arch         string   `json:"arch"`
	Distro       string   `json:"distro"`             // "alpine", "debian", ... from /etc/os-release ID
	PackageMgr   string   `json:"package_mgr"`        // "apk", "apt" or ""
	BootSeconds  float64  `json:"boot_seconds"`       // guest uptime when the agent became ready
	Transport    string   `json:"transport"`          // "virtio-serial" or "vsock"
	Warnings     []string `json:"warnings,omitempty"` // boot steps that failed but did not stop the agent
	// BootPhases are the guest's boot steps in order, each with the guest
	// uptime at which it ended, so the host can say where boot time went.
	BootPhases []BootPhase `json:"boot_phases,omitempty"`
	// UptimeSeconds is the guest uptime when it answered this hello; with
	// the host's clock at that moment it places the guest's boot on the
	// host's time line.
	UptimeSeconds float64 `json:"uptime_seconds,omitempty"`
	// Reseeded says the guest mixed the hello's Seed into its random
	// pool and reseeded it (minor 10).
	Reseeded bool `json:"reseeded,omitempty"`
}

// BootPhase is one step of the guest's boot: Name ended at guest uptime
// Seconds (CLOCK_BOOTTIME, zero when the kernel started).
type BootPhase struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	// Took is how long the step itself ran, for steps that overlap others
	// (modules load concurrently); zero for the sequential steps.
	Took float64 `json:"took,omitempty"`
}

// Identity selects whose rights an operation runs with. Empty User is root.
// Root, when set, confines every path of the operation beneath that
// directory: the guest resolves paths with RESOLVE_BENEATH semantics, so
// symlinks can't lead out of it (ErrEscape).
type Identity struct {
	User string `json:"user,omitempty"`
	Root string `json:"root,omitempty"`
}

// ExecRequest runs a process. Exactly one of Argv and Shell is set; Shell
// runs through /bin/sh -c.
type ExecRequest struct {
	Identity
	Argv  []string `json:"argv,omitempty"`
	Shell string   `json:"shell,omitempty"`
	Cwd   string   `json:"cwd,omitempty"` // default: the user's home
	// Env is added to a clean base environment (PATH, HOME, USER, LOGNAME,
	// SHELL, LANG) as KEY=VALUE entries; later entries win.
	Env []string `json:"env,omitempty"`
	// Stdin says whether the host will send Stdin frames. Without it the
	// process reads /dev/null.
	Stdin bool `json:"stdin,omitempty"`
	// TimeoutMillis kills the whole process group when it expires. 0: none.
	TimeoutMillis int64 `json:"timeout_ms,omitempty"`
	// Network is the network policy the process runs under (a setting of
	// package netpolicy: "none", "outbound" or a domain list). The guest
	// applies it before starting the process, so a changed setting holds
	// from the next command on. Processes of a non-root user with no
	// policy get none; root's run in the guest's own network.
	Network string `json:"network,omitempty"`
	// NetScope gives the process a network namespace of its own beside
	// its user's (protocol 2.3): a plugin's id, so the plugin's narrower
	// policy applies to its processes only and never to the agent's
	// others running at the same time. Lower-case letters, digits, '-'.
	NetScope string `json:"net_scope,omitempty"`
	// Limits are the resource limits of the user's cgroup, applied before
	// the process starts (minor 4). Nil: the guest's defaults. Ignored for
	// root.
	Limits *Limits `json:"limits,omitempty"`
	// Tty, when set, runs the process on a pseudo-terminal of this size
	// (minor 9): it leads a session of its own with the terminal as its
	// controlling terminal, stdin, stdout and stderr (all output comes as
	// Stdout frames), and Resize frames change the size.
	Tty *Winsize `json:"tty,omitempty"`
}

// Winsize is a terminal's size in character cells (a Resize frame, and
// ExecRequest.Tty).
type Winsize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// NetworkPackageMirror, as the Network of a root process (protocol 2.3),
// confines it to the guest's package mirror: the hosts its package
// sources name, over HTTP and HTTPS through the egress proxy. Installs
// use it; root's processes without a Network keep the guest's network.
const NetworkPackageMirror = "package-mirror"

// ExecStarted is the first Response of an exec call.
type ExecStarted struct {
	Pid int `json:"pid"`
}

// ExitStatus ends an exec call (Exit frame) and answers wait.
type ExitStatus struct {
	Exited   bool   `json:"exited"`              // false: still running (wait only)
	Code     int    `json:"code"`                // exit code; 128+n when killed by signal n
	Signal   int    `json:"signal,omitempty"`    // killing signal, if any
	TimedOut bool   `json:"timed_out,omitempty"` // killed because the timeout expired
	Error    string `json:"error,omitempty"`     // I/O trouble while running
	// Limit names the resource limit the process's cgroup ran into
	// (LimitMemory or LimitProcesses), empty if none (minor 4).
	Limit string `json:"limit,omitempty"`
}

// SignalFrame is sent by the host during an exec call.
type SignalFrame struct {
	Signal int `json:"signal"`
	// Children (minor 9) signals every process of the call but its
	// leader: a shell session's running command and what it started,
	// leaving the shell itself alive. A guest without cgroups ignores it.
	Children bool `json:"children,omitempty"`
}

// StartBackgroundRequest starts a detached process (own session and process
// group) whose stdout and stderr go to LogPath (default: a file in the
// user's home under .sandbox/logs).
type StartBackgroundRequest struct {
	ExecRequest
	LogPath string `json:"log_path,omitempty"`
}

// StartBackgroundResponse reports the started process.
type StartBackgroundResponse struct {
	Pid     int    `json:"pid"`
	LogPath string `json:"log_path"`
}

// SignalRequest signals a process (group when Group) with the identity's
// rights: the kernel refuses to let one user signal another's processes.
type SignalRequest struct {
	Identity
	Pid    int  `json:"pid"`
	Signal int  `json:"signal"`
	Group  bool `json:"group,omitempty"`
}

// WaitRequest waits for a background process started by the agent.
type WaitRequest struct {
	Identity
	Pid           int   `json:"pid"`
	TimeoutMillis int64 `json:"timeout_ms,omitempty"` // 0: don't wait, just poll
}

// ReadFileRequest reads a file. Offset/Length select bytes; StartLine (1-based)
// /LineCount or TailLines select lines (not both with bytes). MaxBytes caps
// what is returned (default and upper bound: MaxFrame/2).
type ReadFileRequest struct {
	Identity
	Path      string `json:"path"`
	Offset    int64  `json:"offset,omitempty"`
	Length    int64  `json:"length,omitempty"`
	StartLine int    `json:"start_line,omitempty"`
	LineCount int    `json:"line_count,omitempty"`
	TailLines int    `json:"tail_lines,omitempty"`
	MaxBytes  int64  `json:"max_bytes,omitempty"`
}

// ReadFileResponse carries the selected content.
type ReadFileResponse struct {
	Data []byte `json:"-"` // sent as Data frames after the Response

	Size       int64 `json:"size"`        // whole file size
	TotalLines int   `json:"total_lines"` // set for line selections
	Truncated  bool  `json:"truncated"`   // MaxBytes cut the selection
}

// WriteFileRequest replaces a file atomically (temp, fsync, rename), or
// appends when Append. Parents are created (0755, owned by the identity)
// when MakeParents.
type WriteFileRequest struct {
	Identity
	Path string `json:"path"`
	// Data is the content. On the wire it follows the request as Data
	// frames (raw bytes, no base64), which is several times faster for an
	// emulated guest CPU.
	Data        []byte `json:"-"`
	Mode        uint32 `json:"mode,omitempty"` // default 0644
	MakeParents bool   `json:"make_parents,omitempty"`
	Append      bool   `json:"append,omitempty"`
}

// WriteFileResponse reports the file's new size.
type WriteFileResponse struct {
	Size int64 `json:"size"`
}

// PathRequest names one path (stat, mkdir, remove).
type PathRequest struct {
	Identity
	Path string `json:"path"`
	// Mkdir: Mode (default 0755) and Parents. Remove: Recursive.
	Mode      uint32 `json:"mode,omitempty"`
	Parents   bool   `json:"parents,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
}

// FileInfo describes one file. Path is relative to the listed directory in
// list results, the requested path in stat.
type FileInfo struct {
	Path          string    `json:"path"`
	Name          string    `json:"name"`
	Type          string    `json:"type"` // "file", "dir", "symlink", "other"
	Size          int64     `json:"size"`
	Mode          uint32    `json:"mode"` // permission and special bits
	ModTime       time.Time `json:"mod_time"`
	UID           int       `json:"uid"`
	GID           int       `json:"gid"`
	SymlinkTarget string    `json:"symlink_target,omitempty"`
}

// ListRequest lists a directory, depth first, sorted by name.
type ListRequest struct {
	Identity
	Path       string `json:"path"`
	MaxDepth   int    `json:"max_depth,omitempty"`   // 1: direct children only (default)
	MaxEntries int    `json:"max_entries,omitempty"` // default 1000
}

// ListResponse holds the entries.
type ListResponse struct {
	Entries   []FileInfo `json:"entries"`
	Truncated bool       `json:"truncated"`
}

// MoveRequest renames Src to Dst (both under Root when set).
type MoveRequest struct {
	Identity
	Src       string `json:"src"`
	Dst       string `json:"dst"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// UserAddRequest creates a Linux user and its home (idempotent: an existing
// user with the same home is success).
type UserAddRequest struct {
	Name string `json:"name"`
	Home string `json:"home"`
	// UID, when set, is the user's fixed uid (the host's registry hands
	// them out). The guest refuses one that owns another home beside Home
	// or belongs to another user.
	UID int `json:"uid,omitempty"`
	// AdoptHome lets the user take over an existing Home owned by another
	// uid that no user has: its files are given to UID. Without it such a
	// home is refused, so no user silently inherits another's files.
	AdoptHome bool   `json:"adopt_home,omitempty"`
	HomeMode  uint32 `json:"home_mode,omitempty"` // default 0700
	Shell     string `json:"shell,omitempty"`     // default /bin/sh
}

// UserAddResponse reports the ids.
type UserAddResponse struct {
	UID     int    `json:"uid"`
	GID     int    `json:"gid"`
	Home    string `json:"home"`
	Created bool   `json:"created"`
}

// UserDelRequest deletes a user, first killing its processes.
type UserDelRequest struct {
	Name       string `json:"name"`
	RemoveHome bool   `json:"remove_home,omitempty"`
}

// UserLimitRequest blocks or unblocks a user. Blocking kills the user's
// processes and makes exec, background starts and writes as the user fail
// with ErrQuota and Reason until it is unblocked. The state lives in the
// guest agent's memory, so the host sets it again on each new session.
//
// TmpMaxBytes, when above 0, caps the user's private temporary area (its
// /tmp, /var/tmp, /dev/shm): the host sends what the user's disk quota
// leaves after its files on the host, so both together stay within one
// quota. The guest never shrinks an area under what it holds. 0 leaves
// the cap as it is (a guest older than minor 7 ignores the field).
type UserLimitRequest struct {
	Name        string `json:"name"`
	Blocked     bool   `json:"blocked"`
	Reason      string `json:"reason,omitempty"`
	TmpMaxBytes int64  `json:"tmp_max_bytes,omitempty"`
}

// MaxLimitReason bounds UserLimitRequest.Reason.
const MaxLimitReason = 1024

// ShutdownRequest powers the guest off (or reboots) after syncing disks.
type ShutdownRequest struct {
	Reboot bool `json:"reboot,omitempty"`
}

// Empty is the body of calls that return nothing.
type Empty struct{}
