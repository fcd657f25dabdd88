package ui

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/internal/builtinimage"
	"github.com/osaurus/osaurus-sandbox/internal/explain"
)

// Image choices of the first-run view.
const (
	imageBuiltin = "The built-in Linux (Alpine)"
	imageURL     = "Another image, from its address"
	imageFile    = "Another image, from a file here"
)

// accelLabels are the accelerator choices in words, by setting value.
var accelLabels = map[string]string{
	"auto": "Automatic: hardware when this computer allows it",
	"kvm":  "Hardware virtualisation (KVM)",
	"tcg":  "Emulation (TCG: works everywhere, several times slower)",
}

func accelValue(label string) string {
	for v, l := range accelLabels {
		if l == label {
			return v
		}
	}
	return "auto"
}

// imagePlan is what provisioning an image will fetch; the owner asks the
// image's servers (the window links no provisioning code).
type imagePlan = control.ImagePlan

// planFunc describes the image at a manifest URL through b; tests replace
// it.
type planFunc func(ctx context.Context, b Backend, manifestURL string) (imagePlan, error)

// defaultPlan is ownerPlan; ui tests replace it, as they must not reach
// the image's servers.
var defaultPlan planFunc = ownerPlan

// imagePlanner is a Backend whose owner describes images (Controlled).
type imagePlanner interface {
	ImagePlan(ctx context.Context, manifestURL string) (imagePlan, error)
}

func ownerPlan(ctx context.Context, b Backend, manifestURL string) (imagePlan, error) {
	p, ok := b.(imagePlanner)
	if !ok {
		return imagePlan{}, errors.New("this window can't ask the owner what the image downloads")
	}
	return p.ImagePlan(ctx, manifestURL)
}

// firstRun is the view a data folder with nothing provisioned shows: what
// setting up downloads, how big it is and where it goes, the image and
// accelerator to use, and one button that provisions and starts. Nothing
// starts before the user presses it.
type firstRun struct {
	t    *containerTab
	plan func(ctx context.Context, manifestURL string) (imagePlan, error)

	Box    *fyne.Container
	Intro  *widget.Label
	Image  *widget.RadioGroup
	URL    *widget.Entry
	Browse *widget.Button
	urlRow *fyne.Container
	Accel  *widget.Select
	// More holds the image and accelerator choices, closed: the defaults
	// need no decision.
	More    *widget.Accordion
	Plan    *widget.Label
	SetUp   *widget.Button
	Failure *widget.Label // the failure as a sentence with the fix
	Detail  *widget.Label // the raw error, under "Details"
	details *widget.Accordion

	// planned: the view has been shown and described its image; it asks
	// the image's servers only then, not on every window.
	planned bool
	// active: a set-up started here is under way or failed, so the view
	// stays up to show its progress or failure whatever the state.
	active bool

	mu     sync.Mutex
	planID int // the newest plan asked for; older answers are dropped
}

// shown is called when the view appears.
func (f *firstRun) shown() {
	if !f.planned {
		f.planned = true
		f.replan()
	}
}

func newFirstRun(t *containerTab) *firstRun {
	f := &firstRun{t: t}
	if plan := defaultPlan; plan != nil {
		f.plan = func(ctx context.Context, u string) (imagePlan, error) { return plan(ctx, t.b, u) }
	}
	f.Intro = widget.NewLabel("Agents work in a Linux virtual machine on this computer. To make it, the app downloads Linux once, builds the machine's disk from it and starts it; this takes a few minutes, and it is kept for next time. Nothing else on your computer changes.")
	f.Intro.Wrapping = fyne.TextWrapWord
	f.Image = widget.NewRadioGroup([]string{imageBuiltin, imageURL, imageFile}, func(string) { f.onImage() })
	f.Image.Horizontal = true
	f.URL = widget.NewEntry()
	f.URL.SetPlaceHolder("https://example.org/guest/manifest.json")
	f.URL.OnSubmitted = func(string) { f.replan() }
	f.URL.OnChanged = func(string) { f.SetUp.Enable() }
	f.Browse = widget.NewButton("Choose…", f.onBrowse)
	f.Accel = widget.NewSelect([]string{accelLabels["auto"], accelLabels["kvm"], accelLabels["tcg"]}, nil)
	f.Plan = widget.NewLabel("")
	f.Plan.Wrapping = fyne.TextWrapWord
	f.SetUp = widget.NewButton("Download and Start", f.onSetUp)
	f.SetUp.Importance = widget.HighImportance
	f.Failure = widget.NewLabel("")
	f.Failure.Wrapping = fyne.TextWrapWord
	f.Failure.Importance = widget.DangerImportance
	f.Detail = widget.NewLabel("")
	f.Detail.Wrapping = fyne.TextWrapWord
	f.details = widget.NewAccordion(widget.NewAccordionItem("Details", f.Detail))
	f.details.Hide()

	f.urlRow = container.NewBorder(nil, nil, nil, f.Browse, f.URL)
	form := widget.NewForm(widget.NewFormItem("Linux", container.NewVBox(f.Image, f.urlRow)))
	more := "Another Linux image"
	if runtime.GOOS == "linux" { // vz picks its own on macOS
		form.Append("Speed", f.Accel)
		more = "Another Linux image, or how the machine runs"
	}
	f.More = widget.NewAccordion(widget.NewAccordionItem(more, form))
	f.Box = container.NewVBox(f.Intro, f.Plan, container.NewHBox(f.SetUp), f.Failure, f.details, f.More)
	f.load()
	return f
}

