package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/internal/filewatch"
	"github.com/osaurus/osaurus-sandbox/internal/termsafe"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// PluginInstaller installs and uninstalls library plugins for agents on
// the VM; the owner does it (controllerPlugins), as for the CLI.
type PluginInstaller interface {
	// Install reports each step before it runs.
	Install(ctx context.Context, a agents.Agent, v plugins.Version, progress func(tools.InstallStep)) error
	// Uninstall removes the tools; deferred says why the folder waits
	// for the VM.
	Uninstall(ctx context.Context, a agents.Agent, pluginID string) (deferred, err error)
}

// PluginSource is what the Plugins tab works on.
type PluginSource struct {
	Library   *plugins.Library
	Installed *plugins.Installed
	Installer PluginInstaller
	// Writer saves, duplicates and removes library plugins: the owner.
	// The tab reads the library and writes it only through Writer.
	Writer api.PluginLibraryOps
	// HTTPClient makes imports' requests; nil means the importer's.
	HTTPClient *http.Client
	// Changes, when set, calls fn (from any goroutine) after a plugin is
	// installed or uninstalled in this process's tools environment, which
	// is how an agent registering a plugin in the owner shows at once. The
	// tab also follows the library's files, for other processes.
	Changes func(fn func()) (cancel func())
}

// PluginHost gives the window its Plugins tab; Controlled implements it.
type PluginHost interface {
	Plugins() (PluginSource, error)
}

var _ PluginHost = (*Controlled)(nil)

// Plugins is the library of the data dir, installed through the owner's
// tools environment.
func (c *Controlled) Plugins() (PluginSource, error) {
	lib, err := plugins.OpenLibrary(c.paths.PluginsDir())
	if err != nil {
		return PluginSource{}, err
	}
	return PluginSource{Library: lib, Installed: plugins.NewInstalled(c.paths.AgentStateDir()),
		Installer: controllerPlugins{c.ctl, c.paths}, Writer: c.ctl, Changes: c.PluginChanges}, nil
}

// controllerPlugins is the PluginInstaller of a Controller.
type controllerPlugins struct {
	ctl   api.Controller
	paths config.Paths
}

// Review is what installing v for a hands the recipe, for the consent
// dialog.
func (p controllerPlugins) Review(a agents.Agent, v plugins.Version) plugins.Grant {
	return datadir.ReviewInstall(p.paths, a, v)
}

func (p controllerPlugins) Install(ctx context.Context, a agents.Agent, v plugins.Version, progress func(tools.InstallStep)) error {
	return p.ctl.InstallPlugin(ctx, api.PluginInstallRequest{Agent: a.ID, Plugin: v.Recipe.ID(), Version: v.Number}, progress)
}

func (p controllerPlugins) Uninstall(ctx context.Context, a agents.Agent, pluginID string) (deferred, err error) {
	return p.ctl.UninstallPlugin(ctx, api.PluginUninstallRequest{Agent: a.ID, Plugin: pluginID})
}

// pluginFollowInterval is how often the tab re-reads the library where
// changes aren't notified (see filewatch).
const pluginFollowInterval = 2 * time.Second

// pluginsTab shows the plugin library: import, edit, install for an
// agent with each step as it runs, uninstall, export, duplicate, remove;
// and offers to remove a plugin an agent has just created.
type pluginsTab struct {
	b   Backend
	reg *agents.Registry
	win fyne.Window
	do  func(func())
	src PluginSource
	// far is a remote context's owner, whose library this is (nil: this
	// machine's, src.Library and src.Installed); its reads go off the UI
	// goroutine. farAllow is its setup allowlist as last read, which
	// recipes are reviewed against (on the UI goroutine only).
	far      *farPlugins
	farAllow []string
	poll     time.Duration // farPoll when the tab was built

	List   *widget.List
	Status *widget.Label

	ImportFile          *widget.Button
	URL, GitHub         *widget.Entry
	ImportURL, ImportGH *widget.Button
	Detail              *widget.Label
	Agent               *widget.Select
	Install, Uninstall  *widget.Button
	Progress            *widget.Label
	Export, Duplicate   *widget.Button
	Remove, New         *widget.Button
	Editor              *widget.Entry
	Problems            *widget.Label
	Save                *widget.Button
	Confirm             *dialog.ConfirmDialog // the open host warning or remove confirmation
	Discard             *dialog.ConfirmDialog // the open "discard unsaved edits?" question
	Notice              *dialog.ConfirmDialog // the latest agent-created plugin notice
	entries             []*plugins.Entry
	installedFor        map[string][]string // plugin id → agent names
	known               map[string]int      // current version of each plugin, to notice agents' registrations
	loaded              bool
	selected            string
	loadedText          string   // the recipe as the window last put it in the editor
	head                string   // what the progress is of
	steps               []string // install progress lines
	busy                bool     // an install or uninstall is running
}

