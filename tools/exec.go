package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/pkgname"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// basePath is the guest agent's PATH for every process.
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// hostGrace is how long the host waits beyond a command's own timeout for
// the guest to report the kill, before giving up on the call.
const hostGrace = 30 * time.Second

// Signals by number; the guest is Linux.
const (
	sigKill = 9
	sigPipe = 13
	sigTerm = 15
)

// procEnv puts the agent's own Python venv and npm prefix first on PATH,
// so what sandbox_pip_install and sandbox_npm_install installed just works.
func (c *call) procEnv() []string {
	h := c.agent.Home()
	return []string{
		"PATH=" + h + "/.venv/bin:" + h + "/.npm-global/bin:" + basePath,
		"NPM_CONFIG_PREFIX=" + h + "/.npm-global",
		// pip install --user goes to the agent's own ~/.local; the
		// distro's "externally managed" guard is for root's packages,
		// which an agent can't write anyway.
		"PIP_BREAK_SYSTEM_PACKAGES=1",
	}
}

// network is the policy the agent's processes run under, read from the
// registry for every call so a change holds from the next command, and
// narrowed by the plugin whose command this is. A setting that does not
// parse (a hand-edited file) fails closed.
func (c *call) network() string {
	return c.networkOf(c.current())
}

// current is the agent's settings as the registry holds them now, so a
// change made while a client is connected holds from the next command.
// The owner's registry is agents.json's one writer: it is never stale, so
// nothing is re-read.
func (c *call) current() agents.Agent {
	a := c.agent
	if reg := c.env.agents; reg != nil {
		if cur, err := reg.Get(a.ID); err == nil {
			a = cur
		}
	}
	return a
}

// limits are the agent's resource limits as stored now.
func (c *call) limits() *agentproto.Limits {
	l := c.current().Limits()
	return &l
}

func (c *call) networkOf(a agents.Agent) string {
	p, err := a.NetworkPolicy()
	if err != nil {
		return netpolicy.SettingNone
	}
	if c.narrow != nil {
		p = netpolicy.Narrow(p, *c.narrow)
	}
	return p.String()
}

// exec runs a process in the guest with a timeout enforced there (killing
// the whole process group) and, as a backstop, on the host.
func (c *call) exec(ctx context.Context, req agentproto.ExecRequest, timeout time.Duration, stdout, stderr io.Writer) (agentproto.ExitStatus, error) {
	if err := c.admit(ctx); err != nil {
		return agentproto.ExitStatus{}, err
	}
	if req.Env == nil {
		req.Env = c.procEnv()
	}
	if req.User != "" {
		a := c.current()
		req.Network = c.networkOf(a)
		l := a.Limits()
		req.Limits = &l
	}
	req.TimeoutMillis = timeout.Milliseconds()
	ctx, cancel := context.WithTimeout(ctx, timeout+hostGrace)
	defer cancel()
	return c.g.Exec(ctx, req, nil, stdout, stderr)
}

// startError explains why a process did not start: a missing program gets
// an install hint, a bad working directory names the cwd argument.
func (c *call) startError(err error, program, cwdField string) error {
	var re *agentproto.RemoteError
	msg := err.Error()
	if errors.As(err, &re) {
		msg = re.Message
	}
	switch {
	case missingProgram(err):
		return envelope.Errorf(envelope.ExecutionError, "%s", c.missingHint(program))
	case cwdField != "" && strings.Contains(msg, "working directory"):
		switch {
		case errors.Is(err, agentproto.ErrNotFound):
			return &envelope.Error{Kind: envelope.NotFound, Field: cwdField, Expected: "an existing directory", Err: fmt.Errorf("%s does not exist: %s", cwdField, msg)}
		case errors.Is(err, agentproto.ErrNotDir):
			return envelope.ArgErrorf(cwdField, "a directory", "%s is not a directory: %s", cwdField, msg)
		}
	}
	return err
}

// missingProgram reports whether a process did not start because its
// program is not installed.
func missingProgram(err error) bool {
	var re *agentproto.RemoteError
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if errors.As(err, &re) {
		msg = re.Message
	}
	return errors.Is(err, agentproto.ErrNotFound) && strings.Contains(msg, "executable file not found")
}

// missingHint names the package that brings a missing program, for this
// guest's package manager, and the tool that installs it.
func (c *call) missingHint(program string) string {
	pm := ""
	if c.g != nil {
		pm = c.g.Info.PackageMgr
	}
	return MissingProgramHint(program, pm)
}

