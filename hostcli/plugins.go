package hostcli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/internal/termsafe"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/tools"
	"golang.org/x/term"
)

const pluginUsage = `usage:
  osaurus-sandbox plugin import SOURCE [--yes]   a file, an https:// URL, or github.com/OWNER/REPO[/tree/REF/PATH | /blob/REF/PATH/plugin.json]
  osaurus-sandbox plugin update ID [--yes]       import again from where it came from (a new version)
  osaurus-sandbox plugin list [--json]
  osaurus-sandbox plugin show ID [--json]        the recipe, its tools and its versions
  osaurus-sandbox plugin export ID [FILE]        the recipe as JSON (stdout without FILE)
  osaurus-sandbox plugin duplicate ID            a copy under a new name and id
  osaurus-sandbox plugin install ID --agent NAME [--yes]  install for an agent (the VM must be running)
  osaurus-sandbox plugin uninstall ID --agent NAME
  osaurus-sandbox plugin remove ID               uninstall from every agent, then delete
  osaurus-sandbox plugin repair                  rewrite damaged install records, keeping what is readable
import, update and install show the secrets and network a recipe gets; --yes accepts them when it gets
any secret, more than the setup allowlist, or its commands reach hosts outside the allowlist or built at
run time. An imported recipe without permissions.network runs under the setup allowlist.`

// pluginHTTPClient is the client imports use; nil means the importer's
// default. Tests point it at their loopback TLS server.
var pluginHTTPClient *http.Client

// splitFlags separates --flags (allowed anywhere, unlike package flag)
// from positional arguments.
func splitFlags(args []string, allowed ...string) ([]string, map[string]bool, error) {
	set := map[string]bool{}
	var pos []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name := strings.TrimLeft(a, "-")
		ok := false
		for _, f := range allowed {
			ok = ok || f == name
		}
		if !ok {
			return nil, nil, fmt.Errorf("unknown flag %s", a)
		}
		set[name] = true
	}
	return pos, set, nil
}

