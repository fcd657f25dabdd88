package hostcli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agents"
)

// cmdHelp is one command's --help: what it does in a line, how to call it,
// its flags and an example. Internal flags (serve --background) are not
// listed.
type cmdHelp struct {
	name    string // "status", or "agent add" for a subcommand
	summary string
	usage   []string
	flags   [][2]string // flag, what it does
	notes   []string    // prose after the usage: keys, what a flag accepts
	example []string
}

// helps is every command's help, in the order `help` lists them.
var helps = []cmdHelp{
	{name: "provision", summary: "download the Linux kernel and filesystem and build the VM (once)",
		usage: []string{"provision"}, example: []string{"osaurus-sandbox provision"}},
	{name: "start", summary: "start the VM (provisions first when needed)",
		usage: []string{"start"}, example: []string{"osaurus-sandbox start"}},
	{name: "stop", summary: "shut the VM down gracefully",
		usage: []string{"stop"}, example: []string{"osaurus-sandbox stop"}},
	{name: "suspend", summary: "pause the running VM in place (no CPU; memory kept); the next call wakes it",
		usage: []string{"suspend"}, example: []string{"osaurus-sandbox suspend", "osaurus-sandbox config set idleSuspendMinutes 15"}},
	{name: "resume", summary: "wake a suspended VM (any call to it does too) and set its clock",
		usage: []string{"resume"}, example: []string{"osaurus-sandbox resume"}},
	{name: "checkpoint", summary: "save and restore the sandbox: root disk, agents' homes and views, agents' settings",
		usage:   []string{"checkpoint create [NAME]", "checkpoint list [--json]", "checkpoint restore [--yes] NAME", "checkpoint remove NAME"},
		flags:   [][2]string{{"--json", "list: print JSON"}, {"--yes", "restore: don't ask for confirmation"}},
		example: []string{"osaurus-sandbox checkpoint create before-upgrade", "osaurus-sandbox checkpoint restore before-upgrade"}},
	{name: "status", summary: "show the VM's state, and where MCP over HTTP is served",
		usage: []string{"status [--json]"}, flags: [][2]string{{"--json", "print JSON"}},
		example: []string{"osaurus-sandbox status"}},
	{name: "diagnostics", summary: "check exec, network, agent users, packages and the bridge (the VM must run)",
		usage: []string{"diagnostics [--agent NAME] [--json]"}, flags: [][2]string{{"--agent NAME", "run the agent-user check only as this agent (default: as every agent)"}, {"--json", "print JSON"}},
		example: []string{"osaurus-sandbox diagnostics"}},
	{name: "exec", summary: "run a command in the VM and print its output",
		usage: []string{"exec [--user U] [--timeout D] -- CMD [ARG...]", "exec -it [AGENT] [--workdir DIR] -- CMD [ARG...]"},
		flags: [][2]string{{"--user U", "run as this Linux user (default root)"}, {"--timeout D", "kill the command after this long (e.g. 30s)"},
			{"-it", "on a terminal, as `shell` runs its shell (as AGENT with its limits, or root)"}},
		example: []string{"osaurus-sandbox exec -- uname -a", "osaurus-sandbox exec --user agent-alice --timeout 30s -- ls -la", "osaurus-sandbox exec -it alice -- top"}},
	{name: "shell", summary: "an interactive shell in the VM: as an agent (its user, namespaces and limits), or root without AGENT",
		usage:   []string{"shell [AGENT] [--workdir DIR]"},
		flags:   [][2]string{{"--workdir DIR", "start in this directory (default: the home)"}},
		example: []string{"osaurus-sandbox shell alice", "osaurus-sandbox shell alice --workdir /workspace/shared", "osaurus-sandbox shell"}},
	{name: "logs", summary: "show the VM console log, or an agent's log buffer",
		usage:   []string{"logs [-f]", "logs --agent NAME"},
		flags:   [][2]string{{"-f", "follow the console log"}, {"--agent NAME", "show what the agent logged with \"osaurus-host log\""}},
		example: []string{"osaurus-sandbox logs -f"}},
	{name: "agent", summary: "add, list, show, change, connect and remove agents (each is a Linux user in the VM)",
		usage: []string{"agent add NAME [--adopt-home | --purge-home]", "agent list [--json]", "agent show NAME [--json]", "agent set NAME KEY VALUE",
			"agent connect NAME --client " + clientIDs + " [--dry-run] [--yes]", "agent disconnect NAME [--client ID] [--yes]", "agent remove NAME [--purge] [--yes]", "agent repair"},
		example: []string{"osaurus-sandbox agent add alice", "osaurus-sandbox agent set alice enabled true", "osaurus-sandbox agent connect alice --client claude-code"}},
	{name: "agent add", summary: "add an agent (autonomous exec off)",
		usage:   []string{"agent add NAME [--adopt-home | --purge-home]"},
		flags:   [][2]string{{"--adopt-home", "give a home left by a removed agent of the same name, and its files, to the new agent"}, {"--purge-home", "delete a home left by a removed agent of the same name first"}},
		example: []string{"osaurus-sandbox agent add \"Data Analyst\""}},
	{name: "agent list", summary: "list agents with their settings and resource use",
		usage: []string{"agent list [--json]"}, flags: [][2]string{{"--json", "print JSON"}},
		example: []string{"osaurus-sandbox agent list"}},
	{name: "agent show", summary: "an agent's settings, resource use and the config for MCP clients",
		usage: []string{"agent show NAME [--json]"}, flags: [][2]string{{"--json", "print JSON"}},
		example: []string{"osaurus-sandbox agent show alice"}},
	{name: "agent connect", summary: "add the agent to an MCP client's config file (the change is shown and asked for first; the old file is backed up)",
		usage: []string{"agent connect NAME --client " + clientIDs + " [--dry-run] [--yes]"},
		flags: [][2]string{{"--client ID", "claude-desktop, claude-code (user scope), cursor, vscode, or generic (prints the stdio and HTTP snippets)"},
			{"--dry-run", "show the change and write nothing"}, {"--yes", "don't ask before writing"}},
		notes:   []string{"Through a remote context (--context NAME, OSAURUS_SANDBOX_CONTEXT or `context use`) the agent is the far side's and the entry runs `osaurus-sandbox --context NAME mcp --agent SLUG`: the client keeps using that machine whichever context is current later."},
		example: []string{"osaurus-sandbox agent connect alice --client claude-code", "osaurus-sandbox agent connect alice --client vscode --dry-run", "osaurus-sandbox --context box agent connect alice --client cursor"}},
	{name: "agent disconnect", summary: "remove the agent's entry from MCP clients' config files (each change is shown and asked for; the old file is backed up)",
		usage:   []string{"agent disconnect NAME [--client ID] [--yes]"},
		flags:   [][2]string{{"--client ID", "only this client (default: every client whose file has the entry)"}, {"--yes", "don't ask before writing"}},
		example: []string{"osaurus-sandbox agent disconnect alice", "osaurus-sandbox agent disconnect alice --client cursor"}},
	{name: "agent repair", summary: "rewrite a damaged agents.json with every agent still readable (the damaged file is kept beside it)",
		usage: []string{"agent repair"}, example: []string{"osaurus-sandbox agent repair"}},
	{name: "agent set", summary: "change a setting of an agent",
		usage: []string{"agent set NAME KEY VALUE"},
		notes: []string{"Keys: " + strings.Join(agents.SettingKeys, ", ") + ".",
			"backgroundKeepsAwake false: the agent's running processes (background jobs, servers) don't keep the VM from sleeping when idle (idleSuspendMinutes).",
			"network: none, outbound, or a comma-separated domain list (\"example.com,*.example.com\"); projects: comma-separated project names, or none; dispatchTo: comma-separated agents this one may dispatch tasks to, or none.",
			"Limits (diskGB, maxProcesses, memoryMB, cpuWeight): 0 restores the default."},
		example: []string{"osaurus-sandbox agent set alice network outbound"}},
	{name: "agent remove", summary: "remove an agent, its Linux user, its checkpoints and its secrets",
		usage:   []string{"agent remove NAME [--purge] [--yes]"},
		flags:   [][2]string{{"--purge", "also delete the agent's home directory and everything in it"}, {"--yes", "don't ask (to purge, or to remove its entries from MCP clients' config files)"}},
		example: []string{"osaurus-sandbox agent remove alice"}},
	{name: "mcp", summary: "serve an agent's tools over stdio (what MCP clients run)",
		usage: []string{"mcp --agent NAME"}, flags: [][2]string{{"--agent NAME", "the agent whose tools to serve (name, slug or id)"}},
		example: []string{"osaurus-sandbox mcp --agent alice"}},
	{name: "secret", summary: "store, list and remove an agent's secrets (OS keychain, or the file secretStore chooses)",
		usage:   []string{"secret set AGENT KEY", "secret list AGENT [--json]", "secret remove AGENT KEY", "secret set|remove --app INFERENCE_API_KEY"},
		flags:   [][2]string{{"--json", "list: print JSON"}, {"--app", "the app's own secret (the model server's API key)"}},
		example: []string{"printf %s sk-... | osaurus-sandbox secret set alice OPENAI_API_KEY"}},
	{name: "run", summary: "work a task with the configured model (inferenceUrl) and the agent's tools",
		usage: []string{"run --agent NAME \"TASK\""}, flags: [][2]string{{"--agent NAME", "the agent whose tools to use"}},
		example: []string{"osaurus-sandbox run --agent alice \"count the lines of /etc/passwd\""}},
	{name: "task", summary: "the agent runner's tasks: list, show, cancel",
		usage:   []string{"task list [--agent NAME] [--json]", "task show ID [--json]", "task cancel ID"},
		flags:   [][2]string{{"--agent NAME", "list: only this agent's tasks"}, {"--json", "print JSON"}},
		example: []string{"osaurus-sandbox task list"}},
	{name: "memory", summary: "an agent's memory (osaurus-host agent memory store): list, search, remove",
		usage:   []string{"memory list --agent NAME [--limit N] [--json]", "memory search --agent NAME [--json] TEXT", "memory remove --agent NAME ID | --all"},
		flags:   [][2]string{{"--agent NAME", "the agent"}, {"--limit N", "list: at most this many, newest first"}, {"--all", "remove: every entry of the agent"}, {"--json", "print JSON"}},
		example: []string{"osaurus-sandbox memory search --agent alice invoices"}},
	{name: "events", summary: "events agents emit (osaurus-host events emit)",
		usage:   []string{"events [--follow] [--agent NAME] [--last N] [--json]"},
		flags:   [][2]string{{"--follow, -f", "keep printing events as they are emitted"}, {"--agent NAME", "only this agent's events"}, {"--last N", "start with at most this many past events (default 50, 0: all)"}, {"--json", "one JSON object per line"}},
		example: []string{"osaurus-sandbox events --follow --agent alice"}},
	{name: "network", summary: "every connection an agent's network policy refused",
		usage:   []string{"network log [--follow] [--json] [--agent NAME]"},
		flags:   [][2]string{{"--follow", "keep printing refusals as they happen"}, {"--agent NAME", "only this agent's refusals"}, {"--json", "one JSON object per line"}},
		example: []string{"osaurus-sandbox network log --agent alice"}},
	{name: "plugin", summary: "the plugin library: import, list, show, export, duplicate, update, install, uninstall, remove, repair",
		usage:   pluginHelpLines(true),
		notes:   pluginHelpLines(false),
		flags:   [][2]string{{"--agent NAME", "install, uninstall: the agent"}, {"--yes", "accept the secrets and network the recipe gets"}, {"--json", "print JSON"}},
		example: []string{"osaurus-sandbox plugin import github.com/OWNER/REPO", "osaurus-sandbox plugin install my-plugin --agent alice"}},
	{name: "project", summary: "your folders agents work on, each agent on a view of its own: add, list, remove, repair",
		usage:   []string{"project add PATH [--name NAME]", "project list [--json]", "project remove NAME", "project repair", "agent set AGENT projects NAME[,NAME...]"},
		flags:   [][2]string{{"--name NAME", "add: the project's name (default: the folder's name)"}, {"--json", "list: print JSON"}},
		example: []string{"osaurus-sandbox project add ~/src/site", "osaurus-sandbox agent set alice projects site"}},
	{name: "project repair", summary: "rewrite a damaged projects.json with every project still readable (the damaged file is kept beside it; your folders are not touched)",
		usage: []string{"project repair"}, example: []string{"osaurus-sandbox project repair"}},
	{name: "changes", summary: "what an agent changed in its view of a project: added, modified, deleted, diffs",
		usage: []string{"changes AGENT PROJECT [--json]"}, flags: [][2]string{{"--json", "print JSON"}},
		example: []string{"osaurus-sandbox changes alice site"}},
	{name: "apply", summary: "write an agent's changes to a project into your folder",
		usage: []string{"apply AGENT PROJECT [--review ID] [--yes] [--force] [--allow-exec-paths] [--allow-large] [PATHS...]"},
		flags: [][2]string{{"--review ID", "apply exactly the review `changes` printed; anything changed since is refused"},
			{"--yes", "don't ask for confirmation"}, {"--force", "also write files changed in your folder since the agent's view was taken"},
			{"--allow-exec-paths", "also write paths that run code on your computer (shell rc files, .vscode/, CI workflows...)"},
			{"--allow-large", "also write files bigger than 64 MB"}},
		example: []string{"osaurus-sandbox apply alice site --review ID README.md"}},
	{name: "discard", summary: "drop an agent's changes to a project",
		usage: []string{"discard AGENT PROJECT [--yes] [PATHS...]"}, flags: [][2]string{{"--yes", "don't ask for confirmation"}},
		example: []string{"osaurus-sandbox discard alice site"}},
	{name: "ports", summary: "the open previews (an agent's server on this computer's loopback), and closing them",
		usage: []string{"ports [--json]", "ports close [AGENT [PORT]]"}, flags: [][2]string{{"--json", "print JSON"}},
		example: []string{"osaurus-sandbox ports", "osaurus-sandbox ports close alice 8000"}},
	{name: "config", summary: "show and change settings (sandbox.json)",
		usage:   []string{"config get [KEY]", "config set KEY VALUE", "config reset [KEY]"},
		notes:   []string{"Keys: " + strings.Join(configKeys(), ", ") + ".", "`config get` shows each with its allowed values; `config reset` with no KEY puts every setting back to its default, keeping the old file as sandbox.json.bak-TIME (a damaged one as .damaged-TIME)."},
		example: []string{"osaurus-sandbox config set cpus 4", "osaurus-sandbox config reset mcpPort"}},
	{name: "reset", summary: "delete the VM's disk, kernel and init filesystem, then provision again (workspace and homes are kept)",
		usage: []string{"reset [--yes]"}, flags: [][2]string{{"--yes", "don't ask for confirmation"}},
		example: []string{"osaurus-sandbox reset --yes"}},
	{name: "remove", summary: "delete every VM file, including downloads (workspace and homes are kept)",
		usage: []string{"remove [--yes]"}, flags: [][2]string{{"--yes", "don't ask for confirmation"}},
		example: []string{"osaurus-sandbox remove"}},
	{name: "serve", summary: "run without a window, owning the VM (autoStart applies)",
		usage: []string{"serve"}, example: []string{"osaurus-sandbox serve"}},
	{name: "completion", summary: "print a shell completion script for bash, zsh or fish",
		usage:   []string{"completion bash|zsh|fish"},
		example: []string{"source <(osaurus-sandbox completion bash)", "osaurus-sandbox completion fish > ~/.config/fish/completions/osaurus-sandbox.fish"}},
	{name: "version", summary: "print the version",
		usage: []string{"version", "--version"}, example: []string{"osaurus-sandbox version"}},
	{name: "help", summary: "the overview, or one command's help",
		usage: []string{"help [COMMAND [SUBCOMMAND]]"}, example: []string{"osaurus-sandbox help agent add"}},
}

