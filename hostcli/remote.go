package hostcli

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/remotes"
)

// Remote contexts (docs/remote.md): a command drives the local sandbox
// or, through a context, one on another machine over the user's ssh.

// machineCommands are run by another machine's osaurus-sandbox over ssh,
// not typed: completion leaves them out.
var machineCommands = []string{"dial-stdio", "remote-info"}

func init() {
	subcommands["context"] = []string{"add", "list", "use", "check", "install", "remove"}
	helps = append(helps,
		cmdHelp{name: "context", summary: "name sandboxes on other machines (reached with your ssh) and choose the one commands drive",
			usage: []string{"context add NAME ssh://[user@]host[:port] [--data-dir PATH] [--remote-command CMD] [--ssh-arg ARG]...",
				"context list [--json]", "context use NAME|local", "context check NAME", "context install NAME [--path DIR]", "context remove NAME"},
			flags: [][2]string{{"--data-dir PATH", "add: the far side's data folder (default: its default)"},
				{"--remote-command CMD", "add: the far side's osaurus-sandbox, as its shell reads it (default: osaurus-sandbox on its PATH)"},
				{"--ssh-arg ARG", "add: an argument for ssh before the host, e.g. --ssh-arg=-F --ssh-arg=FILE (repeatable)"},
				{"--path DIR", "install: the far side's folder for the copy (default: ~/.local/bin there)"},
				{"--json", "list: print JSON"}},
			notes: []string{"Every command takes --context NAME before the command (or OSAURUS_SANDBOX_CONTEXT=NAME); the default is `local`, this machine.",
				"Through a remote context: status, provision, start, stop, suspend, resume, reset, remove, diagnostics, exec, shell, checkpoint, mcp --agent, agent, project (add uploads the folder), changes, apply (into this machine's folder), discard, memory, events, logs, plugin (import and a URL's update fetch here), config, ports, task, run, network and, with secretStore client there, secret work; serve runs only on the machine it serves (docs/remote.md).",
				"With no command (`--context NAME` alone, or a remote current context) the window opens on that context; its picker switches contexts without changing the current one."},
			example: []string{"osaurus-sandbox context add box ssh://me@box.lan", "osaurus-sandbox context install box", "osaurus-sandbox context use box", "osaurus-sandbox --context box status"}},
		cmdHelp{name: "dial-stdio", summary: "connect stdin and stdout to this machine's sandbox owner (what a remote context runs over ssh)",
			usage:   []string{"dial-stdio [--no-start]"},
			flags:   [][2]string{{"--no-start", "exit with code 3 when no owner runs, rather than starting a background owner"}},
			example: []string{"ssh box osaurus-sandbox dial-stdio"}},
		cmdHelp{name: "remote-info", summary: "describe this machine for `context add` on another: version, KVM or TCG, QEMU, free disk",
			usage: []string{"remote-info [--json]"}, flags: [][2]string{{"--json", "print JSON"}},
			example: []string{"ssh box osaurus-sandbox remote-info"}},
	)
}

// globalFlags takes --context NAME and --data-dir PATH off the front of
// args (before the command, where they can't be a command's own).
func globalFlags(args []string) (ctxName, dataDir string, rest []string, err error) {
	for len(args) > 0 {
		a := args[0]
		var name, val string
		switch {
		case a == "--context" || a == "--data-dir":
			if len(args) < 2 {
				return "", "", nil, fmt.Errorf("flag %s needs a value", a)
			}
			name, val, args = a, args[1], args[2:]
		case strings.HasPrefix(a, "--context="), strings.HasPrefix(a, "--data-dir="):
			name, val, _ = strings.Cut(a, "=")
			args = args[1:]
		default:
			return ctxName, dataDir, args, nil
		}
		if val == "" {
			return "", "", nil, fmt.Errorf("flag %s needs a value", name)
		}
		if name == "--context" {
			ctxName = val
		} else {
			dataDir = val
		}
	}
	return ctxName, dataDir, args, nil
}

