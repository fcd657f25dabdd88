package ui

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/internal/filewatch"
	"github.com/osaurus/osaurus-sandbox/remotes"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// Paths is the data dir of a backend; the tasks tab finds the task store
// and sandbox.json through it.
func (s settingsFile) Paths() config.Paths { return s.paths }

// tasksTab shows the agent runner's tasks, each step as it happens, and
// the model server settings the runner and the inference route use.
type tasksTab struct {
	b     Backend
	win   fyne.Window
	do    func(func())
	store *runner.Store
	// far is a remote context's owner, whose tasks these are (nil:
	// this machine's, read from store); rc names the context.
	far  api.DataOps
	rc   remotes.Context
	poll time.Duration // farPoll when the tab was built
	// sec is the data folder's secret store, for the model server's key;
	// nil when the backend has no data folder.
	sec *secrets.Store
	// A remote context's model server settings: its sandbox.json through
	// its owner (farSet: nil when the backend can't reach it), and how to
	// ask where it keeps its secrets. here is this machine's data folder,
	// whose store holds the context's secrets when the far secretStore is
	// "client".
	farSet    *farForm
	farStatus func(context.Context) (api.Status, error)
	here      config.Paths

	URL, Model, Steps, Timeout *widget.Entry
	Key                        *widget.Entry
	Save, StoreKey             *widget.Button
	// Reload reads a remote context's settings again (nil for this
	// machine's).
	Reload *widget.Button
	Saved  *widget.Label

	List     *widget.List
	Detail   *widget.Label
	Cancel   *widget.Button
	tasks    []runner.Task
	selected string
}

func newTasksTab(b Backend, win fyne.Window, do func(func())) *tasksTab {
	t := &tasksTab{b: b, win: win, do: do}
	var farSrc farSettings
	if far := farOf(b); far != nil {
		t.far, t.poll = far, farPoll
		t.rc, _ = remoteOf(b)
		farSrc, _ = b.(farSettings)
		t.farStatus = far.Status
		if h, ok := b.(interface{ Here() config.Paths }); ok {
			t.here = h.Here()
		}
	} else if p, ok := b.(interface{ Paths() config.Paths }); ok {
		t.store = &runner.Store{Dir: filepath.Join(p.Paths().Root, "tasks")}
		t.sec = secrets.ForDataDir(p.Paths())
	}
	t.URL, t.Model = widget.NewEntry(), widget.NewEntry()
	t.URL.SetPlaceHolder("http://127.0.0.1:11434/v1")
	t.Steps, t.Timeout = widget.NewEntry(), widget.NewEntry()
	t.Key = widget.NewPasswordEntry()
	t.Key.SetPlaceHolder("API key (kept with the agents' secrets; empty for local servers)")
	t.Saved = widget.NewLabel("")
	t.Saved.Wrapping = fyne.TextWrapWord
	t.Save = widget.NewButton("Save", t.onSave)
	t.StoreKey = widget.NewButton("Store key", t.onStoreKey)
	if t.far != nil {
		t.Key.SetPlaceHolder("API key (kept on this machine when " + t.rc.Name + "'s secretStore is client)")
		t.Reload = widget.NewButton("Reload", t.loadFarSettings)
		if farSrc != nil {
			t.farSet = &farForm{src: farSrc, do: do, save: t.Save, reload: t.Reload, note: t.Saved, show: func(cfg config.Sandbox) {
				t.URL.SetText(cfg.InferenceURL)
				t.Model.SetText(cfg.InferenceModel)
				t.Steps.SetText(strconv.Itoa(cfg.RunnerMaxSteps))
				t.Timeout.SetText(strconv.Itoa(cfg.RunnerTimeoutSeconds))
			}}
		}
	}
	t.Detail = widget.NewLabel("Select a task to see its steps.")
	t.Detail.Wrapping = fyne.TextWrapWord
	t.Cancel = widget.NewButton("Cancel task", t.onCancel)
	t.Cancel.Disable()
	t.List = widget.NewList(
		func() int { return len(t.tasks) },
		func() fyne.CanvasObject { return widget.NewLabel("") },
		func(i widget.ListItemID, o fyne.CanvasObject) {
			if i < len(t.tasks) {
				k := t.tasks[i]
				o.(*widget.Label).SetText(fmt.Sprintf("%s  %s  %s: %s", k.Created.Local().Format("15:04:05"), k.State, k.Agent, runner.OneLine(k.Task, 50)))
			}
		})
	t.List.OnSelected = func(i widget.ListItemID) {
		if i < len(t.tasks) {
			t.selected = t.tasks[i].ID
			t.showSelected()
		}
	}
	if t.far == nil {
		t.loadSettings()
	} else {
		t.loadFarSettings()
	}
	t.refresh()
	return t
}