func newPluginsTab(b Backend, src PluginSource, reg *agents.Registry, win fyne.Window, do func(func())) *pluginsTab {
	return newPluginsTabInto(&pluginsTab{}, b, src, reg, win, do)
}

// newPluginsTabInto builds the tab in t (which may say where its library
// is: far).
func newPluginsTabInto(t *pluginsTab, b Backend, src PluginSource, reg *agents.Registry, win fyne.Window, do func(func())) *pluginsTab {
	t.b, t.reg, t.win, t.do, t.src = b, reg, win, do, src
	t.known, t.installedFor = map[string]int{}, map[string][]string{}
	t.Status = wrapped("")
	t.ImportFile = widget.NewButton("Import file…", t.onImportFile)
	t.URL = widget.NewEntry()
	t.URL.SetPlaceHolder("https://example.org/plugin.json")
	t.ImportURL = widget.NewButton("Import", func() { t.onImportURL() })
	t.GitHub = widget.NewEntry()
	t.GitHub.SetPlaceHolder("github.com/OWNER/REPO[/tree/REF/PATH]")
	t.ImportGH = widget.NewButton("Import", func() { t.onImportGitHub() })
	t.List = widget.NewList(
		func() int { return len(t.entries) },
		func() fyne.CanvasObject {
			title := widget.NewLabelWithStyle("plugin", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
			title.Truncation = fyne.TextTruncateEllipsis
			sub := widget.NewLabel("source")
			sub.Truncation = fyne.TextTruncateEllipsis
			return container.NewVBox(title, sub)
		},
		func(i widget.ListItemID, o fyne.CanvasObject) {
			if i >= len(t.entries) {
				return
			}
			title, sub := t.row(t.entries[i])
			c := o.(*fyne.Container)
			c.Objects[0].(*widget.Label).SetText(title)
			c.Objects[1].(*widget.Label).SetText(sub)
		})
	t.List.OnSelected = func(i widget.ListItemID) {
		if i >= len(t.entries) || t.entries[i].ID == t.selected {
			return
		}
		id, prev := t.entries[i].ID, t.selected
		t.keepEdits(func() {
			t.selected = id
			t.showSelected(true)
		}, func() {
			// Back to the plugin whose recipe is being edited.
			if j := t.index(prev); j >= 0 {
				t.List.Select(j)
			} else {
				t.List.UnselectAll()
			}
		})
	}
	t.Detail = wrapped("Select a plugin, or import one.")
	t.Agent = widget.NewSelect(nil, func(string) { t.updateButtons() })
	t.Agent.PlaceHolder = "(agent)"
	t.Install = widget.NewButton("Install", t.onInstall)
	t.Uninstall = widget.NewButton("Uninstall", t.onUninstall)
	t.Progress = wrapped("")
	t.Export = widget.NewButton("Export…", t.onExport)
	t.Duplicate = widget.NewButton("Duplicate", t.onDuplicate)
	t.Remove = widget.NewButton("Remove…", t.onRemove)
	t.New = widget.NewButton("New", t.onNew)
	t.Editor = widget.NewMultiLineEntry()
	t.Editor.TextStyle = fyne.TextStyle{Monospace: true}
	t.Editor.SetPlaceHolder("The plugin's JSON recipe")
	t.Editor.SetMinRowsVisible(6)
	t.Editor.OnChanged = func(string) { t.validate() }
	t.Problems = wrapped("")
	t.Save = widget.NewButton("Save as new version", t.onSave)
	if t.far == nil { // a remote context's is read by follow
		t.reload()
	}
	t.showSelected(true)
	return t
}

func (t *pluginsTab) content() fyne.CanvasObject {
	imports := widget.NewForm(
		widget.NewFormItem("File", container.NewHBox(t.ImportFile)),
		widget.NewFormItem("URL", container.NewBorder(nil, nil, nil, t.ImportURL, t.URL)),
		widget.NewFormItem("GitHub", container.NewBorder(nil, nil, nil, t.ImportGH, t.GitHub)),
	)
	library := widget.NewCard("Library", "", container.NewBorder(
		container.NewVBox(imports, t.Status), nil, nil, nil, t.List))
	install := container.NewBorder(nil, nil, widget.NewLabel("Agent"), container.NewHBox(t.Install, t.Uninstall), t.Agent)
	actions := container.NewHBox(t.Export, t.Duplicate, t.Remove)
	info := container.NewVScroll(container.NewVBox(t.Detail, install, actions, t.Progress))
	checks := container.NewVSplit(t.Editor, container.NewVScroll(t.Problems))
	checks.Offset = 0.7
	editor := container.NewBorder(nil, container.NewHBox(t.Save, t.New), nil, nil, checks)
	right := container.NewVSplit(info, editor)
	right.Offset = 0.4
	detail := widget.NewCard("Plugin", "", right)
	split := container.NewHSplit(library, detail)
	split.Offset = 0.42
	return split
}

// follow re-reads the library and the install records when they change,
// whichever process changed them, until ctx ends.
func (t *pluginsTab) follow(ctx context.Context) {
	if t.far != nil {
		t.followFar(ctx)
		return
	}
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	if t.src.Changes != nil {
		defer t.src.Changes(poke)()
	}
	if t.reg != nil {
		defer t.reg.Subscribe(poke)() // agents' names in the list
	}
	w := filewatch.Watch(ctx, pluginFollowInterval, t.watched()...)
	defer w.Close()
	// What changed between the tab's first read and the watch's start.
	t.do(t.reload)
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.C():
		case <-wake:
		}
		// Before the read, so that nothing written after it is missed.
		w.Reset(t.watched()...)
		t.do(t.reload)
	}
}

