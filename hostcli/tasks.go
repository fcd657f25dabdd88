package hostcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/internal/termsafe"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

const taskUsage = `usage:
  osaurus-sandbox task list [--agent NAME] [--json]
  osaurus-sandbox task show ID [--json]
  osaurus-sandbox task cancel ID
  osaurus-sandbox run --agent NAME "TASK"`

// task lists, shows and cancels the agent runner's tasks.
func (c *cli) task(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(c.err, taskUsage)
		return ExitUsage
	}
	fs := c.flags("task " + args[0])
	asJSON := fs.Bool("json", false, "print JSON")
	agent := ""
	if args[0] == "list" {
		fs.StringVar(&agent, "agent", "", "only this agent's tasks")
	}
	if fs.Parse(reorder(args[1:])) != nil {
		return ExitUsage
	}
	known := (args[0] == "list" && fs.NArg() == 0) || ((args[0] == "show" || args[0] == "cancel") && fs.NArg() == 1)
	if !known {
		fmt.Fprintln(c.err, taskUsage)
		return ExitUsage
	}
	// The owner keeps the task records (reading one may mark it
	// interrupted): this process never writes them.
	ctl, err := c.owner(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer ctl.Close()
	switch {
	case args[0] == "list" && fs.NArg() == 0:
		slug := ""
		if agent != "" {
			a, err := c.lookupAgent(ctx, agent)
			if err != nil {
				return c.fail(err)
			}
			slug = a.Slug
		}
		ts, err := ctl.Tasks(ctx, control.TaskQuery{Agent: slug})
		if err != nil {
			return c.fail(err)
		}
		if *asJSON {
			if ts == nil {
				ts = []runner.Task{}
			}
			json.NewEncoder(c.out).Encode(ts)
			return ExitOK
		}
		if len(ts) == 0 {
			fmt.Fprintln(c.out, `no tasks yet; start one with osaurus-sandbox run --agent NAME "TASK"`)
		}
		for _, t := range ts {
			fmt.Fprintf(c.out, "%s  %-11s %-8s %s  %d steps  %s\n", t.ID, t.State, t.Agent, t.Created.Local().Format("2006-01-02 15:04:05"), len(t.Steps), oneLine(t.Task, 60))
		}
		return ExitOK
	case args[0] == "show" && fs.NArg() == 1:
		t, err := ctl.Task(ctx, fs.Arg(0))
		if err != nil {
			return c.fail(err)
		}
		if *asJSON {
			json.NewEncoder(c.out).Encode(t)
			return ExitOK
		}
		io.WriteString(c.out, t.Text())
		return ExitOK
	case args[0] == "cancel" && fs.NArg() == 1:
		t, err := ctl.CancelTask(ctx, fs.Arg(0))
		if err != nil {
			return c.fail(err)
		}
		if t.Finished() {
			fmt.Fprintf(c.out, "task %s already ended: %s\n", t.ID, t.State)
			return ExitOK
		}
		// The process working it checks twice a second; wait a while
		// for it to confirm.
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		deadline := time.After(10 * time.Second)
		for !t.Finished() {
			select {
			case <-ctx.Done():
				return c.fail(ctx.Err())
			case <-deadline:
				fmt.Fprintf(c.out, "asked to cancel task %s; it is still running (its process may be busy)\n", t.ID)
				return ExitOK
			case <-tk.C:
			}
			if t, err = ctl.Task(ctx, t.ID); err != nil {
				return c.fail(err)
			}
		}
		fmt.Fprintf(c.out, "task %s %s\n", t.ID, t.State)
		return ExitOK
	}
	fmt.Fprintln(c.err, taskUsage)
	return ExitUsage
}

// reorder puts flags before the positional arguments, so `task show ID
// --json` works as well as `task show --json ID`.
func reorder(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--agent" || args[i] == "-agent":
			flags = append(flags, args[i])
			if i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		case strings.HasPrefix(args[i], "-"):
			flags = append(flags, args[i])
		default:
			pos = append(pos, args[i])
		}
	}
	return append(flags, pos...)
}