func (t *tasksTab) content() fyne.CanvasObject {
	form := widget.NewForm(
		widget.NewFormItem("Model server URL", t.URL),
		widget.NewFormItem("Model", t.Model),
		widget.NewFormItem("Max steps per task", t.Steps),
		widget.NewFormItem("Time per task (s)", t.Timeout),
		widget.NewFormItem("API key", container.NewBorder(nil, nil, nil, t.StoreKey, t.Key)),
	)
	settings := widget.NewCard("Model server", "", container.NewVBox(
		wrapped("An OpenAI-compatible server (Osaurus, Ollama, LM Studio, llama.cpp, a hosted API) for osaurus-host inference and the agent runner."),
		form, container.NewHBox(t.Save), t.Saved))
	how := `Dispatched by agents (osaurus-host agent dispatch) or run with osaurus-sandbox run --agent NAME "TASK".`
	if t.far != nil {
		// The settings are the far sandbox.json's, through its owner;
		// the key is in a store the link reaches only when that side
		// keeps its secrets here (secretStore client).
		settings = widget.NewCard("Model server", "", container.NewVBox(
			wrapped(fmt.Sprintf("The OpenAI-compatible server that osaurus-host inference and the agent runner of %s use, from its sandbox.json (it must be reachable from that machine).", t.rc.Name)),
			form, container.NewHBox(t.Save, t.Reload), t.Saved,
			wrapped(fmt.Sprintf("The API key: when %s keeps its secrets on this machine (secretStore client), Store key puts it in this machine's store for %s, as `osaurus-sandbox --context %s secret set --app %s` does. Otherwise it is in that machine's store: run `%s`.",
				t.rc.Name, t.rc.Name, t.rc.Name, secrets.InferenceKey, FarCommand(t.rc, "secret", "set", "--app", secrets.InferenceKey)))))
		how = fmt.Sprintf(`The tasks of %s: dispatched by its agents (osaurus-host agent dispatch) or run with osaurus-sandbox --context %s run --agent NAME "TASK".`, t.rc.Name, t.rc.Name)
	}
	detail := container.NewBorder(t.Cancel, nil, nil, nil, container.NewVScroll(t.Detail))
	split := container.NewHSplit(t.List, detail)
	split.Offset = 0.4
	return container.NewBorder(settings, nil, nil, nil,
		widget.NewCard("Tasks", "", container.NewBorder(
			wrapped(how), nil, nil, nil, split)))
}

func wrapped(text string) *widget.Label {
	l := widget.NewLabel(text)
	l.Wrapping = fyne.TextWrapWord
	return l
}

func (t *tasksTab) loadSettings() {
	cfg, err := t.b.Settings()
	if err != nil {
		t.Saved.SetText(err.Error())
		cfg = config.Defaults()
	}
	t.URL.SetText(cfg.InferenceURL)
	t.Model.SetText(cfg.InferenceModel)
	t.Steps.SetText(strconv.Itoa(cfg.RunnerMaxSteps))
	t.Timeout.SetText(strconv.Itoa(cfg.RunnerTimeoutSeconds))
}

// formSettings are base with the form's values.
func (t *tasksTab) formSettings(base config.Sandbox) (config.Sandbox, error) {
	next := base
	var err error
	for _, kv := range [][2]string{{"inferenceUrl", t.URL.Text}, {"inferenceModel", t.Model.Text}, {"runnerMaxSteps", t.Steps.Text}, {"runnerTimeoutSeconds", t.Timeout.Text}} {
		if next, err = next.Set(kv[0], kv[1]); err != nil {
			return base, err
		}
	}
	return next, nil
}