func (c *cli) plugin(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(c.err, pluginUsage)
		return ExitUsage
	}
	sub := args[0]
	var agentRef string
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		if rest[i] == "--agent" && i+1 < len(rest) {
			agentRef = rest[i+1]
			rest = append(slices.Clone(rest[:i]), rest[i+2:]...)
			break
		}
	}
	pos, flags, err := splitFlags(rest, "json", "yes")
	if err != nil {
		fmt.Fprintf(c.err, "osaurus-sandbox plugin %s: %v\n%s\n", sub, err, pluginUsage)
		return ExitUsage
	}
	src, err := c.pluginSource()
	if err != nil {
		return c.fail(err)
	}
	// The library is read from src; the owner writes it.
	save := func(p *plugins.Plugin, origin plugins.Origin) int {
		b, err := p.Encode()
		if err != nil {
			return c.fail(err)
		}
		ctl, err := c.owner(ctx)
		if err != nil {
			return c.fail(err)
		}
		defer ctl.Close()
		r, err := ctl.SavePlugin(ctx, api.PluginSaveRequest{Recipe: b, Origin: origin})
		if err != nil {
			return c.fail(err)
		}
		e, err := src.get(ctx, r.ID)
		if err != nil {
			return c.fail(err)
		}
		c.printSaved(e, r.Changed)
		return ExitOK
	}
	// The importer fetches on this machine, under its settings; the
	// recipe is reviewed against the allowlist where it will run.
	cfg, err := config.LoadSandbox(c.paths.SandboxJSON())
	if err != nil {
		return c.fail(err)
	}
	im := datadir.PluginImporter(cfg, pluginHTTPClient)
	review := func(p *plugins.Plugin, o plugins.Origin) plugins.Grant {
		return plugins.Review(p, o, src.allowlist(ctx), nil)
	}
	switch {
	case sub == "import" && len(pos) == 1:
		p, origin, err := im.Import(ctx, pos[0])
		if err != nil {
			return c.fail(err)
		}
		// The same id from somewhere else is most likely another plugin
		// that happens to share the name: ask before making it a new
		// version of the one in the library.
		if e, err := src.get(ctx, p.ID()); err == nil {
			if cur := e.Current().Origin; cur.Location != origin.Location || cur.Kind != origin.Kind {
				warn := fmt.Sprintf("The library already has a plugin %q, from %s.\nImporting %s makes it version %d of that plugin (the earlier versions are kept).",
					p.ID(), orDash(cur.Location), origin.Location, e.Current().Number+1)
				if !flags["yes"] && !c.confirm(warn) {
					return ExitDeclined
				}
			}
		}
		if code := c.confirmGrant(p.ID(), review(p, origin), flags["yes"], "imported"); code != ExitOK {
			return code
		}
		return save(p, origin)
	case sub == "update" && len(pos) == 1 && c.remote != nil:
		p, origin, err := c.refetchFar(ctx, src, im, pos[0])
		if err != nil {
			return c.fail(err)
		}
		if code := c.confirmGrant(p.ID(), review(p, origin), flags["yes"], "updated"); code != ExitOK {
			return code
		}
		return save(p, origin)
	case sub == "update" && len(pos) == 1:
		code := ExitOK
		var origin plugins.Origin
		lib, err := plugins.OpenLibrary(c.paths.PluginsDir())
		if err != nil {
			return c.fail(err)
		}
		if e, err := lib.Get(pos[0]); err == nil {
			origin = e.Current().Origin
		}
		p, fetched, err := im.Refetch(ctx, lib, pos[0], func(p *plugins.Plugin) error {
			if code = c.confirmGrant(p.ID(), review(p, origin), flags["yes"], "updated"); code != ExitOK {
				return errDeclined
			}
			return nil
		})
		if errors.Is(err, errDeclined) {
			return code
		}
		if err != nil {
			return c.fail(err)
		}
		return save(p, fetched)
	case sub == "list" && len(pos) == 0:
		return c.pluginList(ctx, src, flags["json"])
	case sub == "show" && len(pos) == 1:
		return c.pluginShow(ctx, src, pos[0], flags["json"])
	case sub == "export" && (len(pos) == 1 || len(pos) == 2):
		e, err := src.get(ctx, pos[0])
		if err != nil {
			return c.fail(err)
		}
		b, err := e.Current().Recipe.Encode()
		if err != nil {
			return c.fail(err)
		}
		if len(pos) == 1 {
			c.out.Write(b)
			return ExitOK
		}
		if err := atomicfile.WriteFile(pos[1], b, 0o644); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "exported %s to %s\n", pos[0], pos[1])
		return ExitOK
	case sub == "duplicate" && len(pos) == 1:
		ctl, err := c.owner(ctx)
		if err != nil {
			return c.fail(err)
		}
		defer ctl.Close()
		r, err := ctl.DuplicatePlugin(ctx, pos[0])
		if err != nil {
			return c.fail(err)
		}
		e, err := src.get(ctx, r.ID)
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "duplicated %s as %s (%q)\n", pos[0], e.ID, e.Current().Recipe.Name)
		return ExitOK
	case (sub == "install" || sub == "uninstall") && len(pos) == 1 && agentRef != "":
		return c.pluginInstall(ctx, src, pos[0], agentRef, sub == "install", flags["yes"])
	case sub == "repair" && len(pos) == 0:
		return c.pluginRepair(ctx)
	case sub == "remove" && len(pos) == 1:
		// The owner uninstalls it from every agent first, then deletes it.
		ctl, err := c.owner(ctx)
		if err != nil {
			return c.fail(err)
		}
		defer ctl.Close()
		r, err := ctl.RemovePlugin(ctx, pos[0], func(line string) { fmt.Fprintln(c.out, line) })
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "removed %s\n", pos[0])
		if r.Damaged != "" {
			fmt.Fprintf(c.out, "the damaged file is kept aside as %s.damaged-TIME\n", r.Damaged)
		}
		return ExitOK
	}
	fmt.Fprintln(c.err, pluginUsage)
	return ExitUsage
}

// confirmGrant shows what a recipe gets (its secrets, its network, and
// what its commands reach outside the setup allowlist or decide at run
// time) and, when it gets any secret or more than the allowlist, goes on
// only with --yes: a recipe from elsewhere is handed the agent's secrets
// and network only knowingly. verb is what was not done without it.
func (c *cli) confirmGrant(id string, g plugins.Grant, yes bool, verb string) int {
	fmt.Fprintf(c.err, "%s gets, once installed:\n", id)
	for _, l := range g.Lines() {
		fmt.Fprintf(c.err, "  %s\n", l)
	}
	if !g.NeedsConsent() {
		return ExitOK
	}
	if yes {
		fmt.Fprintln(c.err, "Accepted (--yes).")
		return ExitOK
	}
	fmt.Fprintf(c.err, "Nothing was %s. Read the recipe, and if you trust it with the above, run again with --yes.\n", verb)
	return ExitDeclined
}