// run works a task with the built-in runner from this process, printing
// each step as it happens. Ctrl-C cancels the task.
func (c *cli) run(ctx context.Context, args []string) int {
	fs := c.flags("run")
	ref := fs.String("agent", "", "the agent whose tools to use (name, slug or id)")
	if fs.Parse(reorder(args)) != nil || fs.NArg() != 1 || *ref == "" {
		fmt.Fprintln(c.err, `usage: osaurus-sandbox run --agent NAME "TASK"`)
		return ExitUsage
	}
	// Through a remote context the agent, the inference settings and
	// the owner are the far side's.
	if _, err := c.lookupAgent(ctx, *ref); err != nil {
		return c.fail(err)
	}
	if c.remote == nil {
		// Said before an owner starts for a task that can't run; a far
		// owner says it itself.
		if err := datadir.CheckInference(c.paths); err != nil {
			return c.fail(err)
		}
	}
	// The owner works the task (one is started when none runs, and it
	// starts the VM), with its tools under the limits every transport
	// shares, and keeps its record.
	c.noteBackgroundOwner(ctx, "this task")
	var ctl api.Controller
	var err error
	if c.remote != nil {
		ctl, err = c.owner(ctx)
	} else {
		ctl, err = client.Connect(ctx, c.paths)
	}
	if err != nil {
		return c.fail(err)
	}
	defer ctl.Close()
	p := &stepPrinter{w: c.out}
	// Ctrl-C cancels the task in the owner; the call ends when the task
	// does. Only this process dying (the call cut off) interrupts it.
	var (
		mu sync.Mutex
		id string
	)
	callCtx, cutOff := context.WithCancel(context.WithoutCancel(ctx))
	defer cutOff()
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		tid := id
		mu.Unlock()
		if tid == "" || func() error { _, err := ctl.CancelTask(context.Background(), tid); return err }() != nil {
			cutOff() // not started yet, or not cancellable: it is interrupted
		}
	})
	defer stop()
	t, err := ctl.RunTask(callCtx, control.TaskRun{Agent: *ref, Task: fs.Arg(0), Source: "cli"}, func(t runner.Task) {
		mu.Lock()
		id = t.ID
		mu.Unlock()
		p.update(t)
	})
	if err != nil && c.remote != nil {
		// Not farError: the far side's "inference is off" is of the class
		// an owner too old for an op answers with.
		err = c.farSaid(err)
	}
	if err != nil {
		return c.fail(err)
	}
	switch t.State {
	case runner.Done:
		return ExitOK
	case runner.Cancelled, runner.Interrupted, runner.Failed:
		if errors.Is(ctx.Err(), context.Canceled) {
			fmt.Fprintln(c.err, "osaurus-sandbox: cancelled")
		}
	}
	return ExitError
}

// stepPrinter prints what is new in a task each time it changes.
type stepPrinter struct {
	w       io.Writer
	started bool
	steps   int // steps whose text was printed
	results int // tool results printed in the last printed step
	ended   bool
}

func (p *stepPrinter) update(t runner.Task) {
	if !p.started {
		p.started = true
		if t.State == runner.Running {
			fmt.Fprintf(p.w, "task %s for %s\n", t.ID, t.Agent)
		}
	}
	for i := range t.Steps {
		s := t.Steps[i]
		if i >= p.steps {
			p.steps, p.results = i+1, 0
			if len(s.ToolCalls) > 0 || t.State == runner.Running {
				fmt.Fprintf(p.w, "step %d", s.N)
				if s.Content != "" {
					fmt.Fprintf(p.w, ": %s", oneLine(s.Content, 200))
				}
				fmt.Fprintln(p.w)
			}
		}
		if i != p.steps-1 {
			continue
		}
		for j := p.results; j < len(s.ToolCalls) && s.ToolCalls[j].Done; j++ {
			tc := s.ToolCalls[j]
			mark := "ok"
			if !tc.OK {
				mark = "error"
			}
			fmt.Fprintf(p.w, "  %s %s\n    %s: %s\n", tc.Name, oneLine(tc.Arguments, 200), mark, oneLine(tc.Result, 300))
			p.results = j + 1
		}
	}
	if t.Finished() && !p.ended {
		p.ended = true
		switch t.State {
		case runner.Done:
			fmt.Fprintf(p.w, "answer: %s\n", termsafe.String(t.Answer))
		default:
			fmt.Fprintf(p.w, "%s: %s\n", t.State, termsafe.String(t.Error))
		}
	}
}

func oneLine(s string, n int) string { return runner.OneLine(s, n) }
