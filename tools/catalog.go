package tools

import "time"

// Limits of the tools. They match Osaurus's where it has one.
const (
	DefaultMaxChars = 15_000  // sandbox_read_file
	MaxMaxChars     = 200_000 // sandbox_read_file
	ListMaxDepth    = 3       // sandbox_list_directory, recursive
	ListMaxEntries  = 200     // sandbox_list_directory
	MaxContextLines = 10      // sandbox_search_files
	DefaultResults  = 100     // sandbox_search_files, sandbox_find_files
	MaxResults      = 500
	MaxWriteBytes   = 8 << 20 // sandbox_write_file content

	DefaultExecTimeout   = 30 * time.Second // sandbox_exec
	DefaultScriptTimeout = 60 * time.Second // sandbox_run_script
	MaxExecTimeout       = 300 * time.Second
	StdoutCap            = 50_000 // characters; 40% head, 60% tail kept
	StderrCap            = 10_000

	DefaultWait     = 60 * time.Second // sandbox_process wait
	MaxWait         = 300 * time.Second
	DefaultLogTail  = 40 // sandbox_process tail_lines
	MaxLogTail      = 200
	InstallTimeout  = 120 * time.Second // sandbox_install, per package-manager run
	LanguageTimeout = 240 * time.Second // sandbox_pip_install, sandbox_npm_install
	MaxPackages     = 20
)

// Rate-limiter services of the tools; all get the limiter's default quota.
const (
	serviceRead    = "sandbox.read"
	serviceWrite   = "sandbox.write"
	serviceExec    = "exec"
	serviceInstall = "install"
)

type gate int

const (
	gateAlways       gate = iota // read-only tools
	gateAutonomous               // autonomousExec.enabled
	gateBackground               // enabled and backgroundProcesses
	gatePluginCreate             // enabled and pluginCreate, with a plugin library
	gateSecrets                  // enabled, with a secret store
	gateReview                   // enabled, with a reviewer, and granted a project
	gatePorts                    // enabled, with an exposer
	gateCheckpoint               // enabled, with a checkpointer
)

// tool is one entry of the catalog.
type tool struct {
	Spec
	gate    gate
	service string
	command bool // counts against maxCommandsPerTurn
	bind    binder
}

// sessionHelp describes shell sessions to agents.
const sessionHelp = "With session (a name), commands run one after another in one long-lived shell of yours, so cd, exported variables, " +
	"an activated venv and shell functions carry over between calls; each call still has its own output, exit code and timeout, " +
	"and a timed-out command is killed without ending the session. A session ends on `exit`, close_session: true, " +
	"30 minutes unused, or when the VM stops (nothing of it survives a restart); at most 8 are open at once."

const pathHelp = "Relative paths start in your home; `~` is your home; absolute paths must be under your home or /workspace/shared."

