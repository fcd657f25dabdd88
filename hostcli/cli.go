// Package hostcli is the osaurus-sandbox command line.
package hostcli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/internal/explain"
	"github.com/osaurus/osaurus-sandbox/remotes"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

// Exit codes.
const (
	ExitOK         = 0
	ExitError      = 1 // the operation failed
	ExitUsage      = 2 // bad command line
	ExitNotRunning = 3 // needs a running VM (errors of class agentproto.ErrUnavailable)
	ExitDiagFailed = 4 // diagnostics ran, something failed
	ExitDeclined   = 5 // a confirmation was declined
)

const usage = `osaurus-sandbox: a Linux VM where AI agents run code without touching your computer.

Usage: osaurus-sandbox [command] [flags]

With no command, the management window opens.

Day one:
  provision             download the Linux kernel and filesystem and build the VM (once)
  start                 start the VM (provisions first when needed)
  diagnostics [--agent NAME] [--json]
                        check exec, network, each agent's user, packages and the bridge
  status [--json]       show the VM's state
  stop                  shut the VM down gracefully

Using the VM:
  exec [--user U] [--timeout D] -- CMD [ARG...]
                        run a command in the VM and print its output
  shell [AGENT] [--workdir DIR]
                        a terminal in the VM as the agent (its limits), or root
  logs [-f]             show the VM console log (-f follows it)

Agents (each is a Linux user in the VM; its tools reach MCP clients):
  agent add NAME        add an agent (autonomous exec off)
  agent list [--json]   list agents
  agent show NAME       settings, and the config for Claude Desktop and Claude Code
  agent connect NAME --client claude-desktop|claude-code|cursor|vscode|generic [--dry-run]
                        add the agent to the client's config file (shown first, backed up)
  agent set NAME KEY VALUE
                        change a setting: enabled, maxCommandsPerTurn, backgroundProcesses, ...
  agent remove NAME [--purge [--yes]]
                        remove an agent and its Linux user (--purge: its home too)
  mcp --agent NAME      serve the agent's tools over stdio (what MCP clients run)
  secret set AGENT KEY  store an agent's secret (OS keychain, or secretStore file) from stdin
  secret list AGENT [--json]
                        list an agent's secret names
  secret remove AGENT KEY
                        delete an agent's secret
  logs --agent NAME     show what the agent logged with "osaurus-host log"
  run --agent NAME "TASK"
                        work a task with the configured model (inferenceUrl) and the
                        agent's tools, printing each step
  task list|show ID|cancel ID [--json]
                        the runner's tasks (also those agents dispatched)

  memory list|search|remove --agent NAME [--json]
                        an agent's memory (osaurus-host agent memory store)
  events [--follow] [--agent NAME] [--json]
                        events agents emit (osaurus-host events emit)

Projects (your folders; each agent granted one works on its own view of it):
  project add PATH [--name NAME]   project list [--json]   project remove NAME
  agent set AGENT projects a,b     grant projects (the agent sees /workspace/projects/NAME)
  changes AGENT PROJECT [--json]   what the agent changed: added, modified, deleted, diffs
  apply AGENT PROJECT [--yes] [--force] [PATHS...]
                        write its changes into your folder (files you changed meanwhile
                        need --force; links, devices and set-uid files are never applied)
  discard AGENT PROJECT [--yes] [PATHS...]
                        drop its changes

Previews (an agent's server, opened on this computer's loopback by its sandbox_expose_port tool):
  ports [--json]        the open previews: agent, its port, the URL here

Network (each agent's policy is its "network" setting; see agent set):
  network log [--follow] [--json] [--agent NAME]
                        every connection the policy refused: agent, destination, port, time

Plugins (JSON recipes: packages, files and tools for agents):
  plugin import SOURCE  from a file, an https:// URL or github.com/OWNER/REPO
  plugin list [--json]  the library; also show, export, duplicate, update, remove

Settings (sandbox.json):
  config get [KEY]      show one setting or all
  config set KEY VALUE  change a setting
  config reset [KEY]    put a setting (or every one) back to its default

Starting over (your workspace, output and agents' homes are always kept):
  reset [--yes]         delete the VM's disk, kernel and init filesystem, then provision again
  remove [--yes]        delete every VM file, including downloads

Other machines (docs/remote.md):
  context add NAME ssh://[user@]host[:port] [--data-dir PATH]
                        a sandbox on another machine, reached with your ssh
  context list|use NAME|check NAME|remove NAME
  --context NAME COMMAND
                        run COMMAND against that context (or OSAURUS_SANDBOX_CONTEXT)

Other:
  serve                 run without a window, owning the VM (autoStart applies)
  completion bash|zsh|fish
                        print a shell completion script
  version, --version    print the version
  help COMMAND          one command's description, flags and example (also COMMAND --help)

Exit codes: 0 ok, 1 failed, 2 bad usage, 3 VM not running, 4 diagnostics failed,
5 confirmation declined.
Files live in %s (set %s to move them).
`