// watched is what reload reads: the library and each agent's install
// record (agents come and go, so their folder too).
func (t *pluginsTab) watched() []filewatch.Target {
	ts := []filewatch.Target{filewatch.Dir(t.src.Library.Dir())}
	if t.src.Installed != nil {
		ts = append(ts, t.src.Installed.WatchTargets()...)
	}
	return ts
}

// row is a library line: name, id, version and flags; then the source
// and who installed it.
func (t *pluginsTab) row(e *plugins.Entry) (string, string) {
	cur := e.Current()
	p := cur.Recipe
	title := fmt.Sprintf("%s (%s)", p.Name, e.ID)
	if p.Version != "" {
		title += " " + p.Version
	}
	title += fmt.Sprintf(" · library v%d", cur.Number)
	if createdByAgent(p) {
		title += " · ⚑ agent-created"
	}
	sub := t.sourceText(cur.Origin)
	if names := t.installedFor[e.ID]; len(names) > 0 {
		sub += " · installed for " + strings.Join(names, ", ")
	} else {
		sub += " · not installed"
	}
	return title, sub
}

func createdByAgent(p *plugins.Plugin) bool { return p.Metadata["created_by"] == "agent" }

// sourceText says where a version came from.
func (t *pluginsTab) sourceText(o plugins.Origin) string {
	switch o.Kind {
	case plugins.OriginFile:
		return "file " + o.Location
	case plugins.OriginURL:
		return "URL " + o.Location
	case plugins.OriginGitHub:
		s := "GitHub " + o.Location
		if o.Commit != "" {
			s += " @ " + shortCommit(o.Commit)
		}
		return s
	case plugins.OriginEditor:
		return "edited in the window"
	case plugins.OriginDuplicate:
		return "copy of " + o.Location
	case plugins.OriginAgent:
		return "created by agent " + t.agentName(o.Agent)
	}
	return o.Kind + " " + o.Location
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// agentName is the name of the agent with id, or the id.
func (t *pluginsTab) agentName(id string) string {
	if a, err := t.reg.Get(id); err == nil {
		return a.Name
	}
	return id
}

// libraryRead is one read of the library: its entries, the ids of the
// agents each plugin is installed for, a remote context's setup
// allowlist, and what could not be read.
type libraryRead struct {
	list     []*plugins.Entry
	installs map[string][]string
	allow    []string
	err      error
}

// readLocal reads this machine's library and install records.
func (t *pluginsTab) readLocal() libraryRead {
	list, err := t.src.Library.List()
	r := libraryRead{list: list, installs: map[string][]string{}, err: err}
	for _, e := range list {
		if t.src.Installed == nil {
			break
		}
		r.installs[e.ID], _ = t.src.Installed.Agents(e.ID)
	}
	return r
}

// reload re-reads the library and the install records; on the UI
// goroutine. A plugin an agent created since the last read gets a notice.
func (t *pluginsTab) reload() { t.reloadThen(nil) }

// reloadThen reloads, then runs then (may be nil) on the UI goroutine:
// at once for this machine's files, once the far side's owner answered
// for a remote context's.
func (t *pluginsTab) reloadThen(then func()) {
	if t.far == nil {
		t.apply(t.readLocal())
		if then != nil {
			then()
		}
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), farCall)
		defer cancel()
		r := t.far.read(ctx)
		t.do(func() {
			t.apply(r)
			if then != nil {
				then()
			}
		})
	}()
}