// catalog is every tool, in the order clients list them.
var catalog = []*tool{
	{
		Spec: Spec{
			Name: "sandbox_read_file",
			Description: "Read a text file in the sandbox. Returns {kind, path, content, size}. Select lines with start_line " +
				"and line_count, or the end with tail_lines. Content over max_chars (default 15000) is cut and marked truncated. " +
				"A PNG, JPEG, GIF or WebP image (at most 1 MiB) comes back as image content, with {kind: image, path, mime_type, size}. " + pathHelp,
			InputSchema: object(
				str("path", "The file to read.").must(),
				integer("start_line", "First line to return, 1-based.", 1, 0, 0),
				integer("line_count", "How many lines to return from start_line.", 1, 0, 0),
				integer("tail_lines", "Return only the last N lines (not with start_line/line_count).", 1, 0, 0),
				integer("max_chars", "Most characters to return.", 1, MaxMaxChars, DefaultMaxChars),
			),
			ReadOnly: true, Idempotent: true,
		},
		gate: gateAlways, service: serviceRead, bind: bind(readFile),
	},
	{
		Spec: Spec{
			Name: "sandbox_list_directory",
			Description: "List a directory in the sandbox: {kind: listing, path, entries: [{name, path, type, size}], entry_count, truncated}. " +
				"recursive descends 3 levels; at most 200 entries. " + pathHelp,
			InputSchema: object(
				str("path", "The directory; default your home."),
				boolean("recursive", "Also list subdirectories, up to 3 levels deep."),
			),
			ReadOnly: true, Idempotent: true,
		},
		gate: gateAlways, service: serviceRead, bind: bind(listDirectory),
	},
	{
		Spec: Spec{
			Name: "sandbox_search_files",
			Description: "Search file contents with ripgrep (a regular expression). Returns matching lines with file, line number and " +
				"optional context. Symbolic links are not followed. Needs ripgrep (package ripgrep); without it the guest agent's built-in " +
				"search runs instead, with the same arguments and results but without reading .gitignore/.ignore files. " + pathHelp,
			InputSchema: object(
				str("pattern", "Regular expression (ripgrep/Rust syntax).").must(),
				str("path", "File or directory to search; default \".\" (your home)."),
				str("include", "Only search files matching this glob, e.g. \"*.py\"."),
				integer("context_lines", "Lines of context around each match (max 10).", 0, MaxContextLines, 0),
				boolean("case_insensitive", "Ignore case."),
				integer("max_results", "Most matching lines to return (default 100, max 500).", 1, MaxResults, DefaultResults),
			),
			ReadOnly: true, Idempotent: true,
		},
		gate: gateAlways, service: serviceRead, bind: bind(searchFiles),
	},
	{
		Spec: Spec{
			Name: "sandbox_find_files",
			Description: "Find files by name glob, e.g. \"*.py\" or \"test_*\"; a bare word like \"config\" means \"*config*\". " +
				"Returns absolute paths. " + pathHelp,
			InputSchema: object(
				str("pattern", "File name glob (no slashes).").must(),
				str("path", "Directory to search; default your home."),
				integer("max_results", "Most paths to return (default 100, max 500).", 1, MaxResults, DefaultResults),
			),
			ReadOnly: true, Idempotent: true,
		},
		gate: gateAlways, service: serviceRead, bind: bind(findFiles),
	},
	{
		Spec: Spec{
			Name:        "sandbox_write_file",
			Description: "Write a text file, replacing it (or appending), creating parent directories. Returns {path, size}. " + pathHelp,
			InputSchema: object(
				str("path", "The file to write.").must(),
				str("content", "The text to write.").must(),
				boolean("append", "Append instead of replacing."),
			),
			Destructive: true,
		},
		gate: gateAutonomous, service: serviceWrite, bind: bind(writeFile),
	},
	{
		Spec: Spec{
			Name: "sandbox_edit_file",
			Description: "Replace old_string with new_string in a file. old_string must match exactly once (include surrounding " +
				"lines to make it unique); otherwise nothing changes and the error says how many times it matched. " + pathHelp,
			InputSchema: object(
				str("path", "The file to edit.").must(),
				str("old_string", "The exact text to replace.").must(),
				str("new_string", "The replacement text.").must(),
			),
			Destructive: true,
		},
		gate: gateAutonomous, service: serviceWrite, bind: bind(editFile),
	},
	{
		Spec: Spec{
			Name:        "sandbox_move",
			Description: "Move or rename a file or directory. Refuses to replace an existing destination unless overwrite is true. " + pathHelp,
			InputSchema: object(
				str("source", "What to move.").must(),
				str("destination", "The new path.").must(),
				boolean("overwrite", "Replace an existing destination."),
			),
			Destructive: true,
		},
		gate: gateAutonomous, service: serviceWrite, bind: bind(move),
	},
	{
		Spec: Spec{
			Name:        "sandbox_delete",
			Description: "Delete a file, symlink or directory (a non-empty directory needs recursive: true). " + pathHelp,
			InputSchema: object(
				str("path", "What to delete.").must(),
				boolean("recursive", "Delete a directory with everything in it."),
			),
			Destructive: true, Idempotent: true,
		},
		gate: gateAutonomous, service: serviceWrite, bind: bind(deletePath),
	},
	{
		Spec: Spec{
			Name: "sandbox_exec",
			Description: "Run a shell command (/bin/sh -c) as your Linux user. Returns {stdout, stderr, exit_code, cwd}. " +
				"timeout in seconds (default 30, max 300). Output over 50000 characters keeps its start and end. " +
				"Packages from sandbox_pip_install/sandbox_npm_install are on PATH. " + sessionHelp,
			InputSchema: object(
				str("command", "The shell command.").must(),
				str("cwd", "Working directory; default your home (in a session: where a new one starts; for an open one, cd there first)."),
				integer("timeout", "Seconds before the command is killed (default 30, max 300).", 1, int(MaxExecTimeout/time.Second), int(DefaultExecTimeout/time.Second)),
				str("session", "Run in this persistent shell session (a name you choose, e.g. \"main\"); omit for a fresh shell."),
				boolean("close_session", "End the session after this command."),
			),
			Destructive: true, OpenWorld: true,
		},
		gate: gateAutonomous, service: serviceExec, command: true, bind: bind(execCommand),
	},
	{
		Spec: Spec{
			Name: "sandbox_plugin_register",
			Description: "Register a plugin you wrote: put plugin.json (name, description, tools with id, description, parameters, run; " +
				"optional dependencies, setup, secrets, permissions) and its scripts in ~/plugins/<plugin_id>/, then call this. " +
				"Text files in the folder are packed into the plugin. It is checked, saved, installed for you and its tools " +
				"({plugin_id}_{tool_id}) appear. Network access is restricted to the host names listed in permissions.network; " +
				"setup and run may only reach hosts on the setup allowlist.",
			InputSchema: object(
				str("plugin_id", "The folder name under ~/plugins: the plugin name lowercased, spaces as hyphens.").must(),
			),
			OpenWorld: true,
		},
		gate: gatePluginCreate, service: serviceHTTP, bind: bind(registerPlugin),
	},
	{
		Spec: Spec{
			Name: "sandbox_secret_check",
			Description: "Check whether you have a secret (an API key, a token) stored under key. Returns {exists}; " +
				"never the value. Your commands read a secret with `osaurus-host secrets get KEY`.",
			InputSchema: object(
				str("key", "The secret's name, an environment variable name such as OPENAI_API_KEY.").must(),
			),
			ReadOnly: true, Idempotent: true,
		},
		gate: gateSecrets, service: serviceSecrets, bind: bind(secretCheck),
	},
	{
		Spec: Spec{
			Name: "sandbox_secret_set",
			Description: "Store a secret in the OS keychain under key. Pass value only if you already have it; without value " +
				"the user is asked to type it (the value never reaches you). Returns {stored: true, key}, or user_denied " +
				"when the user declines or can't be asked (the message says how the user can set it).",
			InputSchema: object(
				str("key", "The secret's name, an environment variable name such as OPENAI_API_KEY.").must(),
				str("value", "The value, only when you already have it; omit it to ask the user."),
				str("description", "What the secret is for, shown to the user when asking (at most 500 characters)."),
			),
			Idempotent: true,
		},
		gate: gateSecrets, service: serviceSecrets, bind: bind(secretSet),
	},
	{
		Spec: Spec{
			Name: "sandbox_exec_background",
			Description: "Start a long-running shell command (a server, a watcher) in the background. Returns {pid, log_file, cwd, background}; " +
				"its output goes to log_file. Check on it with sandbox_process.",
			InputSchema: object(
				str("command", "The shell command.").must(),
				str("cwd", "Working directory; default your home."),
			),
			Destructive: true, OpenWorld: true,
		},
		gate: gateBackground, service: serviceExec, command: true, bind: bind(execBackground),
	},
	{
		Spec: Spec{
			Name: "sandbox_process",
			Description: "Manage a background process started by sandbox_exec_background: poll (status and log tail), wait " +
				"(until it exits; timeout default 60 s, max 300) or kill (SIGTERM, or SIGKILL with force). Only your own processes.",
			InputSchema: object(
				enum("action", "What to do.", "poll", "wait", "kill").must(),
				integer("pid", "The pid returned by sandbox_exec_background.", 2, 0, 0).must(),
				integer("timeout", "wait: seconds to wait (default 60, max 300).", 1, int(MaxWait/time.Second), int(DefaultWait/time.Second)),
				integer("tail_lines", "Log lines to return (default 40, max 200).", 1, MaxLogTail, DefaultLogTail),
				boolean("force", "kill: send SIGKILL instead of SIGTERM."),
			),
			Destructive: true,
		},
		gate: gateBackground, service: serviceExec, bind: bind(process),
	},
	{
		Spec: Spec{
			Name: "sandbox_install",
			Description: "Install system packages with the sandbox's package manager (apt on Debian, apk on Alpine), as root. " +
				"Returns {installed, exit_code, output}. Installs of all agents run one at a time.",
			InputSchema: object(
				stringList("packages", "Package names, e.g. [\"jq\", \"ripgrep\"].", 1, MaxPackages).must(),
			),
			Idempotent: true, OpenWorld: true,
		},
		gate: gateAutonomous, service: serviceInstall, command: true, bind: bind(installSystem),
	},
	{
		Spec: Spec{
			Name: "sandbox_pip_install",
			Description: "Install Python packages into your own virtual environment ~/.venv (created on first use). " +
				"python3 and pip in sandbox_exec then use it. With cwd, install into that project folder's virtual environment " +
				"(its .venv or venv; .venv is created when it has none). Needs python3 with venv and pip (packages python3 and py3-pip on Alpine, " +
				"python3 and python3-venv on Debian). Returns {installed, exit_code, output, venv}.",
			InputSchema: object(
				stringList("packages", "Requirement specifiers, e.g. [\"requests\", \"numpy==2.1.0\"].", 1, MaxPackages).must(),
				str("cwd", "A project folder whose virtual environment gets the packages; default: your ~/.venv. "+pathHelp),
			),
			Idempotent: true, OpenWorld: true,
		},
		gate: gateAutonomous, service: serviceInstall, command: true, bind: bind(installPip),
	},
	{
		Spec: Spec{
			Name: "sandbox_npm_install",
			Description: "Install Node.js packages globally into your own prefix ~/.npm-global (its bin is on PATH in sandbox_exec), " +
				"or with cwd into that project folder (its node_modules and package.json, as `npm install` there). " +
				"Needs node and npm (packages nodejs and npm). Returns {installed, exit_code, output, prefix}.",
			InputSchema: object(
				stringList("packages", "Package specs, e.g. [\"typescript\", \"@scope/pkg@1.2.3\"].", 1, MaxPackages).must(),
				str("cwd", "A project folder to install into (its node_modules); default: global, into ~/.npm-global. "+pathHelp),
			),
			Idempotent: true, OpenWorld: true,
		},
		gate: gateAutonomous, service: serviceInstall, command: true, bind: bind(installNpm),
	},
	{
		Spec: Spec{
			Name: "sandbox_run_script",
			Description: "Run a script file with python3, bash, sh or node, picked by its #! line or extension (.py, .sh, .bash, .js); " +
				"each interpreter but sh needs its package (python3, bash, nodejs). With session, it runs in that shell session of sandbox_exec. " +
				"Returns {stdout, stderr, combined, exit_code, cwd, language}; timeout default 60 s, max 300. " + pathHelp,
			InputSchema: object(
				str("path", "The script.").must(),
				stringList("args", "Arguments for the script.", 0, 100),
				str("cwd", "Working directory; default your home."),
				integer("timeout", "Seconds before the script is killed (default 60, max 300).", 1, int(MaxExecTimeout/time.Second), int(DefaultScriptTimeout/time.Second)),
				str("session", "Run it in this shell session of sandbox_exec (its directory, variables, activated venv)."),
			),
			Destructive: true, OpenWorld: true,
		},
		gate: gateAutonomous, service: serviceExec, command: true, bind: bind(runScript),
	},
}