func (t *tasksTab) onSave() {
	if t.far != nil {
		t.saveFar()
		return
	}
	next, err := t.b.Settings()
	if err != nil {
		showError(t.win, "Settings", err)
		return
	}
	if next, err = t.formSettings(next); err != nil {
		t.Saved.SetText(err.Error())
		return
	}
	if err := t.b.SaveSettings(next); err != nil {
		t.Saved.SetText(err.Error())
		return
	}
	t.Saved.SetText("Saved.")
}

func (t *tasksTab) onStoreKey() {
	if t.Key.Text == "" {
		t.Saved.SetText("Type the API key first.")
		return
	}
	if t.far != nil {
		t.storeFarKey(t.Key.Text)
		return
	}
	if t.sec == nil {
		t.Saved.SetText("This window has no data folder to store the key for.")
		return
	}
	if err := t.sec.SetApp(secrets.InferenceKey, t.Key.Text); err != nil {
		t.Saved.SetText(err.Error())
		return
	}
	t.Key.SetText("")
	t.Saved.SetText("API key stored in " + t.sec.Where() + ".")
}

// loadFarSettings reads a remote context's settings off the UI goroutine
// and fills the form. Call on the UI goroutine.
func (t *tasksTab) loadFarSettings() {
	if t.farSet == nil {
		t.Save.Disable()
		t.Saved.SetText(fmt.Sprintf("The settings of %s can't be read from here: run `%s`.", t.rc.Name, FarCommand(t.rc, "config", "get")))
		return
	}
	t.farSet.load()
}

// saveFar writes the form into a remote context's sandbox.json based on
// what the form was filled from, as the Container tab does: a change made
// there since (that tab, `config set`) is never overwritten. Call on the
// UI goroutine.
func (t *tasksTab) saveFar() {
	if t.farSet == nil {
		t.loadFarSettings() // says where they are
		return
	}
	old, rev, read := t.farSet.based()
	if !read {
		t.Saved.SetText("The settings have not been read yet: press Reload.")
		return
	}
	next, err := t.formSettings(old)
	if err != nil {
		t.Saved.SetText(err.Error())
		return
	}
	t.farSet.write(next, rev, func(error) {}, func(api.SettingsFile) string { return "Saved." })
}

// storeFarKey stores the model server's key of a remote context where its
// owner reads it: this machine's store under the context's service, when
// that side's secretStore is "client" (asked of it first, as `--context
// NAME secret set --app` does). Otherwise nothing here would ever be read
// there, and the text says where to set it.
func (t *tasksTab) storeFarKey(key string) {
	t.StoreKey.Disable()
	t.Saved.SetText("Asking " + t.rc.Name + " where it keeps its secrets…")
	rc, here := t.rc, t.here
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), farCall)
		defer cancel()
		st, err := t.farStatus(ctx)
		store, keptHere := remotes.SecretsKeptHere(st)
		var msg string
		stored := false
		switch {
		case err != nil:
			msg = fmt.Sprintf("Not stored: %s can't say where it keeps its secrets: %v", rc.Name, err)
		case !keptHere:
			msg = fmt.Sprintf("Not stored: %s keeps its secrets on that machine (secretStore %s). Set the key there with `%s`, or keep its secrets on this machine with `%s` and store it here.",
				rc.Name, store, FarCommand(rc, "secret", "set", "--app", secrets.InferenceKey), FarCommand(rc, "config", "set", "secretStore", config.SecretStoreClient))
		case here.Root == "":
			msg = "Not stored: this window has no data folder of this machine to store the key in."
		default:
			sec := secrets.ForContext(secrets.ForDataDir(here).B, rc.Name)
			if err := sec.SetApp(secrets.InferenceKey, key); err != nil {
				msg = "Not stored: " + err.Error()
			} else {
				stored = true
				msg = fmt.Sprintf("API key stored in %s for %s: its owner reads it while this window, or an `mcp --agent` session of this machine, is connected through the context.", sec.Where(), rc.Name)
			}
		}
		t.do(func() {
			t.StoreKey.Enable()
			if stored && t.Key.Text == key {
				t.Key.SetText("")
			}
			t.Saved.SetText(msg)
		})
	}()
}

