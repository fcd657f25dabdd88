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

	URL, Model, Steps, Timeout *widget.Entry
	Key                        *widget.Entry
	Save, StoreKey             *widget.Button
	Saved                      *widget.Label

	List     *widget.List
	Detail   *widget.Label
	Cancel   *widget.Button
	tasks    []runner.Task
	selected string
}

func newTasksTab(b Backend, win fyne.Window, do func(func())) *tasksTab {
	t := &tasksTab{b: b, win: win, do: do}
	if far := farOf(b); far != nil {
		t.far, t.poll = far, farPoll
		t.rc, _ = remoteOf(b)
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
	if t.far == nil { // the far side's are there (settingsText)
		t.loadSettings()
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
		// The key is the far side's keychain, which the control
		// protocol doesn't carry; the settings are named with it.
		settings = widget.NewCard("Model server", "", wrapped(fmt.Sprintf(
			"The model server settings of %s are kept there: run `%s` to see them, `%s` to change one.",
			t.rc.Name, FarCommand(t.rc, "config", "get"), FarCommand(t.rc, "config", "set", "KEY", "VALUE"))))
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

func (t *tasksTab) onSave() {
	next, err := t.b.Settings()
	if err != nil {
		showError(t.win, "Settings", err)
		return
	}
	for _, kv := range [][2]string{{"inferenceUrl", t.URL.Text}, {"inferenceModel", t.Model.Text}, {"runnerMaxSteps", t.Steps.Text}, {"runnerTimeoutSeconds", t.Timeout.Text}} {
		if next, err = next.Set(kv[0], kv[1]); err != nil {
			t.Saved.SetText(err.Error())
			return
		}
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