// apply shows a read of the library.
func (t *pluginsTab) apply(r libraryRead) {
	list, err := r.list, r.err
	if t.far != nil && r.err == nil {
		t.farAllow = r.allow
	}
	installedFor := map[string][]string{}
	for _, e := range list {
		for _, id := range r.installs[e.ID] {
			installedFor[e.ID] = append(installedFor[e.ID], t.agentName(id))
		}
	}
	// An agent registering a plugin, new or again (a new version), is
	// announced; what the user saves or imports is not.
	var fresh []*plugins.Entry
	known := map[string]int{}
	for _, e := range list {
		cur := e.Current()
		if t.loaded && cur.Number > t.known[e.ID] && cur.Origin.Kind == plugins.OriginAgent {
			fresh = append(fresh, e)
		}
		known[e.ID] = cur.Number
	}
	t.known, t.loaded = known, true
	t.refreshAgents()
	if err != nil {
		t.Status.SetText(err.Error())
	}
	if !t.changed(list, installedFor) {
		return
	}
	t.entries, t.installedFor = list, installedFor
	t.List.Refresh()
	if i := t.index(t.selected); i >= 0 {
		t.List.Select(i)
	} else {
		t.selected = ""
		t.List.UnselectAll()
	}
	t.showSelected(false)
	for _, e := range fresh {
		t.noticeAgentPlugin(e)
	}
}

func (t *pluginsTab) changed(list []*plugins.Entry, installedFor map[string][]string) bool {
	if len(list) != len(t.entries) {
		return true
	}
	for i, e := range list {
		if e.ID != t.entries[i].ID || e.Current().Number != t.entries[i].Current().Number ||
			!slices.Equal(installedFor[e.ID], t.installedFor[e.ID]) {
			return true
		}
	}
	return false
}

func (t *pluginsTab) index(id string) int {
	return slices.IndexFunc(t.entries, func(e *plugins.Entry) bool { return e.ID == id })
}

func (t *pluginsTab) current() *plugins.Entry {
	if i := t.index(t.selected); i >= 0 {
		return t.entries[i]
	}
	return nil
}

func (t *pluginsTab) refreshAgents() {
	var names []string
	for _, a := range t.reg.List() {
		names = append(names, a.Name)
	}
	if !slices.Equal(names, t.Agent.Options) {
		t.Agent.SetOptions(names)
		if !slices.Contains(names, t.Agent.Selected) {
			t.Agent.ClearSelected()
		}
	}
}

// showSelected shows the selected plugin; withRecipe also loads its
// recipe into the editor (not on a background refresh, which would throw
// away an edit).
func (t *pluginsTab) showSelected(withRecipe bool) {
	e := t.current()
	if e == nil {
		t.Detail.SetText("Select a plugin, or import one. New starts a recipe in the editor.")
		if withRecipe {
			t.setRecipe("")
		}
		t.updateButtons()
		return
	}
	cur := e.Current()
	p := cur.Recipe
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)", p.Name, e.ID)
	if p.Version != "" {
		fmt.Fprintf(&b, ", version %s", p.Version)
	}
	if p.Author != "" {
		fmt.Fprintf(&b, ", by %s", p.Author)
	}
	fmt.Fprintf(&b, "\n%s\nLibrary version %d of %d kept, from %s", p.Description, cur.Number, len(e.Versions), t.sourceText(cur.Origin))
	if cur.Origin.Resolved != "" && cur.Origin.Resolved != cur.Origin.Location {
		fmt.Fprintf(&b, " (read from %s)", cur.Origin.Resolved)
	}
	if createdByAgent(p) {
		b.WriteString("\n⚑ Created by an agent: restricted defaults applied; review it before trusting it.")
	}
	var tools []string
	for _, tl := range p.Tools {
		tools = append(tools, p.ToolName(tl.ID))
	}
	if len(tools) > 0 {
		fmt.Fprintf(&b, "\nTools: %s", strings.Join(tools, ", "))
	}
	if names := t.installedFor[e.ID]; len(names) > 0 {
		fmt.Fprintf(&b, "\nInstalled for: %s", strings.Join(names, ", "))
	} else {
		b.WriteString("\nNot installed for any agent.")
	}
	t.Detail.SetText(termsafe.String(b.String())) // names and descriptions may be an agent's
	if withRecipe {
		if data, err := p.Encode(); err == nil {
			t.setRecipe(string(data))
		}
	}
	t.updateButtons()
}

func (t *pluginsTab) updateButtons() {
	has := t.current() != nil
	for _, btn := range []*widget.Button{t.Export, t.Duplicate, t.Remove} {
		setEnabled(btn, has)
	}
	agent := has && t.Agent.Selected != "" && !t.busy
	setEnabled(t.Install, agent)
	setEnabled(t.Uninstall, agent)
}

// selectID re-reads the library and shows id with its recipe, then runs
// then (may be nil) with its entry (nil when it is gone).
func (t *pluginsTab) selectID(id string, then func(*plugins.Entry)) {
	t.selected = id
	t.reloadThen(func() {
		if t.selected != id {
			return // the user chose another meanwhile
		}
		if i := t.index(id); i >= 0 {
			t.List.Select(i)
		}
		t.showSelected(true)
		if then != nil {
			then(t.current())
		}
	})
}