// Version is set at build time.
var Version = "dev"

// Owner is what the command line can't do over the control socket: be
// the VM's owner (the window, `serve`, and stopping a VM whose owner
// died). cmd/osaurus-sandbox passes the host package's; the zero Owner
// makes those commands fail.
type Owner struct {
	// GUI opens the window on the context named (remotes.Local: this
	// machine's data folder p); a UsageError prints the usage.
	GUI func(ctx context.Context, p config.Paths, contextName string, stderr io.Writer) error
	// Serve runs a headless owner until a signal or a Quit request.
	Serve func(ctx context.Context, p config.Paths, background bool, version string) error
	// StopOrphan adopts and stops a VM nobody owns, returning its pid.
	StopOrphan func(ctx context.Context, p config.Paths, logf func(string, ...any)) (int, error)
	// Probe describes the sandbox when no process owns it: the state on
	// disk, or a VM a dead owner left running.
	Probe func(p config.Paths) api.Status
	// Helpers are the data folder's VM processes (QEMU, virtiofsd) still
	// running.
	Helpers func(p config.Paths) []int
	// OpenData makes this process a short-lived owner of the data files
	// (no VM, no MCP) when none runs; api.ErrOwned when one does.
	OpenData func(ctx context.Context, p config.Paths, logf func(string, ...any)) (api.Controller, error)
}

// owner is the owner of the data folder for a command that changes its
// data: the running owner over the control socket, or, when none runs,
// this process for the command's duration. Every write to the data files
// goes through it. The caller closes it. Through a remote context it is
// the far side's owner, and nothing here is opened.
func (c *cli) owner(ctx context.Context) (api.Controller, error) {
	if c.remote != nil {
		return c.farOwner(ctx)
	}
	for range 3 { // an owner may start or end between the two tries
		cl, err := client.Dial(ctx, c.paths)
		if err == nil {
			return cl, nil
		}
		if !errors.Is(err, api.ErrNoOwner) {
			return nil, err
		}
		if c.own.OpenData == nil {
			return nil, errors.New("this build can't own the data folder")
		}
		h, err := c.own.OpenData(ctx, c.paths, func(f string, a ...any) { fmt.Fprintf(c.err, f+"\n", a...) })
		if !errors.Is(err, api.ErrOwned) {
			return h, err
		}
	}
	return nil, api.ErrOwned
}

// probe is the status of a data folder nobody owns.
func (c *cli) probe() api.Status {
	if c.own.Probe == nil {
		return api.Status{Owner: "none"}
	}
	return c.own.Probe(c.paths)
}

