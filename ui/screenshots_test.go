package ui

import (
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"

	"github.com/osaurus/osaurus-sandbox/sandbox"
)

// TestWindowScreenshots renders the first-run view, a failed first run
// with its hint, the Connect preview and every tab with Fyne's software
// painter in the default theme, into $OSAURUS_SCREENSHOTS (else a temporary folder):
// docs/window.md shows them. Each image must hold the window, not a blank.
func TestWindowScreenshots(t *testing.T) {
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
			fyne.CurrentApp().Settings().SetTheme(lightTheme{theme.DefaultTheme()})
			w.Win.Resize(fyne.NewSize(900, 760))
		})
	}

	withPlan(t)
	f := newFake(t)
	w, _ := newTestWindow(t, f)
	styled(w)
	fr := w.Container.First
	eventually(t, "the plan", func() bool { return strings.Contains(fr.Plan.Text, "In all") })
	save(w, "first-run.png")

	f.provErr = errors.New(`provision: Get "https://dl.example.org/alpine-netboot.tar.gz": tls: failed to verify certificate: x509: certificate signed by unknown authority`)
	tap(fr.SetUp)
	eventually(t, "the failure", func() bool { return fr.Failure.Text != "" && !fr.SetUp.Disabled() })
	lockedDo(func() { fr.details.Open(0) })
	save(w, "first-run-failed.png")

	f2 := newFake(t)
	f2.st = sandbox.Status{State: sandbox.Stopped}
	w2, _ := newTestWindow(t, f2)
	styled(w2)
	cv := w2.Agents.Connect
	lockedDo(func() { cv.home = t.TempDir(); w2.Tabs.SelectIndex(1) })
	typeIn(w2.Agents.NewName, "Data Analyst")
	tap(w2.Agents.Add)
	lockedDo(func() { cv.Client.SetSelected("Claude Code") })
	tap(cv.Connect)
	save(w2, "connect.png")
	tap(cv.Confirm)
	if !strings.Contains(w2.Agents.Status.Text, "Connected Data Analyst to Claude Code") {
		t.Fatalf("status %q", w2.Agents.Status.Text)
	}
	save(w2, "connected.png")

	// Every tab, with a library and an agent in it.
	w3, reg, _ := newPluginWindow(t)
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

// lightTheme is the default theme in its light variant, whatever the
// test app's settings say.
type lightTheme struct{ fyne.Theme }

func (l lightTheme) Color(n fyne.ThemeColorName, _ fyne.ThemeVariant) color.Color {
	return l.Theme.Color(n, theme.VariantLight)
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
