package hostcli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/term"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
)

// rootBanner labels the owner's root shell: it has none of an agent's
// limits, and no agent can open it (only the control socket offers it).
const rootBanner = "osaurus-sandbox: a ROOT shell in the VM, for you as its owner: no agent's limits apply here. `exit` ends it.\r\n"

// shell opens an interactive login shell in the VM: as an agent's Linux
// user, in its namespaces and under its limits, or without AGENT as root.
func (c *cli) shell(ctx context.Context, args []string) int {
	agent, rest := splitAgent(args)
	fs := c.flags("shell")
	workdir := fs.String("workdir", "", "start in this directory (default: the home)")
	if fs.Parse(rest) != nil || fs.NArg() > 1 || (fs.NArg() == 1 && agent != "") {
		fmt.Fprintln(c.err, "usage: osaurus-sandbox shell [AGENT] [--workdir DIR]")
		return ExitUsage
	}
	if fs.NArg() == 1 {
		agent = fs.Arg(0)
	}
	return c.terminal(ctx, control.ShellRequest{Agent: agent, Workdir: *workdir})
}

// execTTY is `exec -it [AGENT] [--workdir DIR] -- CMD [ARG...]`: one
// command on a terminal, as shell runs its shell.
func (c *cli) execTTY(ctx context.Context, args []string) int {
	usage := func() int {
		fmt.Fprintln(c.err, "usage: osaurus-sandbox exec -it [AGENT] [--workdir DIR] -- CMD [ARG...]")
		return ExitUsage
	}
	i := slices.Index(args, "--")
	if i < 0 || i == len(args)-1 {
		return usage()
	}
	argv := args[i+1:]
	agent, rest := splitAgent(args[:i])
	fs := c.flags("exec")
	workdir := fs.String("workdir", "", "start in this directory (default: the home)")
	if fs.Parse(rest) != nil || fs.NArg() > 1 || (fs.NArg() == 1 && agent != "") {
		return usage()
	}
	if fs.NArg() == 1 {
		agent = fs.Arg(0)
	}
	return c.terminal(ctx, control.ShellRequest{Agent: agent, Workdir: *workdir, Argv: argv})
}

// splitAgent takes a leading AGENT argument off args (before the flags).
func splitAgent(args []string) (agent string, rest []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}

// isTTYFlag reports whether an exec argument asks for a terminal.
func isTTYFlag(a string) bool { return a == "-it" || a == "-ti" || a == "-t" || a == "--tty" }

// terminal runs req with the user's terminal in raw mode: every key goes
// to the VM's terminal (Ctrl-C and Ctrl-Z to its foreground job), the
// window's size follows along, and the exit code is the shell's.
func (c *cli) terminal(ctx context.Context, req control.ShellRequest) int {
	cl, err := c.dial(ctx) // through a remote context: ssh carries the terminal
	if err != nil && c.remote != nil {
		return c.fail(err)
	}
	if err != nil {
		return c.fail(fmt.Errorf("%w: run `osaurus-sandbox start` first", control.ErrNotRunning))
	}
	defer cl.Close()
	req.Term = os.Getenv("TERM")
	in, _ := c.in.(*os.File)
	sizeOf := func() agentproto.Winsize { return agentproto.Winsize{} }
	var stdin io.Reader = c.in
	if in != nil && term.IsTerminal(int(in.Fd())) {
		fd := int(in.Fd())
		sizeOf = func() agentproto.Winsize {
			w, h, err := term.GetSize(fd)
			if err != nil || w <= 0 || h <= 0 || w > 65535 || h > 65535 {
				return agentproto.Winsize{}
			}
			return agentproto.Winsize{Rows: uint16(h), Cols: uint16(w)}
		}
		old, err := term.MakeRaw(fd)
		if err != nil {
			return c.fail(fmt.Errorf("putting the terminal in raw mode: %w", err))
		}
		defer term.Restore(fd, old)
	}
	req.Size = sizeOf()
	resize := make(chan agentproto.Winsize, 1)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for {
			select {
			case <-winch:
				select {
				case <-resize: // an unsent older size: the new one replaces it
				default:
				}
				resize <- sizeOf()
			case <-wctx.Done():
				return
			}
		}
	}()
	if req.Agent == "" {
		fmt.Fprint(c.err, rootBanner)
	}
	st, err := cl.Shell(ctx, req, stdin, c.out, resize)
	if err != nil {
		return c.fail(err)
	}
	return st.Code
}