// allow is the setup allowlist recipes are reviewed against: where they
// would run, the far side's for a remote context.
func (t *pluginsTab) allow() []string {
	if t.far != nil {
		return t.farAllow
	}
	cfg, err := t.b.Settings()
	if err != nil {
		cfg = config.Defaults()
	}
	return cfg.SetupAllowlist()
}

// call runs fn, which asks the owner, then done with its error on the UI
// goroutine: at once for this machine's owner, off the UI goroutine for a
// remote context's (the link may be slow).
func (t *pluginsTab) call(timeout time.Duration, fn func(context.Context) error, done func(error)) {
	run := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return fn(ctx)
	}
	if t.far == nil {
		done(run())
		return
	}
	go func() {
		err := run()
		t.do(func() { done(err) })
	}()
}

// --- import ---

func (t *pluginsTab) onImportFile() {
	d := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
		if err != nil {
			t.Status.SetText(err.Error())
			return
		}
		if r == nil {
			return
		}
		path := r.URI().Path()
		r.Close()
		t.importSource(path)
	}, t.win)
	d.Show()
}

func (t *pluginsTab) onImportURL() {
	u := strings.TrimSpace(t.URL.Text)
	if !strings.HasPrefix(strings.ToLower(u), "https://") {
		t.Status.SetText("Give an https:// address of a plugin's JSON file.")
		return
	}
	t.importSource(u)
}

// onImportGitHub takes github.com/OWNER/REPO (with or without https://),
// optionally /tree/REF/PATH or /blob/REF/PATH/plugin.json, or OWNER/REPO.
func (t *pluginsTab) onImportGitHub() {
	s := strings.TrimSpace(t.GitHub.Text)
	lower := strings.ToLower(s)
	for _, p := range []string{"https://", "http://"} {
		if strings.HasPrefix(lower, p) {
			s, lower = s[len(p):], lower[len(p):]
		}
	}
	if s == "" {
		t.Status.SetText("Give a GitHub repository: github.com/OWNER/REPO, optionally /tree/REF/PATH or /blob/REF/PATH/plugin.json.")
		return
	}
	if !strings.HasPrefix(lower, "github.com/") && !strings.HasPrefix(lower, "www.github.com/") {
		s = "github.com/" + s
	}
	t.importSource(s)
}

func (t *pluginsTab) setImporting(on bool) {
	for _, b := range []*widget.Button{t.ImportFile, t.ImportURL, t.ImportGH} {
		setEnabled(b, !on)
	}
}

// importSource fetches and validates source away from the UI, then
// saves it, after the user accepts any hosts outside the allowlist.
func (t *pluginsTab) importSource(source string) {
	t.keepEdits(func() { t.startImport(source) }, nil)
}

func (t *pluginsTab) startImport(source string) {
	t.Status.SetText("Importing " + source + "…")
	t.setImporting(true)
	cfg := config.Defaults()
	if t.far == nil { // a remote context's would be asked over the link
		if c, err := t.b.Settings(); err == nil {
			cfg = c
		}
	}
	im := datadir.PluginImporter(cfg, t.src.HTTPClient)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		p, origin, err := im.Import(ctx, source)
		t.do(func() {
			t.setImporting(false)
			if err != nil {
				t.Status.SetText(err.Error())
				return
			}
			declined := func() { t.Status.SetText("Nothing was imported from " + source + ".") }
			if g := plugins.Review(p, origin, t.allow(), nil); g.NeedsConsent() {
				t.confirmLines("What this plugin gets", p.ID()+" gets, once installed:", g.Lines(), "Import anyway", func() { t.save(p, origin) }, declined)
				return
			}
			t.save(p, origin)
		})
	}()
}

// confirmHosts runs save at once when p reaches only allowlisted hosts,
// else after the user accepts the warning listing the others.
func (t *pluginsTab) confirmHosts(p *plugins.Plugin, verb string, save, declined func()) {
	outside := plugins.CheckHosts(p, plugins.NewAllowlist(t.allow()))
	if len(outside) == 0 {
		save()
		return
	}
	lines := make([]string, len(outside))
	for i, pr := range outside {
		lines[i] = pr.Field + ": " + pr.Message
	}
	t.confirmLines("Hosts outside the allowlist", p.ID()+" reaches hosts outside the setup allowlist:", lines, verb+" anyway", save, declined)
}

// confirmLines asks the user to accept what head and lines say before
// accept runs; Cancel runs declined.
func (t *pluginsTab) confirmLines(title, head string, lines []string, accept string, save, declined func()) {
	var b strings.Builder
	b.WriteString(head + "\n\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "• %s\n", l)
	}
	b.WriteString("\nRead the recipe first. Accept only if you trust it with the above; its network permission still applies when it runs.")
	msg := widget.NewLabel(b.String())
	msg.Wrapping = fyne.TextWrapWord
	d := dialog.NewCustomConfirm(title, accept, "Cancel", msg, func(ok bool) {
		t.Confirm = nil
		if ok {
			save()
		} else {
			declined()
		}
	}, t.win)
	d.Resize(fyne.NewSize(560, 320))
	t.Confirm = d
	d.Show()
}