// MissingProgramHint says which package is missing for program and which
// tool installs it (pm is "apk", "apt" or unknown: then both are named).
func MissingProgramHint(program, pm string) string {
	tp := pkgname.ToolFor(program)
	pkgs := pkgname.InstallCall(tp.Packages(pm))
	if pm != "apk" && pm != "apt" {
		pkgs = pkgname.InstallCall(tp.Apt) + " on Debian, " + pkgname.InstallCall(tp.Apk) + " on Alpine"
	}
	return fmt.Sprintf("%s is not installed in the sandbox. %s installs it (an agent with autonomous exec can run it); "+
		"otherwise ask the user to add the package to the image's packages and Reset, or to install it.", tp.What, pkgs)
}

// seconds reads a timeout argument in seconds.
func (c *call) seconds(field string, v int, def, hi time.Duration) (time.Duration, error) {
	n, err := c.bounded(field, v, int(def/time.Second), int(hi/time.Second))
	return time.Duration(n) * time.Second, err
}

type execResult struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
	Cwd      string `json:"cwd"`
}

// builtinTimeoutAdvice is what a timeout failure of a built-in tool with a
// timeout argument advises: the caller can raise it.
var builtinTimeoutAdvice = fmt.Sprintf("Raise timeout (max %s), make it faster, or run it with sandbox_exec_background.", MaxExecTimeout)

// sessionTimeoutAdvice is builtinTimeoutAdvice for a command in a shell
// session, which lives on.
var sessionTimeoutAdvice = "The session's shell lives on with its directory and variables. " + builtinTimeoutAdvice

// pluginTimeoutAdvice is what a timed-out plugin tool advises. Its caller
// has no timeout argument and a recipe has no timeout field (the limit is
// fixed, as in Osaurus), so the way out is less work per call or a recipe
// changed by the user.
func pluginTimeoutAdvice(pluginID string) string {
	return fmt.Sprintf("A plugin tool's limit is fixed at %s and its caller can't raise it. Call it with less work, "+
		"or ask the user to change the plugin %s so one call does less or starts long work in the background "+
		"(its recipe: osaurus-sandbox plugin show %s; a changed recipe is imported again with osaurus-sandbox plugin import).",
		PluginToolTimeout, pluginID, pluginID)
}

// finish turns a finished command into its result, with warnings for cut
// output, odd endings and silence, or a timeout failure carrying advice.
func (c *call) finish(st agentproto.ExitStatus, timeout time.Duration, advice, cwd string, out, errOut *capture) (execResult, error) {
	stdout, cutOut := out.Text()
	stderr, cutErr := errOut.Text()
	// Scrubbed before any further cut, so no piece of a secret survives.
	stdout, stderr = c.scrub(stdout), c.scrub(stderr)
	if st.Limit != "" {
		msg := c.limitMessage(st.Limit)
		if st.TimedOut || st.Code != 0 {
			return execResult{}, envelope.Errorf(envelope.ExecutionError, "%s Output before it ended:\nstdout: %s\nstderr: %s",
				msg, truncTail(stdout, 2000), truncTail(stderr, 1000))
		}
		c.warn("%s", msg)
	}
	if st.TimedOut {
		return execResult{}, envelope.Errorf(envelope.Timeout,
			"still running after %s, so it was killed with every process it started. %s Output before the kill:\nstdout: %s\nstderr: %s",
			timeout, advice, truncTail(stdout, 2000), truncTail(stderr, 1000))
	}
	for _, s := range []struct {
		name string
		cut  bool
		c    *capture
	}{{"stdout", cutOut, out}, {"stderr", cutErr, errOut}} {
		if s.cut {
			c.warn("%s was %d bytes; kept the first %d and the last %d characters. Write long output to a file and read it "+
				"in parts with sandbox_read_file, or filter it (grep, head, tail)", s.name, s.c.Len(), s.c.headChars, s.c.tailChars)
		}
	}
	switch {
	case st.Signal == sigPipe || (st.Signal == 0 && st.Code == 128+sigPipe):
		c.warn("the command was killed by SIGPIPE: something it wrote to (e.g. `head`) stopped reading early; the output is probably just incomplete")
	case st.Signal == sigKill:
		c.warn("the command was killed by SIGKILL; it may have run out of memory")
	case st.Signal != 0:
		c.warn("the command was killed by signal %d", st.Signal)
	}
	if out.Len() == 0 && errOut.Len() == 0 {
		if st.Code == 0 {
			c.warn("the command printed nothing (exit code 0)")
		} else {
			c.warn("the command printed nothing and failed with exit code %d", st.Code)
		}
	}
	if st.Error != "" {
		c.warn("output may be incomplete: %s", st.Error)
	}
	return execResult{Stdout: stdout, Stderr: stderr, ExitCode: st.Code, Cwd: cwd}, nil
}

