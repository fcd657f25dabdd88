package ui

import (
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/provision"
)

// TestWindowScreenshots renders the first-run view, a failed first run
// with its hint, the Connect preview and every tab with Fyne's software
// painter in the default theme's dark variant, into $OSAURUS_SCREENSHOTS
// (else a temporary folder): docs/window.md shows them. Each image must
// hold the window, not a blank, and show a user's paths: no test's
// temporary folder or build path, no example host.
func TestWindowScreenshots(t *testing.T) {
	var leaks []string // text no picture may show
	dir := os.Getenv("OSAURUS_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	save := func(w *Window, name string) {
		t.Helper()
		var img image.Image
		lockedDo(func() { img = w.Win.Canvas().Capture() })
		if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 600 || uniform(img) {
			t.Fatalf("%s: a %v image with nothing drawn", name, b)
		}
		var markup string
		lockedDo(func() { markup = test.RenderToMarkup(w.Win.Canvas()) })
		for _, leak := range leaks {
			if strings.Contains(markup, leak) {
				t.Errorf("%s shows %q, a test's path or host, not a user's", name, leak)
			}
		}
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := png.Encode(f, img); err != nil {
			t.Fatal(err)
		}
	}
	styled := func(w *Window) {
		lockedDo(func() {
			fyne.CurrentApp().Settings().SetTheme(darkTheme{theme.DefaultTheme()})
			w.Win.Resize(fyne.NewSize(900, 760))
		})
	}

	// What a user would see: the default data folder, the installed
	// binary, the real image host.
	const userData, userExe, userHome = "/home/you/.local/share/osaurus-sandbox", "/home/you/.local/bin/osaurus-sandbox", "/home/you"
	defaultPlan = func(context.Context, Backend, string) (imagePlan, error) {
		return imagePlan{Distro: "alpine", Arch: "x86_64", DiskSize: 8 << 30, Downloads: []control.Download{
			{URL: "https://dl-cdn.alpinelinux.org/alpine/v3.22/releases/x86_64/netboot/vmlinuz-virt", Size: 12 << 20},
			{URL: "https://dl-cdn.alpinelinux.org/alpine/v3.22/releases/x86_64/alpine-minirootfs-3.22.2-x86_64.tar.gz", Size: 3 << 20},
		}, Packages: provision.AlpineToolset}, nil
	}
	t.Cleanup(func() { defaultPlan = nil })
	f := newFake(t)
	leaks = append(leaks, os.TempDir(), "example.", f.DataDir())
	w, _ := newTestWindow(t, f)
	styled(w)
	fr := w.Container.First
	eventually(t, "the plan", func() bool { return strings.Contains(fr.Plan.Text, "In all") })
	lockedDo(func() { fr.Plan.SetText(strings.ReplaceAll(fr.Plan.Text, f.DataDir(), userData)) })
	save(w, "first-run.png")

	f.provErr = errors.New(`provision: Get "https://dl-cdn.alpinelinux.org/alpine/v3.22/releases/x86_64/netboot/vmlinuz-virt": tls: failed to verify certificate: x509: certificate signed by unknown authority`)
	tap(fr.SetUp)
	eventually(t, "the failure", func() bool { return fr.Failure.Text != "" && !fr.SetUp.Disabled() })
	lockedDo(func() { fr.details.Open(0) })
	save(w, "first-run-failed.png")

	f2 := newFake(t)
	f2.st = control.Status{State: control.Stopped}
	w2, _ := newTestWindow(t, f2)
	styled(w2)
	cv := w2.Agents.Connect
	leaks = append(leaks, f2.DataDir())
	lockedDo(func() {
		cv.home, cv.dataDir, cv.t.exe, cv.t.exeWarning = userHome, "", userExe, ""
		w2.Tabs.SelectIndex(1)
	})
	typeIn(w2.Agents.NewName, "Data Analyst")
	tap(w2.Agents.Add)
	lockedDo(func() { cv.Client.SetSelected("Claude Code") })
	tap(cv.Connect)
	save(w2, "connect.png")
	// Written into the test's own home, not the user's shown above.
	leaks = nil
	lockedDo(func() { cv.Dialog.Hide(); cv.Dialog = nil; cv.home = t.TempDir() })
	tap(cv.Connect)
	tap(cv.Confirm)
	if !strings.Contains(w2.Agents.Status.Text, "Connected Data Analyst to Claude Code") {
		t.Fatalf("status %q", w2.Agents.Status.Text)
	}
	save(w2, "connected.png")

	// Every tab, with a library and an agent in it.
	w3, reg, b3 := newPluginWindow(t)
	leaks = []string{b3.DataDir()}
	styled(w3)
	alice, err := reg.Add("Alice")
	if err != nil {
		t.Fatal(err)
	}
	seedLibrary(t, w3, alice)
	lockedDo(w3.Plugins.reload)
	tapInOverlay(t, w3.Win, "Keep") // the agent-created plugin's notice
	var names []string
	lockedDo(func() {
		for _, it := range w3.Tabs.Items {
			names = append(names, it.Text)
		}
	})
	if len(names) < 8 {
		t.Fatalf("tabs: %v", names)
	}
	for i, n := range names {
		lockedDo(func() { w3.Tabs.SelectIndex(i) })
		save(w3, "tab-"+strings.ToLower(n)+".png")
	}
}

// darkTheme is the default theme in its dark variant, as the app shows
// it, whatever the test app's settings say.
type darkTheme struct{ fyne.Theme }

func (l darkTheme) Color(n fyne.ThemeColorName, _ fyne.ThemeVariant) color.Color {
	return l.Theme.Color(n, theme.VariantDark)
}

// uniform reports whether every sampled pixel has the same colour.
func uniform(img image.Image) bool {
	b := img.Bounds()
	r0, g0, b0, _ := img.At(b.Min.X, b.Min.Y).RGBA()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			if r, g, bl, _ := img.At(x, y).RGBA(); r != r0 || g != g0 || bl != b0 {
				return false
			}
		}
	}
	return true
}