// UsageError: the command can't run as asked (the window without a
// display); Main prints it and the usage.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Main runs the command line and returns the exit code. args excludes the
// program name.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, own Owner) int {
	paths, err := config.DefaultPaths()
	if err != nil {
		fmt.Fprintln(stderr, "osaurus-sandbox:", err)
		return ExitError
	}
	ctxFlag, dataDir, args, err := globalFlags(args) // remote.go
	if err != nil {
		fmt.Fprintln(stderr, "osaurus-sandbox:", err)
		return ExitUsage
	}
	if dataDir != "" {
		if paths.Root, err = filepath.Abs(dataDir); err != nil {
			fmt.Fprintln(stderr, "osaurus-sandbox: --data-dir:", err)
			return ExitUsage
		}
	}
	if len(args) == 0 {
		c := &cli{paths: paths, in: stdin, out: stdout, err: stderr, own: own, sec: secrets.ForDataDir(paths)}
		return c.gui(ctxFlag)
	}
	switch {
	case args[0] == "help" && len(args) > 1:
		if wantsHelp(args[1:2]) {
			args = []string{"help", "help"}
		}
		h, ok := findHelp(args[1:]...)
		if !ok {
			fmt.Fprintf(stderr, "osaurus-sandbox: no help on %q; run `osaurus-sandbox help` for the commands\n", strings.Join(args[1:], " "))
			return ExitUsage
		}
		h.write(stdout)
		return ExitOK
	case args[0] == "help" || args[0] == "-h" || args[0] == "--help":
		fmt.Fprintf(stdout, usage, paths.Root, config.HomeEnv)
		return ExitOK
	case args[0] == "--version" || args[0] == "-version":
		fmt.Fprintln(stdout, "osaurus-sandbox", Version)
		return ExitOK
	case wantsHelp(args[1:]):
		if h, ok := findHelp(commandWords(args[0], args[1:])...); ok {
			h.write(stdout)
			return ExitOK
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	c := &cli{paths: paths, in: stdin, out: stdout, err: stderr, own: own, sec: secrets.ForDataDir(paths)}
	cmd, rest := args[0], args[1:]
	run, ok := c.commands()[cmd]
	if !ok {
		fmt.Fprintf(stderr, "osaurus-sandbox: unknown command %q; run `osaurus-sandbox help`\n", cmd)
		return ExitUsage
	}
	return c.withContext(cmd, ctxFlag, run)(ctx, rest)
}

// commands are the command line's commands by name.
func (c *cli) commands() map[string]func(context.Context, []string) int {
	return map[string]func(context.Context, []string) int{
		"provision":   c.lifecycle(api.OpProvision, "Provisioning"),
		"start":       c.lifecycle(api.OpStart, "Starting"),
		"stop":        c.stop,
		"suspend":     c.lifecycle(api.OpSuspend, "Suspending"),
		"resume":      c.lifecycle(api.OpResume, "Resuming"),
		"checkpoint":  c.checkpoint,
		"reset":       c.confirmed(api.OpReset, "Reset deletes the VM's root disk (packages installed in it), kernel and init filesystem, then provisions again.\nKept: workspace, output, agents' homes and the download cache; the current state is saved first as a checkpoint (setting safetyCheckpoints)."),
		"remove":      c.confirmed(api.OpRemove, "Remove deletes every VM file: root disk, kernel, init filesystem and downloads.\nKept: workspace, output and agents' homes."),
		"status":      c.status,
		"diagnostics": c.diagnostics,
		"exec":        c.exec,
		"shell":       c.shell,
		"logs":        c.logs,
		"config":      c.config,
		"serve":       c.serve,
		"agent":       c.agent,
		"secret":      c.secret,
		"mcp":         c.mcp,
		"plugin":      c.plugin,
		"network":     c.network,
		"task":        c.task,
		"run":         c.run,
		"memory":      c.memory,
		"events":      c.events,
		"completion":  c.completion,
		"project":     c.project,
		"changes":     c.changes,
		"apply":       c.applyOrDiscard(false),
		"discard":     c.applyOrDiscard(true),
		"ports":       c.ports,
		"context":     c.contextCmd, // remote.go
		"dial-stdio":  c.dialStdio,
		"remote-info": c.remoteInfo,
		"version":     func(context.Context, []string) int { fmt.Fprintln(c.out, "osaurus-sandbox", Version); return ExitOK },
	}
}

type cli struct {
	paths    config.Paths
	in       io.Reader
	lines    *bufio.Reader // over in, for the answers to questions
	out, err io.Writer
	own      Owner
	sec      *secrets.Store   // the OS keychain
	remote   *remotes.Context // the sandbox is on another machine (remote.go)
	far      *client.Client   // its owner, once dialled (farOwner)
}

// gui opens the window on the context --context, OSAURUS_SANDBOX_CONTEXT
// or the current one names: for this machine, this process owns the VM
// unless another process (a `serve` daemon) already does, and then the
// window drives that one; for a remote context, the far side's owner.
func (c *cli) gui(ctxFlag string) int {
	if c.own.GUI == nil {
		return c.fail(errors.New("this build has no window"))
	}
	rc, remote, err := c.contextStore().Select(ctxFlag, os.Getenv(remotes.Env))
	if err != nil {
		return c.fail(err)
	}
	name := remotes.Local
	if remote {
		name = rc.Name
	}
	err = c.own.GUI(context.Background(), c.paths, name, c.err)
	var ue UsageError
	if errors.As(err, &ue) {
		fmt.Fprintf(c.err, "osaurus-sandbox: %v\n\n", ue.Err)
		fmt.Fprintf(c.out, usage, c.paths.Root, config.HomeEnv)
		return ExitUsage
	}
	if err != nil {
		return c.fail(err)
	}
	return ExitOK
}

func (c *cli) fail(err error) int {
	// A known error is a sentence with the fix, the raw text below it.
	fmt.Fprintln(c.err, "osaurus-sandbox:", explain.Text(err))
	return exitCode(err)
}

// exitCode is the exit code of a failed command, by the error's class
// alone (agentproto.Class): host sentinels such as control.ErrNotRunning
// and api.ErrNoOwner are of agentproto.ErrUnavailable, and a guest session
// that ended is the VM gone too.
func exitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, secrets.ErrUnavailable):
		// No keychain is not "the VM is not running", which 3 promises.
		return ExitError
	case errors.Is(err, agentproto.ErrUnavailable), errors.Is(err, agentproto.ErrSessionEnded):
		return ExitNotRunning
	}
	return ExitError
}