func (c *cli) printSaved(e *plugins.Entry, changed bool) {
	cur := e.Current()
	if !changed {
		fmt.Fprintf(c.out, "%s is unchanged (version %d)\n", e.ID, cur.Number)
		return
	}
	verb := "imported"
	if len(e.Versions) > 1 {
		verb = "updated"
	}
	fmt.Fprintf(c.out, "%s %s as library version %d from %s", verb, e.ID, cur.Number, cur.Origin.Location)
	if cur.Origin.Commit != "" {
		fmt.Fprintf(c.out, " at commit %s", cur.Origin.Commit)
	}
	fmt.Fprintln(c.out)
	for _, t := range cur.Recipe.Tools {
		fmt.Fprintf(c.out, "  tool %s\n", cur.Recipe.ToolName(t.ID))
	}
}

// pluginSummary is one row of `plugin list --json`.
type pluginSummary struct {
	ID            string         `json:"id"`
	Name          string         `json:"name"`
	Version       string         `json:"version,omitempty"`
	Description   string         `json:"description"`
	LibraryVer    int            `json:"libraryVersion"`
	Origin        plugins.Origin `json:"origin"`
	Tools         []string       `json:"tools"`
	CreatedByAgnt bool           `json:"createdByAgent,omitempty"`
}

func summarize(e *plugins.Entry) pluginSummary {
	cur := e.Current()
	s := pluginSummary{ID: e.ID, Name: cur.Recipe.Name, Version: cur.Recipe.Version, Description: cur.Recipe.Description,
		LibraryVer: cur.Number, Origin: cur.Origin, Tools: []string{}, CreatedByAgnt: cur.Recipe.Metadata["created_by"] == "agent"}
	for _, t := range cur.Recipe.Tools {
		s.Tools = append(s.Tools, cur.Recipe.ToolName(t.ID))
	}
	return s
}