// save stores p as a new version and selects it.
func (t *pluginsTab) save(p *plugins.Plugin, o plugins.Origin) {
	b, err := p.Encode()
	if err != nil {
		t.Status.SetText(err.Error())
		return
	}
	var r api.PluginSaved
	t.call(30*time.Second, func(ctx context.Context) (err error) {
		r, err = t.src.Writer.SavePlugin(ctx, api.PluginSaveRequest{Recipe: b, Origin: o})
		return err
	}, func(err error) {
		if err != nil {
			t.Status.SetText(err.Error())
			return
		}
		t.selectID(r.ID, func(e *plugins.Entry) {
			if e == nil {
				t.Status.SetText(fmt.Sprintf("Saved %s, which the library no longer lists.", r.ID))
				return
			}
			cur := e.Current()
			switch {
			case !r.Changed:
				t.Status.SetText(fmt.Sprintf("%s is unchanged (library version %d).", e.ID, cur.Number))
			case len(e.Versions) > 1:
				t.Status.SetText(fmt.Sprintf("Saved %s as library version %d (from %s).", e.ID, cur.Number, t.sourceText(o)))
			default:
				t.Status.SetText(fmt.Sprintf("Added %s (from %s).", e.ID, t.sourceText(o)))
			}
		})
	})
}

// --- editor ---

// parse decodes and validates the editor's text; problems lists every
// error (each naming its field) then allowlist warnings.
func (t *pluginsTab) parse() (*plugins.Plugin, []string, bool) {
	text := strings.TrimSpace(t.Editor.Text)
	if text == "" {
		return nil, nil, false
	}
	p, err := plugins.DecodeBytes([]byte(text))
	if err == nil {
		err = p.Validate()
	}
	var lines []string
	var inv *plugins.InvalidError
	switch {
	case errors.As(err, &inv):
		for _, pr := range inv.Problems {
			lines = append(lines, "✗ "+pr.String())
		}
	case err != nil:
		lines = append(lines, "✗ "+err.Error())
	}
	if err != nil {
		return nil, lines, false
	}
	for _, pr := range plugins.CheckHosts(p, plugins.NewAllowlist(t.allow())) {
		lines = append(lines, "⚠ "+pr.Field+": "+pr.Message)
	}
	return p, lines, true
}

// validate shows the editor's problems as the recipe is typed.
func (t *pluginsTab) validate() {
	p, lines, ok := t.parse()
	switch {
	case p == nil && len(lines) == 0:
		t.Problems.SetText("")
	case !ok:
		t.Problems.SetText(fmt.Sprintf("%d problem(s):\n%s", len(lines), strings.Join(lines, "\n")))
	case len(lines) > 0:
		t.Problems.SetText(fmt.Sprintf("Valid (id %s), with warnings:\n%s", p.ID(), strings.Join(lines, "\n")))
	default:
		t.Problems.SetText(fmt.Sprintf("Valid (id %s).", p.ID()))
	}
	setEnabled(t.Save, ok)
}

func (t *pluginsTab) onSave() {
	p, _, ok := t.parse()
	if !ok {
		return
	}
	t.confirmHosts(p, "Save", func() { t.save(p, plugins.Origin{Kind: plugins.OriginEditor}) }, func() {
		t.Status.SetText("Not saved.")
	})
}

// newRecipe is what New puts in the editor.
const newRecipe = `{
  "name": "My Plugin",
  "description": "What it does",
  "version": "1.0.0",
  "tools": [
    {
      "id": "hello",
      "description": "Greets someone",
      "parameters": {"who": {"type": "string", "default": "world"}},
      "run": "echo hello $PARAM_WHO"
    }
  ]
}
`

func (t *pluginsTab) onNew() {
	t.keepEdits(func() {
		t.selected = ""
		t.List.UnselectAll()
		t.showSelected(false)
		t.setRecipe(newRecipe)
		t.Status.SetText("Edit the recipe and Save: it is added to the library under the id its name gives.")
	}, nil)
}

// setRecipe puts a recipe in the editor as the window's own (not an edit).
func (t *pluginsTab) setRecipe(s string) {
	t.loadedText = s
	t.Editor.SetText(s)
}

// unsaved reports whether the editor holds edits the user hasn't saved.
func (t *pluginsTab) unsaved() bool { return t.Editor.Text != t.loadedText }