// contextStore is contexts.json of this machine.
func (c *cli) contextStore() remotes.Store {
	return remotes.Store{Path: filepath.Join(c.paths.ConfigDir(), "contexts.json")}
}

// Commands by what a remote context does with them.
var (
	// over the control protocol, through dial-stdio on the far side
	remoteByControl = []string{"status", "provision", "start", "stop", "suspend", "resume", "reset", "remove", "diagnostics", "exec", "shell", "checkpoint", "mcp",
		"changes", "apply", "discard", "memory", "events",
		"logs", "config", "ports", "task", "run", "network",
		// this machine's store of the context's secrets, once its owner
		// says it keeps none (secretStore client)
		"secret"}
	// agent subcommands that read and change the far side's agents
	// through its owner (connect and disconnect edit this machine's MCP
	// client files, asking the far side only which agent is meant);
	// repair is a running far owner's: none can start on a damaged
	// agents.json, and then it says to repair it on that machine
	remoteAgentCmds = []string{"add", "list", "show", "set", "remove", "connect", "disconnect", "repair",
		"checkpoint", "checkpoints", "restore", "checkpoint-remove", "fork"}
	// plugin subcommands that read the far side's library and installs
	// through its owner (ctl.plugin_library) and change them there; import
	// and update fetch here and the owner validates the recipe as any
	// other (an update from a file is refused: the path is the far side's)
	remotePluginCmds = []string{"import", "update", "list", "show", "export", "duplicate", "install", "uninstall", "remove", "repair"}
	// about this machine or the contexts themselves
	contextFree = []string{"context", "dial-stdio", "remote-info", "version", "completion", "help"}
)

// withContext applies --context / OSAURUS_SANDBOX_CONTEXT / the current
// context to the command run: through a remote context it runs over ssh,
// or fails saying it can't yet.
func (c *cli) withContext(cmd, flagName string, run func(context.Context, []string) int) func(context.Context, []string) int {
	if slices.Contains(contextFree, cmd) {
		return run
	}
	rc, remote, err := c.contextStore().Select(flagName, os.Getenv(remotes.Env))
	if err != nil {
		return func(context.Context, []string) int { return c.fail(err) }
	}
	if !remote {
		return run
	}
	return func(ctx context.Context, args []string) int {
		what, ok := cmd, slices.Contains(remoteByControl, cmd)
		if cmd == "agent" && len(args) > 0 && slices.Contains(subcommands["agent"], args[0]) {
			// Named as the subcommand: the others of agent do work.
			what, ok = "agent "+args[0], slices.Contains(remoteAgentCmds, args[0])
		} else if cmd == "agent" {
			ok = true // its usage: no agent is read
		}
		if cmd == "plugin" && len(args) > 0 {
			what, ok = "plugin "+args[0], slices.Contains(remotePluginCmds, args[0])
		} else if cmd == "plugin" {
			ok = true // its usage
		}
		if cmd == "project" && len(args) > 0 {
			what, ok = "project "+args[0], slices.Contains(remoteProjectCmds, args[0])
		} else if cmd == "project" {
			ok = true
		}
		if !ok {
			if cmd == "serve" {
				// Not a gap: an owner serves the machine it runs on.
				return c.fail(fmt.Errorf("serve runs the owner of this machine's sandbox, not another's (context %s is chosen): run `serve` on that machine (ssh ... osaurus-sandbox serve), or serve this one with --context local; see docs/remote.md", rc.Name))
			}
			return c.fail(fmt.Errorf("%q doesn't work through a remote context yet (context %s): run it on that machine (ssh ... osaurus-sandbox %s), or choose this machine with --context local; see docs/remote.md", what, rc.Name, what))
		}
		c.remote = &rc
		defer c.closeFar()
		if cmd == "mcp" {
			return c.mcpRemote(ctx, args)
		}
		return run(ctx, args)
	}
}

// contextArg is "--context NAME " through a remote context, for the
// commands a message suggests.
func (c *cli) contextArg() string {
	if c.remote == nil {
		return ""
	}
	return "--context " + c.remote.Name + " "
}