func (c *cli) pluginList(ctx context.Context, src pluginSource, asJSON bool) int {
	list, err := src.list(ctx)
	rows := []pluginSummary{}
	for _, e := range list {
		rows = append(rows, summarize(e))
	}
	// A damaged file is a row too, so it can't vanish from the list and
	// the user sees what to do; the rest is listed as usual.
	var damaged []*plugins.DamagedError
	for _, e := range unjoin(err) {
		var d *plugins.DamagedError
		if errors.As(e, &d) {
			damaged = append(damaged, d)
		}
	}
	if asJSON {
		json.NewEncoder(c.out).Encode(rows)
	} else if len(rows) == 0 && err == nil {
		fmt.Fprintln(c.out, "no plugins; import one with `osaurus-sandbox plugin import SOURCE`")
	} else {
		w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tNAME\tVERSION\tLIBRARY VERSION\tTOOLS\tSOURCE")
		for _, r := range rows {
			src := r.Origin.Location
			if r.Origin.Kind == plugins.OriginDuplicate {
				src = "copy of " + src
			}
			if r.CreatedByAgnt {
				src = "agent " + r.Origin.Agent
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", r.ID, termsafe.Line(r.Name), termsafe.Line(orDash(r.Version)), r.LibraryVer, len(r.Tools), orDash(src))
		}
		for _, d := range damaged {
			fmt.Fprintf(w, "%s\t(DAMAGED: `plugin remove %s` removes it, importing it again replaces it; the file is kept aside)\t-\t-\t-\t-\n", d.ID, d.ID)
		}
		w.Flush()
	}
	if err != nil {
		return c.fail(err)
	}
	return ExitOK
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (c *cli) pluginShow(ctx context.Context, src pluginSource, id string, asJSON bool) int {
	e, err := src.get(ctx, id)
	if err != nil {
		return c.fail(err)
	}
	if asJSON {
		json.NewEncoder(c.out).Encode(e)
		return ExitOK
	}
	cur := e.Current()
	p := cur.Recipe
	fmt.Fprintf(c.out, "%s (%s)\n  %s\n", termsafe.Line(p.Name), e.ID, termsafe.String(p.Description))
	for _, kv := range [][2]string{{"version", p.Version}, {"author", p.Author}, {"source", p.Source}} {
		if kv[1] != "" {
			fmt.Fprintf(c.out, "  %s: %s\n", kv[0], kv[1])
		}
	}
	if len(p.Dependencies) > 0 {
		fmt.Fprintf(c.out, "  packages: %s\n", strings.Join(p.Dependencies, " "))
	}
	if p.Setup != "" {
		fmt.Fprintf(c.out, "  setup: %s\n", p.Setup)
	}
	if len(p.Secrets) > 0 {
		fmt.Fprintf(c.out, "  secrets: %s\n", strings.Join(p.Secrets, ", "))
	}
	if p.Permissions != nil {
		fmt.Fprintf(c.out, "  network: %s, inference: %v\n", orDash(p.Permissions.Network), p.Permissions.Inference)
	}
	fmt.Fprintf(c.out, "  files: %d\n", len(p.Files))
	for _, t := range p.Tools {
		var params []string
		for name, prm := range t.Parameters {
			s := name + " " + prm.Type
			if len(prm.Default) > 0 {
				s += " = " + string(prm.Default)
			}
			params = append(params, s)
		}
		fmt.Fprintf(c.out, "  tool %s(%s): %s\n", p.ToolName(t.ID), strings.Join(slices.Sorted(slices.Values(params)), ", "), termsafe.String(t.Description))
	}
	fmt.Fprintln(c.out, "versions:")
	for _, v := range e.Versions {
		fmt.Fprintf(c.out, "  %d  %s  %s %s", v.Number, v.SavedAt.Format("2006-01-02 15:04:05Z"), v.Origin.Kind, v.Origin.Location)
		if v.Origin.Commit != "" {
			fmt.Fprintf(c.out, " @ %s", v.Origin.Commit)
		}
		fmt.Fprintln(c.out)
	}
	for _, pr := range plugins.CheckHosts(p, plugins.NewAllowlist(src.allowlist(ctx))) {
		fmt.Fprintf(c.out, "warning: %s: %s\n", pr.Field, pr.Message)
	}
	return ExitOK
}

var errDeclined = errors.New("declined")

// installed is the per-agent install records of the data dir.
func (c *cli) installed() *plugins.Installed { return plugins.NewInstalled(c.paths.AgentStateDir()) }

// termPrompter asks for a plugin's missing secret on the terminal and
// stores it for the agent.
type termPrompter struct{ c *cli }

func (p termPrompter) PromptSecret(_ context.Context, req tools.SecretRequest) error {
	fmt.Fprintf(p.c.err, "%s has no secret %s, %s.\n", req.Agent.Slug, req.Key, termsafe.String(req.Description))
	v, err := p.c.readSecret(req.Agent.Slug, req.Key)
	if err != nil {
		return err
	}
	if v == "" {
		return fmt.Errorf("%w (no value typed)", tools.ErrSecretDenied)
	}
	return p.c.sec.Set(req.Agent.Slug, req.Key, v)
}

func (c *cli) pluginInstall(ctx context.Context, src pluginSource, id, agentRef string, install, yes bool) int {
	a, err := c.lookupAgent(ctx, agentRef)
	if err != nil {
		return c.fail(err)
	}
	// Installs run in the owner's tools environment, on the running VM.
	ctl, vmErr := c.running(ctx)
	if vmErr != nil {
		vmErr = fmt.Errorf("%w (start it with `osaurus-sandbox start`)", vmErr)
	}
	if !install {
		if have, err := src.installs(ctx, a); err == nil {
			if _, ok := have[id]; !ok {
				return c.fail(fmt.Errorf("plugin %s is not installed for %s; nothing was changed (`osaurus-sandbox agent show %s` lists its plugins)", id, a.Name, a.Slug))
			}
		}
		if vmErr != nil {
			// The record can go without the VM: the owner drops it
			// (this process, for the command, when none runs).
			if ctl, err = c.owner(ctx); err != nil {
				return c.fail(err)
			}
			defer ctl.Close()
		}
		deferred, err := ctl.UninstallPlugin(ctx, api.PluginUninstallRequest{Agent: a.ID, Plugin: id, IfRunning: true})
		if err != nil {
			return c.fail(err)
		}
		if deferred != nil {
			// The record can go without the VM; the folder waits for it.
			fmt.Fprintf(c.out, "uninstalled %s from %s; its folder %s/plugins/%s is removed next time (%v)\n", id, a.Name, a.Home(), id, deferred)
			return ExitOK
		}
		fmt.Fprintf(c.out, "uninstalled %s from %s\n", id, a.Name)
		return ExitOK
	}
	// The recipe reviewed is the one the owner installs: its library's.
	e, err := src.get(ctx, id)
	if err != nil {
		return c.fail(err)
	}
	cur := e.Current()
	if code := c.confirmGrant(id+" for "+a.Name, datadir.ReviewInstallWith(src.allowlist(ctx), a, cur), yes, "installed"); code != ExitOK {
		return code
	}
	if vmErr != nil {
		return c.fail(vmErr)
	}
	// Not through a context: the agent's secrets are the far side's
	// (or this machine's store of them), and its install says what lacks.
	if f, ok := c.in.(*os.File); ok && c.remote == nil && term.IsTerminal(int(f.Fd())) {
		// A secret the plugin needs and the agent lacks is asked for
		// here, without echo, as `secret set` would.
		if err := c.askMissingSecrets(ctx, a, cur.Recipe); err != nil {
			return c.fail(err)
		}
	}
	err = ctl.InstallPlugin(ctx, api.PluginInstallRequest{Agent: a.ID, Plugin: id, Version: cur.Number}, func(s tools.InstallStep) {
		fmt.Fprintf(c.err, "  %s...\n", s)
	})
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "installed %s (library version %d) for %s\n", id, cur.Number, a.Name)
	if !a.AutonomousExec.Enabled {
		fmt.Fprintf(c.out, "its tools appear once autonomous exec is on: `osaurus-sandbox agent set %s enabled true`\n", a.Slug)
	}
	for _, t := range cur.Recipe.Tools {
		fmt.Fprintf(c.out, "  tool %s\n", cur.Recipe.ToolName(t.ID))
	}
	return ExitOK
}

// running is the owner of the running VM; it fails with
// control.ErrNotRunning when the VM isn't running. The connection lives as
// long as the process (CLI commands are short).
func (c *cli) running(ctx context.Context) (api.Controller, error) {
	var cl api.Controller
	var err error
	if c.remote != nil {
		cl, err = c.farOwner(ctx) // started if none runs: nothing local to ask
	} else {
		cl, err = client.Dial(ctx, c.paths)
	}
	if err != nil {
		return nil, err
	}
	st, err := cl.Status(ctx)
	if err == nil && st.State != control.Running {
		err = control.ErrNotRunning
	}
	if err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// askMissingSecrets asks on the terminal for each secret the plugin
// declares that the agent has no value for, and stores it.
func (c *cli) askMissingSecrets(ctx context.Context, a agents.Agent, p *plugins.Plugin) error {
	_, err := tools.StoreSecrets{Store: c.sec}.PluginSecrets(ctx, a.Slug, p.ID(), p.Secrets)
	var miss *tools.MissingSecretsError
	if !errors.As(err, &miss) {
		return nil // all there, or the owner's install says what is wrong
	}
	for _, k := range miss.Names {
		req := tools.SecretRequest{Agent: a, Key: k, Description: "needed by the plugin " + p.Name + " (" + p.ID() + ")"}
		if err := (termPrompter{c}).PromptSecret(ctx, req); err != nil {
			return err
		}
	}
	return nil
}

// unjoin returns the errors errors.Join put together, or err alone.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// pluginRepair rewrites each agent's damaged installed.json with the
// installations it can still read, keeping the damaged file aside.
func (c *cli) pluginRepair(ctx context.Context) int {
	ctl, err := c.owner(ctx)
	if err != nil {
		return c.fail(err)
	}
	defer ctl.Close()
	r, err := ctl.RepairPlugins(ctx)
	if c.remote != nil {
		err = c.farError(err, "repair its plugins' install records")
	}
	if err != nil {
		return c.fail(err)
	}
	rs := r.Repairs
	if len(rs) == 0 {
		fmt.Fprintln(c.out, "every agent's install record is fine; nothing to repair")
		return ExitOK
	}
	names := map[string]string{}
	if src, err := c.agentSource(); err == nil { // the far side's, through a context
		list, _ := src.list(ctx)
		for _, a := range list {
			names[a.ID] = a.Slug
		}
	}
	for _, r := range rs {
		who := cmp.Or(names[r.AgentID], r.AgentID)
		fmt.Fprintf(c.out, "%s: moved the damaged file to %s\n", who, r.Aside)
		if len(r.Kept) > 0 {
			fmt.Fprintf(c.out, "%s: kept %d plugins: %s\n", who, len(r.Kept), strings.Join(r.Kept, ", "))
		}
		for _, d := range r.Dropped {
			fmt.Fprintf(c.out, "%s: could not read: %s (install it again with `osaurus-sandbox %splugin install ID --agent %s`)\n", who, d, c.contextArg(), who)
		}
	}
	return ExitOK
}