// keepEdits runs replace, which puts something else in the editor, at once
// when there is nothing unsaved in it, and otherwise only once the user
// agrees to discard the edits; kept (may be nil) runs when they don't.
func (t *pluginsTab) keepEdits(replace, kept func()) {
	if !t.unsaved() {
		replace()
		return
	}
	t.Discard = dialog.NewConfirm("Discard your edits?",
		"The recipe in the editor has changes that are not saved. Discard them?",
		func(ok bool) {
			t.Discard = nil
			switch {
			case ok:
				replace()
			case kept != nil:
				kept()
			}
		}, t.win)
	t.Discard.SetConfirmText("Discard")
	t.Discard.SetDismissText("Keep editing")
	t.Discard.Show()
}

// --- install ---

func (t *pluginsTab) agent() (agents.Agent, bool) {
	for _, a := range t.reg.List() {
		if a.Name == t.Agent.Selected {
			return a, true
		}
	}
	return agents.Agent{}, false
}

// showSteps renders the install progress.
func (t *pluginsTab) showSteps(tail string) {
	lines := append([]string{t.head}, t.steps...)
	if tail != "" {
		lines = append(lines, tail)
	}
	t.Progress.SetText(strings.Join(lines, "\n"))
}

// step marks the running step done and shows the next as running.
func (t *pluginsTab) step(name string) {
	if n := len(t.steps); n > 0 {
		t.steps[n-1] = "✓ " + strings.TrimPrefix(t.steps[n-1], "… ")
	}
	t.steps = append(t.steps, "… "+name)
	t.showSteps("")
}

// finish marks the running step done, or failed with err.
func (t *pluginsTab) finish(err error, done string) {
	if n := len(t.steps); n > 0 {
		mark := "✓ "
		if err != nil {
			mark = "✗ "
		}
		t.steps[n-1] = mark + strings.TrimPrefix(t.steps[n-1], "… ")
	}
	t.busy = false
	if err != nil {
		t.showSteps(err.Error())
	} else {
		t.showSteps(done)
	}
	t.updateButtons()
	t.reload()
}

func (t *pluginsTab) onInstall() {
	e := t.current()
	a, ok := t.agent()
	if e == nil || !ok || t.busy || t.src.Installer == nil {
		return
	}
	v := e.Current()
	// A recipe that gets the agent's secrets or more than the setup
	// allowlist is installed only once the user accepts what it gets.
	if r, ok := t.src.Installer.(interface {
		Review(agents.Agent, plugins.Version) plugins.Grant
	}); ok {
		if g := r.Review(a, v); g.NeedsConsent() {
			t.confirmLines("What this plugin gets", fmt.Sprintf("%s gets, once installed for %s:", e.ID, a.Name), g.Lines(), "Install",
				func() { t.install(e, v, a) }, func() { t.Status.SetText("Nothing was installed.") })
			return
		}
	}
	t.install(e, v, a)
}

// install runs the install of v for a, showing its steps.
func (t *pluginsTab) install(e *plugins.Entry, v plugins.Version, a agents.Agent) {
	if t.busy {
		return
	}
	t.busy = true
	t.updateButtons()
	t.head, t.steps = fmt.Sprintf("Installing %s (library version %d) for %s:", e.ID, v.Number, a.Name), nil
	t.showSteps("")
	needStart := t.b.Status().State != control.Running
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		var err error
		if needStart {
			t.do(func() { t.step("start the VM") })
			err = t.b.Start(ctx)
			if errors.Is(err, control.ErrBusy) {
				err = nil
			}
		}
		if err == nil {
			err = t.src.Installer.Install(ctx, a, v, func(s tools.InstallStep) {
				t.do(func() { t.step(string(s)) })
			})
		}
		done := fmt.Sprintf("Installed %s (library version %d) for %s.", e.ID, v.Number, a.Name)
		if err == nil && !a.AutonomousExec.Enabled {
			done += " Its tools appear once autonomous exec is on for " + a.Name + " (Agents tab)."
		}
		t.do(func() { t.finish(err, done) })
	}()
}

func (t *pluginsTab) onUninstall() {
	e := t.current()
	a, ok := t.agent()
	if e == nil || !ok || t.busy || t.src.Installer == nil {
		return
	}
	t.busy = true
	t.updateButtons()
	t.head, t.steps = fmt.Sprintf("Uninstalling %s from %s:", e.ID, a.Name), []string{"… uninstall"}
	t.showSteps("")
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		deferred, err := t.src.Installer.Uninstall(ctx, a, e.ID)
		done := "Uninstalled."
		if deferred != nil {
			done = fmt.Sprintf("Uninstalled: its tools are gone; the folder %s/plugins/%s is removed when the VM runs (%v).", a.Home(), e.ID, deferred)
		}
		t.do(func() { t.finish(err, done) })
	}()
}

// --- export, duplicate, remove ---