// load shows the saved image and accelerator. A remote context's are
// shown once the Container tab has read them (fill).
func (f *firstRun) load() {
	if f.t.far != nil {
		f.fill(config.Defaults())
		return
	}
	cfg, err := f.t.b.Settings()
	if err != nil {
		cfg = config.Defaults()
	}
	f.fill(cfg)
}

// fill shows cfg's image and accelerator.
func (f *firstRun) fill(cfg config.Sandbox) {
	if l, ok := accelLabels[cfg.Accel]; ok {
		f.Accel.SetSelected(l)
	} else {
		f.Accel.SetSelected(accelLabels["auto"])
	}
	switch m := cfg.ImageManifest; {
	case m == "" || strings.HasPrefix(m, builtinimage.Prefix):
		f.Image.SetSelected(imageBuiltin)
	case strings.HasPrefix(m, "file://"):
		f.URL.SetText(strings.TrimPrefix(m, "file://"))
		f.Image.SetSelected(imageFile)
	default:
		f.URL.SetText(m)
		f.Image.SetSelected(imageURL)
	}
}

func (f *firstRun) onImage() {
	switch f.Image.Selected {
	case imageURL:
		f.urlRow.Show()
		f.URL.SetPlaceHolder("https://example.org/guest/manifest.json")
		f.Browse.Hide()
	case imageFile:
		f.urlRow.Show()
		f.URL.SetPlaceHolder("/path/to/manifest.json")
		f.Browse.Show()
	default:
		f.urlRow.Hide()
	}
	f.relayout()
	if f.planned {
		f.replan()
	}
}

func (f *firstRun) onBrowse() {
	d := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
		if err != nil || r == nil {
			return
		}
		r.Close()
		f.URL.SetText(r.URI().Path())
		f.replan()
	}, f.t.win)
	d.Show()
}

// manifest is the chosen image as an imageManifest setting ("" is the
// built-in default).
func (f *firstRun) manifest() string {
	v := strings.TrimSpace(f.URL.Text)
	switch f.Image.Selected {
	case imageURL:
		return v
	case imageFile:
		if v == "" {
			return ""
		}
		return "file://" + v
	}
	return ""
}

// replan describes the chosen image, off the UI goroutine.
func (f *firstRun) replan() {
	m := f.manifest()
	if f.Image.Selected != imageBuiltin && m == "" {
		f.Plan.SetText("Enter the image's manifest, then press Enter to see what it downloads.")
		return
	}
	if f.plan == nil {
		return
	}
	u := m
	if u == "" {
		u = builtinimage.Default()
	}
	f.mu.Lock()
	f.planID++
	id := f.planID
	f.mu.Unlock()
	f.Plan.SetText("Looking up what the image downloads…")
	plan := f.plan
	root := f.t.b.DataDir()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := plan(ctx, u)
		text := planText(p, root)
		if err != nil {
			text = "The image can't be read: " + explain.Error(err).Short()
		}
		f.t.do(func() {
			f.mu.Lock()
			current := id == f.planID
			f.mu.Unlock()
			if current {
				f.Plan.SetText(text)
				f.relayout()
			}
		})
	}()
}