func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(flagErrors{c.err})
	// The command's help, which leaves internal flags out, instead of
	// the flag package's list of every flag.
	fs.Usage = func() {
		if h, ok := findHelp(strings.Fields(name)...); ok {
			fmt.Fprintln(c.err)
			h.write(c.err)
		}
	}
	return fs
}

// flagErrors words the flag package's errors as the help spells flags:
// "unknown flag --bogus", not "flag provided but not defined: -bogus".
type flagErrors struct{ w io.Writer }

func (f flagErrors) Write(p []byte) (int, error) {
	s := string(p)
	if rest, ok := strings.CutPrefix(s, "flag provided but not defined: -"); ok {
		s = "unknown flag --" + strings.TrimPrefix(rest, "-")
	} else if rest, ok := strings.CutPrefix(s, "flag needs an argument: -"); ok {
		s = "flag --" + strings.TrimSuffix(strings.TrimPrefix(rest, "-"), "\n") + " needs a value\n"
	}
	if _, err := io.WriteString(f.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}

// lifecycle runs a lifecycle op through the owner with a progress line.
func (c *cli) lifecycle(op api.Op, verb string) func(context.Context, []string) int {
	return func(ctx context.Context, args []string) int {
		if fs := c.flags(string(op)); fs.Parse(args) != nil || fs.NArg() > 0 {
			return ExitUsage
		}
		if op != api.OpStop {
			c.noteBackgroundOwner(ctx, "this command")
		}
		cl, err := c.connect(ctx)
		if err != nil {
			return c.fail(err)
		}
		defer cl.Close()
		bar := newProgressBar(c.err)
		st, err := cl.Lifecycle(ctx, op, bar.update)
		bar.finish()
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintln(c.out, describe(st))
		return ExitOK
	}
}

func (c *cli) confirmed(op api.Op, warning string) func(context.Context, []string) int {
	return func(ctx context.Context, args []string) int {
		fs := c.flags(string(op))
		yes := fs.Bool("yes", false, "don't ask for confirmation")
		if fs.Parse(args) != nil || fs.NArg() > 0 {
			return ExitUsage
		}
		if !*yes && !c.confirm(warning) {
			return ExitDeclined
		}
		return c.lifecycle(op, "")(ctx, nil)
	}
}

// confirm shows warning and asks the user to type yes: the one question
// every destructive command asks unless given --yes. No answer (stdin
// closed, as in a script) is a no, with the hint.
func (c *cli) confirm(warning string) bool {
	fmt.Fprintf(c.err, "%s\nType yes to continue: ", warning)
	line, err := c.line()
	switch {
	case strings.TrimSpace(line) == "yes":
		return true
	case err != nil && strings.TrimSpace(line) == "":
		fmt.Fprintln(c.err, "\nNothing was changed: there was no answer on stdin. Pass --yes to confirm without the question.")
	default:
		fmt.Fprintln(c.err, "Nothing was changed.")
	}
	return false
}

// line reads one answer from stdin; one reader for every question, so a
// second question gets the second line.
func (c *cli) line() (string, error) {
	if c.lines == nil {
		c.lines = bufio.NewReader(c.in)
	}
	return c.lines.ReadString('\n')
}

func (c *cli) stop(ctx context.Context, args []string) int {
	if fs := c.flags("stop"); fs.Parse(args) != nil || fs.NArg() > 0 {
		return ExitUsage
	}
	cl, err := c.dial(ctx)
	if errors.Is(err, api.ErrNoOwner) {
		// No owner, but its VM may have outlived it: adopt and stop it.
		if c.own.StopOrphan == nil {
			return c.fail(errors.New("this build can't own the VM"))
		}
		pid, err := c.own.StopOrphan(ctx, c.paths, func(f string, a ...any) { fmt.Fprintf(c.err, f+"\n", a...) })
		if errors.Is(err, api.ErrOwned) {
			return c.stop(ctx, nil) // an owner appeared meanwhile: ask it
		}
		if err != nil {
			return c.fail(err)
		}
		if pid != 0 {
			fmt.Fprintf(c.out, "stopped (the VM, pid %d, left running by an osaurus-sandbox process that exited)\n", pid)
		} else {
			fmt.Fprintln(c.out, "stopped")
		}
		return ExitOK
	}
	if err != nil {
		return c.fail(err)
	}
	defer cl.Close()
	st, err := cl.Status(ctx)
	if err != nil {
		return c.fail(err)
	}
	// A background owner exists only for the CLI's sake: stopping the VM
	// ends it too.
	if st.Owner == "background" {
		if err := cl.Quit(ctx); err != nil {
			return c.fail(err)
		}
		if c.own.Helpers != nil && c.remote == nil {
			if left := c.own.Helpers(c.paths); len(left) > 0 {
				return c.fail(fmt.Errorf("%w, and the sandbox's QEMU or virtiofsd still run (pids %v): run osaurus-sandbox stop again", api.ErrOwnerGone, left))
			}
		}
		fmt.Fprintln(c.out, "stopped")
		return ExitOK
	}
	bar := newProgressBar(c.err)
	st2, err := cl.Lifecycle(ctx, api.OpStop, bar.update)
	bar.finish()
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintln(c.out, describe(st2))
	return ExitOK
}

func (c *cli) status(ctx context.Context, args []string) int {
	fs := c.flags("status")
	asJSON := fs.Bool("json", false, "print JSON")
	if fs.Parse(args) != nil || fs.NArg() > 0 {
		return ExitUsage
	}
	var st api.Status
	if cl, err := c.dial(ctx); err == nil {
		defer cl.Close()
		if st, err = cl.Status(ctx); err != nil {
			return c.fail(err)
		}
	} else if c.remote != nil {
		return c.fail(err) // nothing here describes the far side
	} else {
		// Nobody owns the sandbox: report what is there, including a VM
		// its dead owner left running.
		st = c.probe()
	}
	if *asJSON {
		json.NewEncoder(c.out).Encode(st)
		return ExitOK
	}
	fmt.Fprintln(c.out, describe(st.Status))
	if _, err := config.LoadSandbox(c.paths.SandboxJSON()); err != nil && c.remote == nil {
		fmt.Fprintln(c.out, "settings:", explain.Text(err))
	}
	if st.Reason != "" {
		fmt.Fprintln(c.out, "reason:", st.Reason)
	}
	if next := nextStep(st.State); next != "" {
		fmt.Fprintln(c.out, "next:", next)
	}
	if st.State == control.Running && st.AccelReason != "" {
		fmt.Fprintf(c.out, "accelerator: %s, because %s\n", st.Accel, st.AccelReason)
	}
	if c.remote != nil {
		fmt.Fprintf(c.out, "context: %s (%s)\n", c.remote.Name, c.remote.URL)
		return ExitOK
	}
	cfg, _ := config.LoadSandbox(c.paths.SandboxJSON())
	for _, l := range ownerLines(st, cfg.MCPAddr()) {
		fmt.Fprintln(c.out, l)
	}
	return ExitOK
}

// ownerLines say who owns the VM when that is a process the user didn't
// start by hand, and where MCP over HTTP is served: a changed mcpPort
// takes effect only when the owner starts again.
func ownerLines(st api.Status, addr string) []string {
	var out []string
	if st.Owner == "background" {
		out = append(out, backgroundOwnerLine(st.IdleExit))
	}
	switch {
	case st.MCPError != "":
		out = append(out, "mcp: "+st.MCPError)
	case st.MCPURL != "" && !strings.Contains(st.MCPURL, "//"+addr+"/"):
		out = append(out, "mcp: serving agents at "+st.MCPURL+", not at "+addr+" as mcpPort now says: restart the owner for the new port (`osaurus-sandbox stop`; the next command or tool call starts it again)")
	case st.MCPURL != "":
		out = append(out, "mcp: serving agents at "+st.MCPURL)
	}
	return out
}

// noteBackgroundOwner tells, on stderr, that a command about to connect
// will start a background owner, which outlives it, and how to end it.
func (c *cli) noteBackgroundOwner(ctx context.Context, what string) {
	if c.remote != nil {
		return // the far side's owner; dial-stdio starts it there
	}
	cl, err := client.Dial(ctx, c.paths)
	if err == nil {
		cl.Close()
		return
	}
	if errors.Is(err, api.ErrNoOwner) {
		fmt.Fprintf(c.err, "osaurus-sandbox: no app or `serve` owns the VM, so %s starts a background owner (`serve --background`); it keeps running after this command, serving MCP over HTTP, until `osaurus-sandbox stop` or until it is unused for backgroundIdleMinutes (`status` shows it)\n", what)
	}
}

// backgroundOwnerLine says what a background owner is and when it goes.
func backgroundOwnerLine(ie *api.IdleExit) string {
	l := "owner: a background osaurus-sandbox process (`serve --background`), started by the first command or MCP tool call that needed the VM; it serves MCP over HTTP and keeps the VM until `osaurus-sandbox stop`"
	switch {
	case ie == nil:
		return l + " (backgroundIdleMinutes is 0: it never exits by itself)"
	case ie.IdleSince != nil:
		at := ie.IdleSince.Add(time.Duration(ie.Minutes * float64(time.Minute)))
		return l + fmt.Sprintf(", or until it has been unused for %s (backgroundIdleMinutes): unused since %s, it stops the VM and exits at %s unless a client comes",
			minutes(ie.Minutes), ie.IdleSince.Local().Format(time.TimeOnly), at.Local().Format(time.TimeOnly))
	}
	return l + fmt.Sprintf(", or until it has been unused for %s (backgroundIdleMinutes: no client connected, no MCP request, the VM stopped or asleep); it is in use now", minutes(ie.Minutes))
}

// minutes is a setting's minutes for people.
func minutes(m float64) string {
	if m == 1 {
		return "1 minute"
	}
	return strconv.FormatFloat(m, 'g', -1, 64) + " minutes"
}

// nextStep says what to do in a state that needs the user.
func nextStep(s control.State) string {
	switch s {
	case control.NotProvisioned:
		return "nothing is provisioned yet: `osaurus-sandbox start` downloads the Linux image (once) and boots the VM; `osaurus-sandbox provision` only downloads"
	case control.Stopped:
		return "`osaurus-sandbox start` boots the VM"
	}
	return ""
}

func describe(st control.Status) string {
	s := string(st.State)
	switch {
	case st.State == control.Running && st.Unresponsive != nil:
		s += fmt.Sprintf(", NOT RESPONDING since %s (the guest agent doesn't answer; it is restarted if it stays so)", st.Unresponsive.Format(time.TimeOnly))
	case st.State == control.Running && st.SleepingSince != nil:
		s += fmt.Sprintf(" (%s %s, %s guest), sleeping since %s (paused in place: no CPU; the next call wakes it)",
			st.Driver, st.Accel, st.Distro, st.SleepingSince.Format(time.DateTime))
	case st.State == control.Running && st.Driver == "":
		// Adoptable: nobody is connected to it to know more.
		s += fmt.Sprintf(" (adoptable: no process owns it; pid %d, up since %s)", st.Pid, st.Since.Format(time.DateTime))
	case st.State == control.Running:
		s += fmt.Sprintf(" (%s %s, %s guest, up %s)", st.Driver, st.Accel, st.Distro, time.Since(st.Since).Round(time.Second))
	}
	return s
}

func (c *cli) diagnostics(ctx context.Context, args []string) int {
	fs := c.flags("diagnostics")
	asJSON := fs.Bool("json", false, "print JSON")
	agent := fs.String("agent", "", "run the agent-user check only as this agent (default: every agent)")
	if fs.Parse(args) != nil || fs.NArg() > 0 {
		return ExitUsage
	}
	// Without a running VM there is nothing to check: say so once
	// (exit 3), rather than starting an owner to fail every check.
	notRunningErr := fmt.Errorf("%w: start it with `osaurus-sandbox start`, then run diagnostics", control.ErrNotRunning)
	notRunning := func() int {
		if *asJSON {
			// A script reading stdout gets JSON here too: no checks, and why.
			json.NewEncoder(c.out).Encode(map[string]any{"running": false, "error": notRunningErr.Error(), "results": []diagnostics.Result{}})
		}
		return c.fail(notRunningErr)
	}
	cl, err := c.dial(ctx)
	if errors.Is(err, api.ErrNoOwner) {
		if c.probe().State != control.Running {
			return notRunning()
		}
		cl, err = client.Connect(ctx, c.paths) // adopts the VM left running
	}
	if err != nil {
		return c.fail(err)
	}
	defer cl.Close()
	if st, err := cl.Status(ctx); err != nil {
		return c.fail(err)
	} else if st.State != control.Running {
		return notRunning()
	}
	rs, err := cl.Diagnostics(ctx, *agent, func(r diagnostics.Result) {
		if !*asJSON {
			mark := map[diagnostics.Outcome]string{diagnostics.Pass: "PASS", diagnostics.Fail: "FAIL", diagnostics.NotAvailable: "N/A "}[r.Outcome]
			fmt.Fprintf(c.out, "%s  %-16s %6s  %s\n", mark, r.Name, r.Duration.Round(10*time.Millisecond), r.Detail)
			if r.Outcome != diagnostics.Pass && r.Hint != "" {
				fmt.Fprintf(c.out, "      hint: %s\n", r.Hint)
			}
		}
	})
	if err != nil {
		return c.fail(err)
	}
	if *asJSON {
		json.NewEncoder(c.out).Encode(rs)
	}
	for _, r := range rs {
		if r.Outcome == diagnostics.Fail {
			return ExitDiagFailed
		}
	}
	return ExitOK
}

func (c *cli) exec(ctx context.Context, args []string) int {
	if len(args) > 0 && isTTYFlag(args[0]) {
		return c.execTTY(ctx, args[1:])
	}
	fs := c.flags("exec")
	user := fs.String("user", "", "run as this Linux user (default root)")
	timeout := fs.Duration("timeout", 0, "kill the command after this long (e.g. 30s)")
	if fs.Parse(args) != nil || fs.NArg() == 0 {
		fmt.Fprintln(c.err, "usage: osaurus-sandbox exec [--user U] [--timeout D] -- CMD [ARG...]")
		return ExitUsage
	}
	cl, err := c.dial(ctx)
	if err != nil && c.remote != nil {
		return c.fail(err)
	}
	if err != nil {
		return c.fail(fmt.Errorf("%w: run `osaurus-sandbox start` first", control.ErrNotRunning))
	}
	defer cl.Close()
	req := agentproto.ExecRequest{Identity: agentproto.Identity{User: *user}, Argv: fs.Args(), TimeoutMillis: timeout.Milliseconds()}
	var stdin io.Reader
	if f, ok := c.in.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice == 0 {
			stdin = f // piped input goes to the command
		}
	}
	st, err := cl.Exec(ctx, req, stdin, c.out, c.err)
	if err != nil {
		return c.fail(err)
	}
	if st.TimedOut {
		fmt.Fprintf(c.err, "osaurus-sandbox: timed out after %s\n", *timeout)
	}
	return st.Code
}