// dialer reaches the context's owner with ssh and dial-stdio.
func (c *cli) dialer() client.Dialer {
	return c.remote.Dialer()
}

// farOwner is the remote context's owner for c.owner: one connection
// (one ssh) for the whole command, however many times it asks, closed
// when the command ends. A far side with no owner running starts one.
func (c *cli) farOwner(ctx context.Context) (api.Controller, error) {
	if c.far == nil {
		cl, err := client.Via(ctx, c.dialer())
		if err != nil {
			return nil, err
		}
		c.far = cl
	}
	return commandLong{c.far}, nil
}

func (c *cli) closeFar() {
	if c.far != nil {
		c.far.Close()
		c.far = nil
	}
}

// commandLong is a connection the command closes when it ends, not
// each caller.
type commandLong struct{ *client.Client }

func (commandLong) Close() {}

// farError is err from the far side's owner, saying which context it
// is; an owner too old for op is told to install this version there.
func (c *cli) farError(err error, op string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, agentproto.ErrUnsupported):
		return fmt.Errorf("context %s: the far side's osaurus-sandbox can't %s (%w): install this version there with `osaurus-sandbox context install %s`", c.remote.Name, op, err, c.remote.Name)
	}
	return fmt.Errorf("context %s (%s): %w", c.remote.Name, c.remote.URL, err)
}

// dial is client.Dial, through the remote context when one is chosen.
// A remote owner is started when none runs: there is nothing local to
// fall back on.
func (c *cli) dial(ctx context.Context) (*client.Client, error) {
	if c.remote != nil {
		return client.Via(ctx, c.dialer())
	}
	return client.Dial(ctx, c.paths)
}

// connect is client.Connect, through the remote context when one is
// chosen.
func (c *cli) connect(ctx context.Context) (*client.Client, error) {
	if c.remote != nil {
		return client.Via(ctx, c.dialer())
	}
	return client.Connect(ctx, c.paths)
}

func (c *cli) dialStdio(ctx context.Context, args []string) int {
	fs := c.flags("dial-stdio")
	noStart := fs.Bool("no-start", false, "don't start a background owner")
	if fs.Parse(args) != nil || fs.NArg() > 0 {
		return ExitUsage
	}
	// Not the signal context: ssh ending the session ends stdin, and
	// that ends the pipe.
	err := client.ServeStdio(context.Background(), c.paths, *noStart, c.in, c.out)
	if errors.Is(err, api.ErrNoOwner) {
		fmt.Fprintln(c.err, "osaurus-sandbox: no owner runs in", c.paths.Root)
		return client.ExitNoOwner
	}
	if err != nil {
		return c.fail(err)
	}
	return ExitOK
}