// planText says what will be downloaded, its size and where it goes.
func planText(p imagePlan, root string) string {
	var b strings.Builder
	var total int64
	known := true
	fmt.Fprintf(&b, "Downloads the %s image for %s:\n", titleCase(p.Distro), p.Arch)
	for _, d := range p.Downloads {
		size := "can't reach the server now to ask its size"
		if d.Size >= 0 {
			size = sizeText(d.Size)
			total += d.Size
		} else {
			known = false
		}
		fmt.Fprintf(&b, "  • %s from %s (%s)\n", baseName(d.URL), hostName(d.URL), size)
	}
	if known && len(p.Downloads) > 1 {
		fmt.Fprintf(&b, "  In all %s.\n", sizeText(total))
	}
	if !known {
		b.WriteString("  Check this computer's network connection: the download needs it.\n")
	}
	if len(p.Packages) > 0 {
		fmt.Fprintf(&b, "Then, at the first boot, installs %d packages the tools use from the distribution's mirror (%s); they are cached for later resets.\n", len(p.Packages), strings.Join(p.Packages, ", "))
	}
	fmt.Fprintf(&b, "Kept in %s (downloads are cached there for later resets); the VM's disk grows there up to %s.\n", filepath.Join(root, "container"), sizeText(p.DiskSize))
	fmt.Fprintf(&b, "Your agents' files go in %s.", filepath.Join(root, "workspace"))
	return b.String()
}

func titleCase(s string) string {
	if s == "" {
		return "Linux"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func baseName(u string) string {
	if p, err := url.Parse(u); err == nil && p.Path != "" {
		return path.Base(p.Path)
	}
	return u
}

func hostName(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Host
	}
	if strings.HasPrefix(u, "file://") {
		return "this computer"
	}
	return u
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", (n+1023)/1024)
}

// onSetUp saves the image and accelerator, provisions, then starts.
func (f *firstRun) onSetUp() {
	f.showFailure(nil)
	if f.t.far != nil {
		f.setUpFar()
		return
	}
	old, err := f.t.b.Settings()
	if err != nil {
		f.showFailure(err)
		return
	}
	next := old
	if f.Image.Selected != imageBuiltin && f.manifest() == "" {
		f.Failure.SetText("Enter the image manifest's address (or choose the file), or pick the built-in image.")
		return
	}
	for _, kv := range [][2]string{{"imageManifest", f.manifest()}, {"accel", accelValue(f.Accel.Selected)}} {
		if next, err = next.Set(kv[0], kv[1]); err != nil {
			f.showFailure(err)
			return
		}
	}
	if next != old {
		if err := f.t.b.SaveSettings(next); err != nil {
			f.showFailure(err)
			return
		}
		f.t.loadSettings()
	}
	f.start()
}

// setUpFar is onSetUp for a remote context: its settings are read and
// saved through its owner off the UI goroutine, then it provisions
// there. Call on the UI goroutine.
func (f *firstRun) setUpFar() {
	if f.Image.Selected != imageBuiltin && f.manifest() == "" {
		f.Failure.SetText("Enter the image manifest's address (or choose the file), or pick the built-in image.")
		return
	}
	want := [][2]string{{"imageManifest", f.manifest()}, {"accel", accelValue(f.Accel.Selected)}}
	f.SetUp.Disable()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), farCall)
		defer cancel()
		file, err := f.t.far.src.ReadSettings(ctx)
		next := file.Settings
		for _, kv := range want {
			if err == nil {
				next, err = next.Set(kv[0], kv[1])
			}
		}
		if err == nil && next != file.Settings {
			file, err = f.t.far.src.WriteSettings(ctx, next, file.Revision)
		}
		f.t.do(func() {
			if err != nil {
				f.SetUp.Enable()
				f.showFailure(err)
				return
			}
			f.t.far.fill(file)
			f.start()
		})
	}()
}

// start provisions, then starts. Call on the UI goroutine.
func (f *firstRun) start() {
	f.SetUp.Disable()
	f.active = true
	f.t.provision(func(err error) {
		if err != nil {
			f.showFailure(err)
			f.t.show(f.t.b.Status())
			return
		}
		f.active = false
		f.t.show(f.t.b.Status())
		f.t.run("Start", f.t.b.Start)
	})
}

// showFailure shows err as a sentence with the fix, the raw error under
// Details; nil clears it.
func (f *firstRun) showFailure(err error) {
	defer f.relayout()
	if err == nil {
		f.Failure.SetText("")
		f.Detail.SetText("")
		f.details.Hide()
		return
	}
	ex := explain.Error(err)
	f.Failure.SetText("Setting up failed. " + ex.Short())
	if ex.Known() {
		f.Detail.SetText(ex.Detail)
		f.details.Show()
	}
}

// relayout lays the view out again after a part shows or hides.
func (f *firstRun) relayout() {
	if f.Box != nil {
		f.Box.Refresh()
	}
	if f.t.body != nil {
		f.t.body.Refresh() // the tab's layout: the view's height changed
	}
}
