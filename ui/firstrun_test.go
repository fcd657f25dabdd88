package ui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/sandbox"
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

func fakePlan(_ context.Context, u string) (imagePlan, error) {
	if strings.Contains(u, "broken") {
		return imagePlan{}, errors.New(`Get "https://broken.example/m.json": dial tcp: lookup broken.example on 127.0.0.53:53: no such host`)
	}
	return imagePlan{Distro: "alpine", Arch: "amd64", Downloads: []provision.Download{
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
		fr.Accel.SetSelected("tcg")
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
			c.show(sandbox.Status{State: sandbox.Provisioning, Progress: &sandbox.Progress{Phase: "rootfs", Done: done, Total: 100 << 20}})
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