func (c *cli) logs(ctx context.Context, args []string) int {
	fs := c.flags("logs")
	follow := fs.Bool("f", false, "follow the log")
	agent := fs.String("agent", "", "show this agent's log buffer (osaurus-host log) instead")
	if fs.Parse(args) != nil || fs.NArg() > 0 {
		return ExitUsage
	}
	if *agent != "" {
		return c.agentLogs(ctx, *agent)
	}
	if c.remote != nil {
		return c.farConsoleLog(ctx, *follow)
	}
	f, err := os.Open(c.paths.ConsoleLog())
	for errors.Is(err, os.ErrNotExist) {
		if !*follow {
			fmt.Fprintln(c.out, "the console log is empty: the VM has not booted in this data folder yet (`osaurus-sandbox start` boots it)")
			return ExitOK
		}
		select { // -f waits for the first boot
		case <-ctx.Done():
			return ExitOK
		case <-time.After(300 * time.Millisecond):
		}
		f, err = os.Open(c.paths.ConsoleLog())
	}
	if err != nil {
		return c.fail(err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() == 0 && !*follow {
		fmt.Fprintln(c.out, "the console log is empty")
		return ExitOK
	}
	for {
		if _, err := io.Copy(c.out, f); err != nil {
			return c.fail(err)
		}
		if !*follow {
			return ExitOK
		}
		select {
		case <-ctx.Done():
			return ExitOK
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// config shows and changes sandbox.json. A hand-edited file with a bad or
// unknown key doesn't lock the user out: get shows the good settings and
// each problem with its line, set and reset KEY repair it. A file that
// isn't JSON at all is named with the fix: get shows the defaults the
// app uses meanwhile, reset moves the file aside.
func (c *cli) config(ctx context.Context, args []string) int {
	if c.remote != nil {
		return c.configRemote(ctx, args)
	}
	path := c.paths.SandboxJSON()
	cfg, probs, err := config.LoadSandboxLenient(path)
	var damaged *config.DamagedError
	if err != nil && !errors.As(err, &damaged) {
		return c.fail(err)
	}
	report := func(probs []config.Problem) int {
		if damaged != nil {
			fmt.Fprintf(c.err, "osaurus-sandbox: %v\n(shown: the defaults, which the app uses until then)\n", damaged)
			return ExitError
		}
		if len(probs) == 0 {
			return ExitOK
		}
		fmt.Fprintf(c.err, "osaurus-sandbox: %s has problems; until they are fixed the app won't start the VM:\n%s\n", path, config.ProblemsText(probs))
		return ExitError
	}
	saved := func(old, next config.Sandbox, left []config.Problem) int {
		if next.NeedsRestart(old) {
			fmt.Fprintln(c.out, "saved; restart the VM for this to take effect (osaurus-sandbox stop && osaurus-sandbox start)")
		} else {
			fmt.Fprintln(c.out, "saved")
		}
		return report(left)
	}
	known := func(key string) bool { return slices.Contains(configKeys(), key) }
	unknown := func(key string) int {
		fmt.Fprintf(c.err, "osaurus-sandbox: config: unknown key %q; the keys are %s (`osaurus-sandbox config get` shows each with its values)\n", key, strings.Join(configKeys(), ", "))
		return ExitUsage
	}
	switch {
	case len(args) == 1 && args[0] == "get":
		c.printSettings(cfg)
		return report(probs)
	case len(args) == 2 && args[0] == "get":
		if !known(args[1]) {
			return unknown(args[1])
		}
		v, err := cfg.Get(args[1])
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintln(c.out, v)
		return report(probs)
	case len(args) == 3 && args[0] == "set":
		if !known(args[1]) {
			return unknown(args[1])
		}
		if damaged != nil {
			return c.fail(damaged)
		}
		old, next, left, err := config.SetKey(path, args[1], args[2])
		if err != nil && len(args[2]) > 80 {
			// A long value pasted by mistake is not echoed back whole.
			fmt.Fprintln(c.err, "osaurus-sandbox:", strings.ReplaceAll(explain.Text(err), strconv.Quote(args[2]), config.QuoteShort(args[2])))
			return exitCode(err)
		}
		if err != nil {
			return c.fail(err)
		}
		return saved(old, next, left)
	case len(args) == 1 && args[0] == "reset", len(args) == 2 && args[0] == "reset" && damaged != nil:
		// Every setting back to its default; the file is kept aside.
		aside, err := config.MoveAside(path)
		if err != nil {
			return c.fail(err)
		}
		if aside != "" {
			fmt.Fprintf(c.out, "moved %s to %s\n", path, aside)
		}
		fmt.Fprintln(c.out, "every setting is at its default; restart the VM for it to take effect if it runs (osaurus-sandbox stop && osaurus-sandbox start)")
		return ExitOK
	case len(args) == 2 && args[0] == "reset":
		old, next, left, err := config.ResetKey(path, args[1])
		if err != nil {
			if !known(args[1]) {
				return unknown(args[1])
			}
			return c.fail(err)
		}
		return saved(old, next, left)
	}
	fmt.Fprintln(c.err, "usage: osaurus-sandbox config get [KEY] | config set KEY VALUE | config reset [KEY]")
	return ExitUsage
}

// printSettings is `config get`: every key with its value and what it is.
func (c *cli) printSettings(cfg config.Sandbox) {
	w := 15
	for _, k := range config.KeyDocs() {
		w = max(w, len(k[0]))
	}
	for _, k := range config.KeyDocs() {
		v, _ := cfg.Get(k[0])
		fmt.Fprintf(c.out, "%-*s %-10s  # %s\n", w, k[0], v, k[1])
	}
}

func (c *cli) serve(ctx context.Context, args []string) int {
	fs := c.flags("serve")
	background := fs.Bool("background", false, "started by the CLI: no auto-start; `stop` ends it")
	if fs.Parse(args) != nil || fs.NArg() > 0 {
		return ExitUsage
	}
	if c.own.Serve == nil {
		return c.fail(errors.New("this build can't own the VM"))
	}
	if err := c.own.Serve(ctx, c.paths, *background, Version); err != nil {
		return c.fail(err)
	}
	return ExitOK
}

// farConsoleLog prints the far VM's console log, which is a file of that
// machine: the far owner streams it.
func (c *cli) farConsoleLog(ctx context.Context, follow bool) int {
	ctl, err := c.owner(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer ctl.Close()
	r, err := ctl.ConsoleLog(ctx, control.ConsoleLogRequest{Follow: follow})
	if errors.Is(err, agentproto.ErrNotFound) {
		fmt.Fprintln(c.out, "the console log is empty: the VM has not booted in that data folder yet (`osaurus-sandbox --context "+c.remote.Name+" start` boots it)")
		return ExitOK
	}
	if err != nil {
		return c.fail(err)
	}
	defer r.Close()
	stop := context.AfterFunc(ctx, func() { r.Close() })
	defer stop()
	if _, err := io.Copy(c.out, r); err != nil && ctx.Err() == nil {
		return c.fail(err)
	}
	return ExitOK
}