type execArgs struct {
	Command      string `json:"command"`
	Cwd          string `json:"cwd"`
	Timeout      int    `json:"timeout"`
	Session      string `json:"session"`
	CloseSession bool   `json:"close_session"`
}

func checkCommand(cmd string) error {
	switch {
	case strings.TrimSpace(cmd) == "":
		return envelope.ArgErrorf("command", "a shell command", "command is empty")
	case strings.ContainsRune(cmd, 0):
		return envelope.ArgErrorf("command", "a shell command without NUL bytes", "command contains a NUL byte")
	}
	return nil
}

func execCommand(ctx context.Context, c *call, a execArgs) (any, error) {
	if err := checkCommand(a.Command); err != nil {
		return nil, err
	}
	timeout, err := c.seconds("timeout", a.Timeout, DefaultExecTimeout, MaxExecTimeout)
	if err != nil {
		return nil, err
	}
	cwd, err := c.resolve("cwd", a.Cwd, "~")
	if err != nil {
		return nil, err
	}
	out, errOut := newCapture(StdoutCap), newCapture(StderrCap)
	if a.Session != "" {
		st, at, err := c.execSession(ctx, a.Session, cwd.Path, a.Cwd != "", a.Command, timeout, a.CloseSession, out, errOut)
		if err != nil {
			return nil, c.startError(err, "sh", "cwd")
		}
		if at == "" {
			at = cwd.Path
		}
		return c.finish(st, timeout, sessionTimeoutAdvice, at, out, errOut)
	}
	if a.CloseSession {
		return nil, envelope.ArgErrorf("close_session", "set only with session", "close_session needs the session to close")
	}
	st, err := c.exec(ctx, agentproto.ExecRequest{Identity: c.as(cwd.Root), Shell: a.Command, Cwd: cwd.Path}, timeout, out, errOut)
	if err != nil {
		return nil, c.startError(err, "sh", "cwd")
	}
	return c.finish(st, timeout, builtinTimeoutAdvice, cwd.Path, out, errOut)
}

type backgroundArgs struct {
	Command string `json:"command"`
	Cwd     string `json:"cwd"`
}

// logFile is where the output of background process pid goes: named by
// pid so sandbox_process finds it without any state on the host.
func (c *call) logFile(pid int) string {
	return c.agent.Home() + "/.sandbox/logs/" + strconv.Itoa(pid) + ".log"
}

