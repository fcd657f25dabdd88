package ui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/provision"
)

// The window's tests never reach an image's servers: the first-run view
// describes nothing (no background work racing other tests' reads), or,
// in the tests that look at it, a fixed image.
func init() { defaultPlan = nil }

// withPlan makes the windows the test opens describe a fixed image.
func withPlan(t *testing.T) {
	defaultPlan = fakePlan
	t.Cleanup(func() { defaultPlan = nil })
}

func fakePlan(_ context.Context, _ Backend, u string) (imagePlan, error) {
	if strings.Contains(u, "broken") {
		return imagePlan{}, errors.New(`Get "https://broken.example/m.json": dial tcp: lookup broken.example on 127.0.0.53:53: no such host`)
	}
	return imagePlan{Distro: "alpine", Arch: "amd64", DiskSize: 8 << 30, Downloads: []control.Download{
		{URL: "https://dl.example.org/alpine-netboot-3.24.2-x86_64.tar.gz", Size: 40 << 20},
		{URL: "https://dl.example.org/alpine-minirootfs-3.24.2-x86_64.tar.gz", Size: 4 << 20},
	}, Packages: provision.AlpineToolset}, nil
}

// A fresh data folder shows what setting up downloads, how much and where,
// and nothing runs before the button; the image and accelerator chosen
// are saved, then the VM is provisioned and started.
func TestFirstRunSetsUpWithOneButton(t *testing.T) {
	withPlan(t)
	f := newFake(t)
	w, _ := newTestWindow(t, f)
	c := w.Container
	fr := c.First
	eventually(t, "the plan", func() bool { return strings.Contains(fr.Plan.Text, "In all 44.0 MiB") })
	var plan, details string
	var visible, removeOff, resetOff, startOff bool
	lockedDo(func() {
		plan, details = fr.Plan.Text, c.Details.Text
		visible, removeOff, resetOff, startOff = c.firstCard.Visible(), c.Remove.Disabled(), c.Reset.Disabled(), c.Start.Disabled()
	})
	for _, want := range []string{"alpine-netboot-3.24.2-x86_64.tar.gz from dl.example.org (40.0 MiB)", "alpine-minirootfs", f.DataDir() + "/container", "up to 8.0 GiB", f.DataDir() + "/workspace",
		fmt.Sprintf("installs %d packages the tools use", len(provision.AlpineToolset)), "ripgrep"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan lacks %q:\n%s", want, plan)
		}
	}
	if !visible || !removeOff || !resetOff || !startOff {
		t.Fatalf("first run: view shown %v, Remove off %v, Reset off %v, Start off %v", visible, removeOff, resetOff, startOff)
	}
	if !strings.Contains(details, "Download and Start") {
		t.Fatalf("Not provisioned doesn't say what to do: %q", details)
	}
	if got := f.called(); len(got) != 0 {
		t.Fatalf("something ran before the button: %v", got)
	}
	if autoStart(true, f.Status()) {
		t.Fatal("autoStart would start the VM on a first run")
	}

	lockedDo(func() {
		fr.Image.SetSelected(imageURL)
		fr.URL.SetText("https://images.example.org/debian/manifest.json")
		fr.Accel.SetSelected(accelLabels["tcg"])
	})
	tap(fr.SetUp)
	eventually(t, "provisioning", func() bool { return fr.SetUp.Disabled() && c.State.Text == "Provisioning…" })
	cfg, _ := f.Settings()
	if cfg.ImageManifest != "https://images.example.org/debian/manifest.json" || cfg.Accel != "tcg" {
		t.Fatalf("saved image %q accel %q", cfg.ImageManifest, cfg.Accel)
	}
	close(f.provGo)
	eventually(t, "running", func() bool { return c.State.Text == "Running" && !c.firstCard.Visible() })
	if got := strings.Join(f.called(), ","); got != "provision,start" {
		t.Fatalf("calls %s", got)
	}
	if c.Remove.Disabled() || c.Image.Text != cfg.ImageManifest || c.Accel.Selected != "tcg" {
		t.Fatalf("after set-up: Remove off %v, Resources image %q accel %q", c.Remove.Disabled(), c.Image.Text, c.Accel.Selected)
	}
}

// A failed set-up says what went wrong and what to do, the raw error kept
// under Details, and the button works again.
func TestFirstRunFailureIsASentence(t *testing.T) {
	withPlan(t)
	f := newFake(t)
	f.provErr = errors.New(`provision: Get "https://dl.example.org/a.tar.gz": tls: failed to verify certificate: x509: certificate signed by unknown authority`)
	w, _ := newTestWindow(t, f)
	fr := w.Container.First
	tap(fr.SetUp)
	eventually(t, "the failure", func() bool { return fr.Failure.Text != "" && !fr.SetUp.Disabled() })
	if !strings.Contains(fr.Failure.Text, "certificate isn't trusted") || !strings.Contains(fr.Failure.Text, "corporate proxy") ||
		strings.Contains(fr.Failure.Text, "x509") {
		t.Fatalf("failure %q", fr.Failure.Text)
	}
	if fr.Detail.Text != f.provErr.Error() || !fr.details.Visible() {
		t.Fatalf("detail %q shown %v", fr.Detail.Text, fr.details.Visible())
	}
	// An image that can't be read says so as a sentence too.
	lockedDo(func() {
		fr.Image.SetSelected(imageURL)
		fr.URL.SetText("https://broken.example/m.json")
		fr.URL.OnSubmitted(fr.URL.Text)
	})
	eventually(t, "the plan's failure", func() bool { return strings.Contains(fr.Plan.Text, "The name broken.example couldn't be looked up") })
}