func (t *pluginsTab) onExport() {
	e := t.current()
	if e == nil {
		return
	}
	d := dialog.NewFileSave(func(w fyne.URIWriteCloser, err error) {
		if err != nil {
			t.Status.SetText(err.Error())
			return
		}
		if w == nil {
			return
		}
		t.exportTo(e.ID, w, w.URI().Path())
	}, t.win)
	d.SetFileName(e.ID + ".json")
	d.Show()
}

// exportTo writes the plugin's current recipe to w and closes it.
func (t *pluginsTab) exportTo(id string, w io.WriteCloser, name string) {
	var data []byte
	var err error
	if t.far != nil {
		// The recipe as the far side's owner last listed it.
		if i := t.index(id); i >= 0 {
			data, err = t.entries[i].Current().Recipe.Encode()
		} else {
			err = fmt.Errorf("%s is no longer in the library", id)
		}
	} else {
		data, err = t.src.Library.Export(id)
	}
	if err == nil {
		_, err = w.Write(data)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Status.SetText("Export: " + err.Error())
		return
	}
	t.Status.SetText(fmt.Sprintf("Exported %s to %s.", id, name))
}

func (t *pluginsTab) onDuplicate() {
	e := t.current()
	if e == nil {
		return
	}
	t.keepEdits(func() { t.duplicate(e) }, nil)
}

func (t *pluginsTab) duplicate(e *plugins.Entry) {
	var r api.PluginSaved
	t.call(30*time.Second, func(ctx context.Context) (err error) {
		r, err = t.src.Writer.DuplicatePlugin(ctx, e.ID)
		return err
	}, func(err error) {
		if err != nil {
			t.Status.SetText(err.Error())
			return
		}
		t.selectID(r.ID, func(d *plugins.Entry) {
			if d == nil {
				t.Status.SetText(fmt.Sprintf("Duplicated %s as %s, which the library no longer lists.", e.ID, r.ID))
				return
			}
			t.Status.SetText(fmt.Sprintf("Duplicated %s as %s (%q).", e.ID, d.ID, d.Current().Recipe.Name))
		})
	})
}

func (t *pluginsTab) onRemove() {
	if e := t.current(); e != nil {
		t.confirmRemove(e.ID, "")
	}
}

// confirmRemove asks before removing a plugin: who it is uninstalled from
// and that its versions go.
func (t *pluginsTab) confirmRemove(id, why string) {
	i := t.index(id)
	if i < 0 {
		return
	}
	e := t.entries[i]
	msg := why + fmt.Sprintf("Remove %s (%s) from the library?", e.Current().Recipe.Name, id)
	if names := t.installedFor[id]; len(names) > 0 {
		msg += "\nIt is uninstalled first from " + strings.Join(names, ", ") + "."
	}
	msg += fmt.Sprintf("\nIts %d kept version(s) are deleted; export it first to keep a copy.", len(e.Versions))
	d := dialog.NewConfirm("Remove plugin", msg, func(ok bool) {
		t.Confirm = nil
		if ok {
			t.remove(id)
		}
	}, t.win)
	d.SetConfirmText("Remove")
	d.SetDismissText("Cancel")
	t.Confirm = d
	d.Show()
}

// remove uninstalls id from every agent (which may reach the VM), then
// deletes it.
func (t *pluginsTab) remove(id string) {
	t.Status.SetText("Removing " + id + "…")
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		_, err := t.src.Writer.RemovePlugin(ctx, id, nil)
		t.do(func() {
			if err != nil {
				t.Status.SetText(err.Error())
			} else {
				t.Status.SetText("Removed " + id + ".")
			}
			t.reload()
		})
	}()
}

// noticeAgentPlugin tells the user an agent created a plugin, offering
// Remove; also as a desktop notification when the window is hidden.
func (t *pluginsTab) noticeAgentPlugin(e *plugins.Entry) {
	cur := e.Current()
	who := t.agentName(cur.Origin.Agent)
	if who == "" {
		who = "An agent"
	}
	var tools []string
	for _, tl := range cur.Recipe.Tools {
		tools = append(tools, cur.Recipe.ToolName(tl.ID))
	}
	msg := fmt.Sprintf("%s created the plugin %s (%s) and installed it for itself.", who, cur.Recipe.Name, e.ID)
	if len(tools) > 0 {
		msg += "\nTools: " + strings.Join(tools, ", ")
	}
	if app := fyne.CurrentApp(); app != nil {
		app.SendNotification(fyne.NewNotification("Plugin created by an agent", msg))
	}
	label := widget.NewLabel(msg + "\n\nRestricted defaults were applied. Remove it if you did not expect it.")
	label.Wrapping = fyne.TextWrapWord
	id := e.ID
	d := dialog.NewCustomConfirm("Plugin created by an agent", "Remove…", "Keep", label, func(ok bool) {
		t.Notice = nil
		if ok {
			t.confirmRemove(id, "")
		}
	}, t.win)
	d.Resize(fyne.NewSize(520, 240))
	t.Notice = d
	d.Show()
}