func execBackground(ctx context.Context, c *call, a backgroundArgs) (any, error) {
	if err := checkCommand(a.Command); err != nil {
		return nil, err
	}
	cwd, err := c.resolve("cwd", a.Cwd, "~")
	if err != nil {
		return nil, err
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	r, err := c.g.StartBackground(ctx, agentproto.StartBackgroundRequest{ExecRequest: agentproto.ExecRequest{
		Identity: c.as(cwd.Root), Shell: a.Command, Cwd: cwd.Path, Env: c.procEnv(), Network: c.network(), Limits: c.limits(),
	}})
	if err != nil {
		return nil, c.startError(err, "sh", "cwd")
	}
	log := c.logFile(r.Pid)
	home := c.agent.Home()
	if err := c.g.Move(ctx, agentproto.MoveRequest{Identity: c.as(home), Src: r.LogPath, Dst: log, Overwrite: true}); err != nil {
		log = r.LogPath // still correct, just not named by pid
		c.warn("the log keeps its original name: %v", err)
	}
	return map[string]any{"pid": r.Pid, "log_file": log, "cwd": cwd.Path, "background": true}, nil
}

type processArgs struct {
	Action    string `json:"action"`
	Pid       int    `json:"pid"`
	Timeout   int    `json:"timeout"`
	TailLines int    `json:"tail_lines"`
	Force     bool   `json:"force"`
}

type processResult struct {
	Pid      int    `json:"pid"`
	Action   string `json:"action"`
	Running  bool   `json:"running"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   int    `json:"signal,omitempty"`
	LogFile  string `json:"log_file"`
	LogTail  string `json:"log_tail"`
}

// killWait is how long kill waits to report that the process ended.
const killWait = 5 * time.Second

func process(ctx context.Context, c *call, a processArgs) (any, error) {
	if a.Pid < 2 {
		return nil, envelope.ArgErrorf("pid", "the pid returned by sandbox_exec_background", "pid %d is not a process you started", a.Pid)
	}
	tail, err := c.bounded("tail_lines", a.TailLines, DefaultLogTail, MaxLogTail)
	if err != nil {
		return nil, err
	}
	var wait time.Duration
	switch a.Action {
	case "poll", "kill":
	case "wait":
		if wait, err = c.seconds("timeout", a.Timeout, DefaultWait, MaxWait); err != nil {
			return nil, err
		}
	default:
		return nil, envelope.ArgErrorf("action", "poll, wait or kill", "action %q is not one of poll, wait, kill", a.Action)
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	id := agentproto.Identity{User: c.agent.User()}
	if a.Action == "kill" {
		sig := sigTerm
		if a.Force {
			sig = sigKill
		}
		// The process leads its own session; signal the whole group so
		// what it started goes too, or just the pid if it leads none.
		err := c.g.Signal(ctx, agentproto.SignalRequest{Identity: id, Pid: a.Pid, Signal: sig, Group: true})
		if errors.Is(err, agentproto.ErrNotFound) {
			err = c.g.Signal(ctx, agentproto.SignalRequest{Identity: id, Pid: a.Pid, Signal: sig})
		}
		if err != nil {
			return nil, processError(a.Pid, err)
		}
		wait = killWait
	}
	wctx, cancel := context.WithTimeout(ctx, wait+hostGrace)
	defer cancel()
	st, err := c.g.Wait(wctx, agentproto.WaitRequest{Identity: id, Pid: a.Pid, TimeoutMillis: wait.Milliseconds()})
	res := processResult{Pid: a.Pid, Action: a.Action, LogFile: c.logFile(a.Pid)}
	switch {
	case err == nil:
		res.Running = !st.Exited
		if st.Exited {
			res.ExitCode, res.Signal = &st.Code, st.Signal
		}
	case a.Action == "kill" && errors.Is(err, agentproto.ErrNotFound):
		c.warn("signal sent; pid %d was not started by sandbox_exec_background, so its exit can't be reported", a.Pid)
	default:
		return nil, processError(a.Pid, err)
	}
	switch {
	case res.Running && a.Action == "wait":
		c.warn("still running after %s", wait)
	case res.Running && a.Action == "kill":
		c.warn("still running %s after SIGTERM; use force: true to send SIGKILL", killWait)
	}
	home := c.agent.Home()
	r, err := c.g.ReadFile(ctx, agentproto.ReadFileRequest{Identity: c.as(home), Path: res.LogFile, TailLines: tail, MaxBytes: 4 * StderrCap})
	if err != nil {
		c.warn("no log to show: %v", err)
	} else {
		res.LogTail = valid(lastChars(string(r.Data), StderrCap))
	}
	return res, nil
}

func processError(pid int, err error) error {
	switch {
	case errors.Is(err, agentproto.ErrPermission):
		return envelope.Errorf(envelope.Rejected, "process %d is not yours; you can only manage processes you started", pid)
	case errors.Is(err, agentproto.ErrNotFound):
		return envelope.Errorf(envelope.NotFound, "no process %d of yours: it was not started with sandbox_exec_background, "+
			"or it ended a long time ago, or the sandbox restarted since", pid)
	}
	return err
}

type scriptArgs struct {
	Path    string   `json:"path"`
	Args    []string `json:"args"`
	Cwd     string   `json:"cwd"`
	Timeout int      `json:"timeout"`
	Session string   `json:"session"`
}

type scriptResult struct {
	execResult
	Combined string `json:"combined"`
	Language string `json:"language"`
}

func runScript(ctx context.Context, c *call, a scriptArgs) (any, error) {
	p, err := c.resolve("path", a.Path, "")
	if err != nil {
		return nil, err
	}
	for _, arg := range a.Args {
		if strings.ContainsRune(arg, 0) {
			return nil, envelope.ArgErrorf("args", "strings without NUL bytes", "an argument contains a NUL byte")
		}
	}
	timeout, err := c.seconds("timeout", a.Timeout, DefaultScriptTimeout, MaxExecTimeout)
	if err != nil {
		return nil, err
	}
	cwd, err := c.resolve("cwd", a.Cwd, "~")
	if err != nil {
		return nil, err
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	head, err := c.g.ReadFile(ctx, agentproto.ReadFileRequest{Identity: c.as(p.Root), Path: p.Path, StartLine: 1, LineCount: 1, MaxBytes: 256})
	if errors.Is(err, agentproto.ErrIsDir) {
		return nil, envelope.ArgErrorf("path", "a script file", "%s is a directory, not a script", p.Path)
	}
	if err != nil {
		return nil, err
	}
	lang, interp := detectLanguage(p.Path, head.Data)
	if lang == "" {
		return nil, envelope.ArgErrorf("path", "a .py, .sh, .bash, .js, .mjs or .cjs file, or one starting with #! naming python3, bash, sh or node",
			"can't tell which language %s is in; give it one of those extensions or a #! line", p.Path)
	}
	out, errOut, comb := newCapture(StdoutCap), newCapture(StderrCap), newCapture(StdoutCap)
	argv := append([]string{interp, p.Path}, a.Args...)
	var st agentproto.ExitStatus
	at, advice := cwd.Path, builtinTimeoutAdvice
	if a.Session != "" {
		// In the session's shell: its PATH (an activated venv's python3),
		// variables and directory.
		quoted := make([]string, len(argv))
		for i, w := range argv {
			quoted[i] = shellQuote(w)
		}
		var now string
		st, now, err = c.execSession(ctx, a.Session, cwd.Path, a.Cwd != "", strings.Join(quoted, " "), timeout, false,
			io.MultiWriter(out, comb), io.MultiWriter(errOut, comb))
		if now != "" {
			at = now
		}
		advice = sessionTimeoutAdvice
	} else {
		st, err = c.exec(ctx, agentproto.ExecRequest{Identity: c.as(cwd.Root), Argv: argv, Cwd: cwd.Path}, timeout,
			io.MultiWriter(out, comb), io.MultiWriter(errOut, comb))
	}
	if err != nil {
		return nil, c.startError(err, interp, "cwd")
	}
	res, err := c.finish(st, timeout, advice, at, out, errOut)
	if err != nil {
		return nil, err
	}
	combined, _ := comb.Text()
	return scriptResult{execResult: res, Combined: combined, Language: lang}, nil
}

// detectLanguage picks the interpreter from a #! line, else the extension.
func detectLanguage(file string, firstLine []byte) (lang, interp string) {
	if rest, ok := bytes.CutPrefix(firstLine, []byte("#!")); ok {
		f := strings.Fields(string(rest))
		prog := ""
		if len(f) > 0 {
			prog = path.Base(f[0])
		}
		if prog == "env" {
			prog = ""
			for _, w := range f[1:] {
				if !strings.HasPrefix(w, "-") && !strings.Contains(w, "=") {
					prog = path.Base(w)
					break
				}
			}
		}
		switch {
		case prog == "python" || prog == "python3" || strings.HasPrefix(prog, "python3."):
			return "python", "python3"
		case prog == "bash":
			return "bash", "bash"
		case prog == "sh" || prog == "dash" || prog == "ash":
			return "sh", "sh"
		case prog == "node" || prog == "nodejs":
			return "node", "node"
		}
	}
	switch path.Ext(file) {
	case ".py":
		return "python", "python3"
	case ".bash":
		return "bash", "bash"
	case ".sh":
		return "sh", "sh"
	case ".js", ".mjs", ".cjs":
		return "node", "node"
	}
	return "", ""
}

// limitMessage explains which of the agent's resource limits a command ran
// into, and what to do about it.
func (c *call) limitMessage(limit string) string {
	a := c.current()
	l := a.Resources.Limits()
	switch limit {
	case agentproto.LimitMemory:
		return fmt.Sprintf("The command ran out of memory: all your processes together may use %d MB (memoryMB), "+
			"so it was killed with every process it started. Use less memory (smaller inputs, fewer parallel jobs), "+
			"or ask the user to raise it: osaurus-sandbox agent set %s memoryMB N.", l.MemoryMB, a.Slug)
	case agentproto.LimitProcesses:
		return fmt.Sprintf("The command hit the process limit: you may have at most %d processes and threads at once (maxProcesses), "+
			"so starting more failed. Run fewer things in parallel, end background processes you no longer need, "+
			"or ask the user to raise it: osaurus-sandbox agent set %s maxProcesses N.", l.MaxProcesses, a.Slug)
	}
	return fmt.Sprintf("The command ran into the resource limit %q.", limit)
}