// RemoteInfo is what `remote-info --json` says about a machine.
type RemoteInfo struct {
	Version   string `json:"version"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	DataDir   string `json:"dataDir"`
	Accel     string `json:"accel"`               // kvm, tcg or hvf
	AccelNote string `json:"accelNote,omitempty"` // why not kvm
	QEMU      string `json:"qemu,omitempty"`      // its path ("" missing)
	DiskFree  uint64 `json:"diskFreeBytes"`       // in the data folder's file system
}

// minDisk is the free space `context add` asks for: the image, a root
// disk and checkpoints.
const minDisk = 10 << 30

func (c *cli) remoteInfo(ctx context.Context, args []string) int {
	fs := c.flags("remote-info")
	asJSON := fs.Bool("json", false, "print JSON")
	if fs.Parse(args) != nil || fs.NArg() > 0 {
		return ExitUsage
	}
	in := RemoteInfo{Version: Version, OS: runtime.GOOS, Arch: runtime.GOARCH, DataDir: c.paths.Root}
	switch runtime.GOOS {
	case "darwin":
		in.Accel = "hvf"
	default:
		in.Accel = "kvm"
		if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err != nil {
			in.Accel, in.AccelNote = "tcg", fmt.Sprintf("no usable /dev/kvm (%v): the VM runs under TCG, several times slower", err)
		} else {
			f.Close()
		}
		q := "qemu-system-x86_64"
		if runtime.GOARCH == "arm64" {
			q = "qemu-system-aarch64"
		}
		if p, err := exec.LookPath(q); err == nil {
			in.QEMU = p
		}
	}
	// The data folder may not exist yet: its nearest existing parent's
	// file system is where it will be.
	dir := c.paths.Root
	var st syscall.Statfs_t
	for syscall.Statfs(dir, &st) != nil && dir != filepath.Dir(dir) {
		dir = filepath.Dir(dir)
	}
	in.DiskFree = st.Bavail * uint64(st.Bsize)
	if *asJSON {
		json.NewEncoder(c.out).Encode(in)
		return ExitOK
	}
	for _, l := range in.problems() {
		fmt.Fprintln(c.out, l)
	}
	fmt.Fprintf(c.out, "osaurus-sandbox %s on %s/%s, %s, %.1f GiB free in %s\n", in.Version, in.OS, in.Arch, in.Accel, float64(in.DiskFree)/(1<<30), in.DataDir)
	return ExitOK
}

// problems are what the machine lacks, each with the fix; notes that
// don't stop the sandbox begin with "note:".
func (in RemoteInfo) problems() []string {
	var out []string
	if in.OS == "linux" && in.QEMU == "" {
		out = append(out, "missing: QEMU; install it there (Debian/Ubuntu: apt-get install qemu-system-x86 qemu-system-common, or scripts/install-deps.sh)")
	}
	if in.AccelNote != "" {
		out = append(out, "note: "+in.AccelNote+"; enable virtualisation (or nested virtualisation) and add the user to the kvm group")
	}
	if in.DiskFree < minDisk {
		out = append(out, fmt.Sprintf("note: only %.1f GiB free in %s; the image, root disk and checkpoints want %d GiB or more", float64(in.DiskFree)/(1<<30), in.DataDir, minDisk>>30))
	}
	return out
}

// contextCmd is `context add|list|use|check|remove`.
func (c *cli) contextCmd(ctx context.Context, args []string) int {
	const usage = "usage: osaurus-sandbox context add NAME ssh://[user@]host[:port] [--data-dir PATH] | list [--json] | use NAME | check NAME | install NAME [--path DIR] | remove NAME"
	if len(args) == 0 {
		fmt.Fprintln(c.err, usage)
		return ExitUsage
	}
	st := c.contextStore()
	sub, args := args[0], args[1:]
	fs := c.flags("context " + sub)
	var sshArgs multiFlag
	dataDir := fs.String("data-dir", "", "the far side's data folder")
	command := fs.String("remote-command", "", "the far side's osaurus-sandbox")
	asJSON := fs.Bool("json", false, "print JSON")
	installDir := fs.String("path", "", "the far side's folder for the copy")
	fs.Var(&sshArgs, "ssh-arg", "an argument for ssh")
	pos, ok := parseInterleaved(fs, args)
	if !ok {
		return ExitUsage
	}
	switch {
	case sub == "add" && len(pos) == 2:
		rc := remotes.Context{Name: pos[0], URL: pos[1], DataDir: *dataDir, Command: *command, SSHArgs: sshArgs}
		if err := st.Add(rc); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "added context %s (%s); checking the far side...\n", rc.Name, rc.URL)
		return c.checkContext(ctx, rc)
	case sub == "check" && len(pos) == 1:
		rc, err := st.Get(pos[0])
		if err != nil {
			return c.fail(err)
		}
		return c.checkContext(ctx, rc)
	case sub == "install" && len(pos) == 1:
		return c.contextInstall(ctx, st, pos[0], *installDir)
	case sub == "list" && len(pos) == 0:
		f, err := st.Load()
		if err != nil {
			return c.fail(err)
		}
		cur := f.Current
		if e := os.Getenv(remotes.Env); e != "" {
			cur = e
		}
		if cur == "" {
			cur = remotes.Local
		}
		if *asJSON {
			json.NewEncoder(c.out).Encode(struct {
				Current  string            `json:"current"`
				Contexts []remotes.Context `json:"contexts"`
			}{cur, append([]remotes.Context{}, f.Contexts...)})
			return ExitOK
		}
		tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tADDRESS\tDATA FOLDER")
		mark := func(n string) string {
			if n == cur {
				return n + " *"
			}
			return n
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", mark(remotes.Local), "this machine", c.paths.Root)
		for _, rc := range f.Contexts {
			dd := rc.DataDir
			if dd == "" {
				dd = "(its default)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", mark(rc.Name), rc.URL, dd)
		}
		tw.Flush()
		return ExitOK
	case sub == "use" && len(pos) == 1:
		if err := st.Use(pos[0]); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "commands now drive context %s\n", pos[0])
		if e := os.Getenv(remotes.Env); e != "" && e != pos[0] {
			fmt.Fprintf(c.err, "note: %s=%s overrides it in this shell\n", remotes.Env, e)
		}
		return ExitOK
	case sub == "remove" && len(pos) == 1:
		if err := st.Remove(pos[0]); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "removed context %s (nothing on the far side was touched)\n", pos[0])
		return ExitOK
	}
	fmt.Fprintln(c.err, usage)
	return ExitUsage
}

// checkContext runs remote-info on the far side and says what is
// missing: exit 1 when the sandbox can't run there.
func (c *cli) checkContext(ctx context.Context, rc remotes.Context) int {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	argv := rc.SSHArgv("remote-info", "--json")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		why := strings.TrimSpace(errb.String())
		var ee *exec.ExitError
		switch {
		case strings.Contains(why, "error while loading shared libraries"):
			why = fmt.Sprintf("the far side's osaurus-sandbox can't start (%s): install the libraries it links there (docs/remote.md: the window toolkit's libGL and X11/Wayland client libraries, no display needed)", why)
		case errors.As(err, &ee) && ee.ExitCode() == 127:
			why = fmt.Sprintf("the far side has no %s (%s): copy this one there with `osaurus-sandbox context install %s`, or give its path with --remote-command", firstWord(rc.RemoteCommand()), why, rc.Name)
		case errors.As(err, &ee) && ee.ExitCode() == ExitUsage:
			why = "the far side's osaurus-sandbox is too old for remote contexts (no remote-info): install this version there (" + Version + ")"
		case why == "":
			why = err.Error()
		}
		return c.fail(fmt.Errorf("%w: %s: %s", client.ErrUnreachable, rc.URL, why))
	}
	var in RemoteInfo
	if err := json.Unmarshal(out, &in); err != nil {
		return c.fail(fmt.Errorf("%w: %s: remote-info answered %q, not JSON", client.ErrUnreachable, rc.URL, strings.TrimSpace(string(out))))
	}
	fmt.Fprintf(c.out, "%s: osaurus-sandbox %s on %s/%s, %s, QEMU %s, %.1f GiB free in %s\n", rc.Name, in.Version, in.OS, in.Arch, in.Accel, orMissing(in.QEMU, in.OS), float64(in.DiskFree)/(1<<30), in.DataDir)
	problems := in.problems()
	if in.Version != Version {
		problems = append(problems, fmt.Sprintf("note: the far side runs version %s, this is %s; the control protocol may differ: install the same version there", in.Version, Version))
	}
	fatal := false
	for _, p := range problems {
		fmt.Fprintln(c.out, "  "+p)
		fatal = fatal || strings.HasPrefix(p, "missing:")
	}
	if fatal {
		return ExitError
	}
	return ExitOK
}

// contextInstall copies this osaurus-sandbox to the far side with the
// context's ssh, once uname there says it runs what this binary was built
// for; a context without a remote command then names the copy, and the
// check of `context add` follows.
func (c *cli) contextInstall(ctx context.Context, st remotes.Store, name, dir string) int {
	rc, err := st.Get(name)
	if err != nil {
		return c.fail(err)
	}
	if dir != "" && (!filepath.IsAbs(dir) || strings.ContainsAny(dir, "\x00\n")) {
		return c.fail(fmt.Errorf("%w: --path %q: give the far side's folder as an absolute path (default: ~/.local/bin there)", remotes.ErrInvalid, dir))
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return c.fail(fmt.Errorf("finding this osaurus-sandbox to copy: %w", err))
	}
	f, err := os.Open(exe)
	if err != nil {
		return c.fail(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return c.fail(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	uname, err := farShell(ctx, rc, "uname -sm", "uname -sm", nil)
	if err != nil {
		return c.fail(err)
	}
	goos, goarch, ok := remotes.Platform(uname)
	if !ok || goos != runtime.GOOS || goarch != runtime.GOARCH {
		far := fmt.Sprintf("%s/%s", goos, goarch)
		if !ok {
			far = "a system no osaurus-sandbox is built for"
		}
		return c.fail(fmt.Errorf("%w: context %s: the far side is %s (uname -sm: %s), this osaurus-sandbox is built for %s/%s: nothing was copied; install a build for that machine there yourself and give its path with --remote-command",
			remotes.ErrInvalid, rc.Name, far, strings.TrimSpace(uname), runtime.GOOS, runtime.GOARCH))
	}
	fmt.Fprintf(c.out, "copying %s (%.1f MB, %s/%s) to %s...\n", exe, float64(fi.Size())/1e6, goos, goarch, rc.URL)
	out, err := farShell(ctx, rc, "the copy into "+cmp.Or(dir, "~/.local/bin"), installScript(dir, fi.Size()), f)
	if err != nil {
		return c.fail(fmt.Errorf("context %s: the copy failed and nothing was installed: %w", rc.Name, err))
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	installed := lines[len(lines)-1]
	fmt.Fprintf(c.out, "installed %s on %s\n", installed, rc.Name)
	switch cmd := remotes.ShellQuote(installed); {
	case rc.Command == "":
		if rc, err = st.Update(rc.Name, func(x *remotes.Context) { x.Command = cmd }); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "context %s now runs %s there (its remote command)\n", rc.Name, cmd)
	case rc.Command != cmd:
		fmt.Fprintf(c.out, "note: context %s keeps its remote command %s; to run the copy, add the context again with --remote-command %s\n", rc.Name, rc.Command, cmd)
	}
	return c.checkContext(ctx, rc)
}

// installScript is the far side's script of `context install`: the
// binary arrives on stdin in a temporary file beside its place, must be
// size bytes (a connection cut short installs nothing), and is renamed
// over dir/osaurus-sandbox, which is atomic: a running copy keeps its old
// file. It prints the installed path. dir "" is ~/.local/bin there.
func installScript(dir string, size int64) string {
	d := `"$HOME"/.local/bin`
	if dir != "" {
		d = remotes.ShellQuote(dir)
	}
	return fmt.Sprintf(`set -e
d=%s
mkdir -p "$d"
t="$d/.osaurus-sandbox.$$.tmp"
trap 'rm -f "$t"' EXIT
trap 'rm -f "$t"; exit 1' HUP INT TERM
cat > "$t"
n=$(wc -c < "$t")
if [ $n -ne %d ]; then echo "received $n of %d bytes" >&2; exit 1; fi
chmod 755 "$t"
mv -f "$t" "$d/osaurus-sandbox"
trap - EXIT
printf '%%s\n' "$d/osaurus-sandbox"`, d, size, size)
}

// farShell runs cmdline (what, in errors) with the far side's shell
// through the context's ssh, stdin from in (nil: none). ssh failing (exit
// 255) is client.ErrUnreachable with its own words; the command failing
// there has the far side's.
func farShell(ctx context.Context, rc remotes.Context, what, cmdline string, in io.Reader) (string, error) {
	argv := rc.ShellArgv(cmdline)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = in
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err == nil {
		return string(out), nil
	}
	why := strings.TrimSpace(errb.String())
	if why == "" {
		why = err.Error()
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 255 {
		return "", fmt.Errorf("%w: %s: %s", client.ErrUnreachable, rc.URL, why)
	}
	return "", fmt.Errorf("%s: %s failed there (exit %d): %s", rc.URL, what, ee.ExitCode(), why)
}

func orMissing(p, goos string) string {
	switch {
	case p != "":
		return p
	case goos == "darwin":
		return "not needed (vz)"
	}
	return "MISSING"
}

func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return s
}

// parseInterleaved parses flags wherever they are among the positional
// arguments (`context add NAME URL --data-dir P`).
func parseInterleaved(fs *flag.FlagSet, args []string) (pos []string, ok bool) {
	for {
		if fs.Parse(args) != nil {
			return nil, false
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, true
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), true
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// mcpRemote is `mcp --agent NAME` through a remote context: the far side
// runs the stdio MCP server (the agents and their tools are there), and
// this process relays its messages over ssh. When the link is lost, each
// call in flight gets an error saying so, rather than the client seeing
// its server vanish mid-call. A preview an agent opens there
// (sandbox_expose_port), and a secret prompt's page (a URL elicitation),
// get a URL on this machine, forwarded over the context's ssh until the
// relay ends (previews.go).
func (c *cli) mcpRemote(ctx context.Context, args []string) int {
	argv := c.remote.SSHArgv(append([]string{"mcp"}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	var tail strings.Builder
	cmd.Stderr = io.MultiWriter(c.err, &remotes.LastBytes{W: &tail, N: 2048})
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	toFar, err := cmd.StdinPipe()
	if err != nil {
		return c.fail(err)
	}
	fromFar, err := cmd.StdoutPipe()
	if err != nil {
		return c.fail(err)
	}
	if err := cmd.Start(); err != nil {
		return c.fail(fmt.Errorf("%w: %s: %v", client.ErrUnreachable, c.remote.URL, err))
	}
	var (
		mu        sync.Mutex
		inFlight  = map[string]json.RawMessage{} // request ids the far side hasn't answered
		outMu     sync.Mutex
		clientEOF = make(chan struct{})
		// Previews the agent opens are forwarded here while the relay runs.
		fwd      = c.remote.Forwards()
		previews = &previewRelay{ctxName: c.remote.Name, open: fwd.Open}
	)
	defer fwd.CloseAll()
	// The far owner may keep its agents' secrets on this machine.
	defer c.offeringSecrets(ctx)()
	write := func(b []byte) {
		outMu.Lock()
		c.out.Write(b)
		outMu.Unlock()
	}
	go func() { // the client's messages, to the far side
		defer toFar.Close()
		defer close(clientEOF) // before the far side sees the end
		r := bufio.NewReader(c.in)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				var m struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
					Params json.RawMessage `json:"params"`
				}
				if json.Unmarshal(line, &m) == nil && m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" {
					mu.Lock()
					inFlight[string(m.ID)] = m.ID
					mu.Unlock()
					previews.request(m.ID, m.Method, m.Params)
				}
				if _, werr := toFar.Write(line); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	r := bufio.NewReader(fromFar)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			switch {
			case json.Unmarshal(line, &m) != nil:
			case m.Method == "" && len(m.ID) > 0:
				mu.Lock()
				delete(inFlight, string(m.ID))
				mu.Unlock()
				line = previews.response(m.ID, line)
			case m.Method != "":
				// The far side's request (a secret prompt's page).
				line = previews.elicitation(m.Method, line)
			}
			write(line)
		}
		if err != nil {
			break
		}
	}
	werr := cmd.Wait()
	select {
	case <-clientEOF:
		// The client left first: the far side ended because of it.
		return ExitOK
	default:
	}
	why := "ssh exited"
	if werr != nil {
		why = werr.Error()
	}
	if s := strings.TrimSpace(tail.String()); s != "" {
		why += ": " + s
	}
	lost := fmt.Errorf("%w: %s: %s", client.ErrLinkLost, c.remote.URL, why)
	mu.Lock()
	for _, id := range inFlight {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{
			"code": -32000, "message": lost.Error() + "; the call may have run on the far side: check before repeating it"}})
		write(append(b, '\n'))
	}
	mu.Unlock()
	return c.fail(lost)
}
