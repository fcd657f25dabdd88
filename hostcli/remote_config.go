package hostcli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/internal/explain"
)

// configRemote is `config` through a remote context: the far side's
// sandbox.json, read and written by its owner (Settings, SaveSettings),
// each change based on the revision read so an edit made there in
// between is not overwritten.
func (c *cli) configRemote(ctx context.Context, args []string) int {
	ctl, err := c.owner(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer ctl.Close()
	f, err := ctl.Settings(ctx)
	if err != nil {
		return c.fail(c.farError(err, "read its settings"))
	}
	here := c.viaContext // the fixes named are to be run from here
	where := fmt.Sprintf("%s (context %s)", f.Path, c.remote.Name)
	report := func(f api.SettingsFile) int {
		if f.Damaged != "" {
			fmt.Fprintf(c.err, "osaurus-sandbox: context %s: %s\n(shown: the defaults, which that machine uses until then)\n", c.remote.Name, here(f.Damaged))
			return ExitError
		}
		if len(f.Problems) == 0 {
			return ExitOK
		}
		var lines []string
		for _, p := range f.Problems {
			lines = append(lines, here(p.Text))
		}
		fmt.Fprintf(c.err, "osaurus-sandbox: %s has problems; until they are fixed its owner won't start the VM:\n%s\n", where, strings.Join(lines, "\n"))
		return ExitError
	}
	restart := "osaurus-sandbox " + c.contextArg() + "stop && osaurus-sandbox " + c.contextArg() + "start"
	save := func(req api.SettingsSave) (api.SettingsFile, error) {
		req.IfRevision = f.Revision
		after, err := ctl.SaveSettings(ctx, req)
		// config.ErrChanged arrives as its class: nothing else of this
		// op is busy.
		if errors.Is(err, agentproto.ErrBusy) {
			return after, fmt.Errorf("%w; nothing was saved: run the command again", c.farError(err, "save its settings"))
		}
		return after, c.farError(err, "save its settings")
	}
	saved := func(after api.SettingsFile) int {
		if after.Settings.NeedsRestart(f.Settings) {
			fmt.Fprintf(c.out, "saved on context %s; restart its VM for this to take effect (%s)\n", c.remote.Name, restart)
		} else {
			fmt.Fprintf(c.out, "saved on context %s\n", c.remote.Name)
		}
		return report(after)
	}
	problem := func(key string) bool {
		return slices.ContainsFunc(f.Problems, func(p api.SettingsProblem) bool { return p.Key == key })
	}
	known := func(key string) bool { return slices.Contains(configKeys(), key) }
	unknown := func(key string) int {
		fmt.Fprintf(c.err, "osaurus-sandbox: config: unknown key %q; the keys are %s (`osaurus-sandbox %sconfig get` shows each with its values)\n", key, strings.Join(configKeys(), ", "), c.contextArg())
		return ExitUsage
	}
	switch {
	case len(args) == 1 && args[0] == "get":
		c.printSettings(f.Settings)
		return report(f)
	case len(args) == 2 && args[0] == "get":
		if !known(args[1]) {
			return unknown(args[1])
		}
		v, err := f.Settings.Get(args[1])
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintln(c.out, v)
		return report(f)
	case len(args) == 3 && args[0] == "set":
		key, val := args[1], args[2]
		if !known(key) {
			return unknown(key)
		}
		if f.Damaged != "" {
			return c.fail(fmt.Errorf("context %s: %s", c.remote.Name, here(f.Damaged)))
		}
		next, err := f.Settings.Set(key, val)
		if err != nil && len(val) > 80 {
			// A long value pasted by mistake is not echoed back whole.
			fmt.Fprintln(c.err, "osaurus-sandbox:", strings.ReplaceAll(explain.Text(err), strconv.Quote(val), config.QuoteShort(val)))
			return exitCode(err)
		}
		if err != nil {
			return c.fail(err)
		}
		req := api.SettingsSave{Settings: next}
		if problem(key) {
			// The bad entry goes even when the value is its default.
			req.Reset = []string{key}
		}
		after, err := save(req)
		if err != nil {
			return c.fail(err)
		}
		return saved(after)
	case len(args) == 1 && args[0] == "reset", len(args) == 2 && args[0] == "reset" && f.Damaged != "":
		after, err := save(api.SettingsSave{Settings: config.Defaults(), Aside: true})
		if err != nil {
			return c.fail(err)
		}
		if after.Aside != "" {
			fmt.Fprintf(c.out, "moved %s to %s (context %s)\n", f.Path, after.Aside, c.remote.Name)
		}
		fmt.Fprintf(c.out, "every setting is at its default; restart its VM for it to take effect if it runs (%s)\n", restart)
		return ExitOK
	case len(args) == 2 && args[0] == "reset":
		key := args[1]
		if !known(key) && !problem(key) {
			return unknown(key)
		}
		next := f.Settings
		if known(key) {
			if next, err = next.WithDefault(key); err != nil {
				return c.fail(err)
			}
		}
		after, err := save(api.SettingsSave{Settings: next, Reset: []string{key}})
		if err != nil {
			return c.fail(err)
		}
		return saved(after)
	}
	fmt.Fprintln(c.err, "usage: osaurus-sandbox config get [KEY] | config set KEY VALUE | config reset [KEY]")
	return ExitUsage
}