// findHelp returns the help of "cmd sub" when there is one, else of cmd.
func findHelp(words ...string) (cmdHelp, bool) {
	for n := min(len(words), 2); n > 0; n-- {
		name := strings.Join(words[:n], " ")
		if i := slices.IndexFunc(helps, func(h cmdHelp) bool { return h.name == name }); i >= 0 {
			return helps[i], true
		}
	}
	return cmdHelp{}, false
}

func (h cmdHelp) write(w io.Writer) {
	fmt.Fprintf(w, "osaurus-sandbox %s: %s\n\nUsage:\n", h.name, h.summary)
	for _, u := range h.usage {
		if u == "" {
			continue
		}
		fmt.Fprintf(w, "  osaurus-sandbox %s\n", strings.TrimSpace(u))
	}
	if len(h.notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range h.notes {
			fmt.Fprintln(w, n)
		}
	}
	if len(h.flags) > 0 {
		fmt.Fprintln(w, "\nFlags:")
		for _, f := range h.flags {
			fmt.Fprintf(w, "  %-14s %s\n", f[0], f[1])
		}
	}
	fmt.Fprintln(w, "\nExample:")
	for _, e := range h.example {
		fmt.Fprintf(w, "  %s\n", e)
	}
	var subs []string
	for _, o := range helps {
		if sub, ok := strings.CutPrefix(o.name, h.name+" "); ok {
			subs = append(subs, sub)
		}
	}
	if len(subs) > 0 {
		fmt.Fprintf(w, "\nEach has its own help: osaurus-sandbox %s %s --help\n", h.name, strings.Join(subs, "|"))
	}
}

// wantsHelp reports whether args (after the command) ask for help: -h,
// -help or --help before a "--" (after it they are the command's own).
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// commandWords are the command and the subcommand args name, for help.
func commandWords(cmd string, args []string) []string {
	words := []string{cmd}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		words = append(words, args[0])
	}
	return words
}

// pluginHelpLines are pluginUsage's command lines (usage) or its prose
// (!usage), which must not be printed as commands.
func pluginHelpLines(usage bool) []string {
	var out []string
	for l := range strings.SplitSeq(strings.TrimPrefix(pluginUsage, "usage:\n"), "\n") {
		cmd, ok := strings.CutPrefix(l, "  osaurus-sandbox ")
		switch {
		case ok && usage:
			out = append(out, cmd)
		case !ok && !usage:
			out = append(out, l)
		}
	}
	return out
}