// The progress line gives bytes and, once a rate is known, the time left.
func TestProvisionProgressTimeLeft(t *testing.T) {
	f := newFake(t)
	w, _ := newTestWindow(t, f)
	c := w.Container
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lockedDo(func() { c.now = func() time.Time { return now } })
	show := func(done int64) string {
		var s string
		lockedDo(func() {
			c.show(control.Status{State: control.Provisioning, Progress: &control.Progress{Phase: "rootfs", Done: done, Total: 100 << 20}})
			s = c.Phase.Text
		})
		return s
	}
	if got := show(10 << 20); got != "rootfs: 10.0 / 100.0 MiB" {
		t.Fatalf("first sample %q", got)
	}
	now = now.Add(10 * time.Second) // 1 MiB/s: 80 MiB left
	if got := show(20 << 20); got != "rootfs: 20.0 / 100.0 MiB · about 1m left" {
		t.Fatalf("with a rate %q", got)
	}
	now = now.Add(70 * time.Second)
	if got := show(90 << 20); got != "rootfs: 90.0 / 100.0 MiB · about 10s left" {
		t.Fatalf("near the end %q", got)
	}
}

// The first run is one step: the set-up's button is the one call to
// action (no Provision or Start beside it, the VM's settings, diagnostics
// and danger zone hidden, the image and accelerator in a closed "other"
// section in plain words), the tabs about a VM's work are disabled until
// there is one, and the empty Agents tab says how to add an agent and
// connect a client. Once the VM is there, all of it comes back.
func TestFirstRunIsOneStep(t *testing.T) {
	withPlan(t)
	f := newFake(t)
	w, reg := newTestWindow(t, f)
	c, fr := w.Container, w.Container.First
	eventually(t, "the plan", func() bool { return strings.Contains(fr.Plan.Text, "In all 44.0 MiB") })
	lockedDo(func() {
		for name, o := range map[string]fyne.CanvasObject{"Provision": c.Provision, "Start": c.Start, "Stop": c.Stop} {
			if o.Visible() {
				t.Errorf("%s shows beside Download and Start", name)
			}
		}
		for _, o := range c.vmOnly {
			if o.Visible() {
				t.Errorf("a card about the VM shows before there is one: %s", o.(*widget.Card).Title)
			}
		}
		if !fr.SetUp.Visible() || fr.SetUp.Disabled() || fr.More.Items[0].Open {
			t.Errorf("set-up: button shown %v enabled %v, other choices open %v", fr.SetUp.Visible(), !fr.SetUp.Disabled(), fr.More.Items[0].Open)
		}
		for _, jargon := range []string{"manifest", "Accelerator", "auto"} {
			if strings.Contains(fr.Intro.Text+fr.More.Items[0].Title+strings.Join(fr.Image.Options, " "), jargon) {
				t.Errorf("the first run says %q", jargon)
			}
		}
		for _, ti := range w.Tabs.Items {
			if open := ti.Text == "Container" || ti.Text == "Agents"; ti.Disabled() == open {
				t.Errorf("tab %s disabled %v before there is a VM", ti.Text, ti.Disabled())
			}
		}
		a := w.Agents
		if !a.Empty.Visible() || a.editor.Visible() || !strings.Contains(a.Empty.Title, "Add your first agent") {
			t.Errorf("empty Agents tab: first steps shown %v, editor shown %v", a.Empty.Visible(), a.editor.Visible())
		}
		// Where to type first, once the tab shows.
		w.Tabs.Select(w.Tabs.Items[1])
		if got := w.Win.Canvas().Focused(); got != a.NewName {
			t.Errorf("the empty Agents tab focused %v, want the name box", got)
		}
		w.Tabs.Select(w.Tabs.Items[0])
	})
	if text := planText(imagePlan{Distro: "alpine", Arch: "amd64", DiskSize: 8 << 30, Downloads: []control.Download{{URL: "https://dl.example.org/a.tar.gz", Size: -1}}}, "/data"); strings.Contains(text, "size unknown") || !strings.Contains(text, "can't reach the server") || !strings.Contains(text, "network connection") {
		t.Errorf("offline plan: %s", text)
	}

	tap(fr.SetUp)
	close(f.provGo)
	eventually(t, "running", func() bool { return c.State.Text == "Running" })
	lockedDo(func() {
		if !c.Provision.Visible() || !c.Stop.Visible() {
			t.Error("the lifecycle buttons are not back")
		}
		for _, o := range c.vmOnly {
			if !o.Visible() {
				t.Errorf("%s is still hidden", o.(*widget.Card).Title)
			}
		}
		for _, ti := range w.Tabs.Items {
			if ti.Disabled() {
				t.Errorf("tab %s still disabled", ti.Text)
			}
		}
	})
	if _, err := reg.Add("alice"); err != nil {
		t.Fatal(err)
	}
	lockedDo(func() {
		w.Agents.refresh()
		if w.Agents.Empty.Visible() || !w.Agents.editor.Visible() {
			t.Error("the first steps still show with an agent")
		}
	})
}