func (t *tasksTab) onCancel() {
	if t.far != nil && t.selected != "" {
		t.cancelFar(t.selected)
		return
	}
	if t.store == nil || t.selected == "" {
		return
	}
	// The process working the task watches for this and stops it.
	if _, err := t.store.RequestCancel(t.selected); err != nil {
		t.Saved.SetText(err.Error())
		return
	}
	t.Cancel.Disable()
	t.Cancel.SetText("Cancelling…")
}

// cancelFar asks the far side's owner to cancel the task, off the UI
// goroutine; the list shows it stopping on its next read.
func (t *tasksTab) cancelFar(id string) {
	t.Cancel.Disable()
	t.Cancel.SetText("Cancelling…")
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), farCall)
		defer cancel()
		_, err := t.far.CancelTask(ctx, id)
		t.do(func() {
			if err != nil {
				t.Detail.SetText("Cancelling failed: " + err.Error())
				t.Cancel.SetText("Cancel task")
				t.showSelected()
			}
		})
	}()
}

// refresh re-reads the tasks; call on the UI goroutine. A remote
// context's are read by follow only: the link may be slow.
func (t *tasksTab) refresh() {
	if t.store == nil {
		return
	}
	t.show(t.store.List(""))
}

// show puts the tasks read in the list; on the UI goroutine.
func (t *tasksTab) show(ts []runner.Task, err error) {
	if err != nil {
		t.Detail.SetText(err.Error())
		return
	}
	changed := len(ts) != len(t.tasks)
	for i := 0; !changed && i < len(ts); i++ {
		changed = !ts[i].Updated.Equal(t.tasks[i].Updated) || ts[i].State != t.tasks[i].State
	}
	if !changed {
		return
	}
	t.tasks = ts
	t.List.Refresh()
	t.showSelected()
}

func (t *tasksTab) showSelected() {
	i := slices.IndexFunc(t.tasks, func(k runner.Task) bool { return k.ID == t.selected })
	if i < 0 {
		t.Cancel.Disable()
		return
	}
	k := t.tasks[i]
	t.Detail.SetText(k.Text())
	if k.State == runner.Running {
		if t.Cancel.Text != "Cancelling…" {
			t.Cancel.Enable()
		}
	} else {
		t.Cancel.SetText("Cancel task")
		t.Cancel.Disable()
	}
}

// taskLivenessCheck is how often the list is re-read while a task runs:
// a worker process that dies writes nothing, and only a read (Store.Get)
// notices and marks its task interrupted. With no task running, the tab
// waits for changes only.
const taskLivenessCheck = 2 * time.Second

// follow refreshes the list when the task store changes, so steps show
// as they happen whichever process works the task, until ctx ends.
func (t *tasksTab) follow(ctx context.Context) {
	if t.far != nil {
		t.followFar(ctx)
		return
	}
	if t.store == nil {
		return
	}
	w := filewatch.Watch(ctx, time.Second, filewatch.Dir(t.store.Dir))
	defer w.Close()
	for {
		// Read here, not on the UI goroutine, which may run it later: what
		// is running decides the next wait.
		ts, err := t.store.List("")
		t.do(func() { t.show(ts, err) })
		var recheck <-chan time.Time
		if slices.ContainsFunc(ts, func(k runner.Task) bool { return !k.Finished() }) {
			recheck = time.After(taskLivenessCheck)
		}
		select {
		case <-ctx.Done():
			return
		case <-w.C():
		case <-recheck:
		}
	}
}

// followFar reads a remote context's tasks every farPoll until ctx ends:
// the far side's task store can't be watched from here.
func (t *tasksTab) followFar(ctx context.Context) {
	for {
		cctx, cancel := context.WithTimeout(ctx, farCall)
		ts, err := t.far.Tasks(cctx, control.TaskQuery{})
		cancel()
		if ctx.Err() != nil {
			return
		}
		t.do(func() { t.show(ts, err) })
		select {
		case <-ctx.Done():
			return
		case <-time.After(t.poll):
		}
	}
}
