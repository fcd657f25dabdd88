package ui

import (
	"testing"

	"fyne.io/fyne/v2"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
)

// TestWindowFitsASmallScreen: the window opens at a size that fits a
// small screen (1024×600 with a panel and title bar), no tab holds it
// open wider or taller than that, and it can be made smaller still.
func TestWindowFitsASmallScreen(t *testing.T) {
	screen := fyne.NewSize(1024, 600-60)
	if defaultSize.Width > screen.Width || defaultSize.Height > screen.Height {
		t.Errorf("the window opens at %v, bigger than a small screen's %v", defaultSize, screen)
	}
	f := newFake(t)
	w, _ := newTestWindow(t, f)
	for _, st := range []control.State{control.NotProvisioned, control.Running} {
		f.set(control.Status{State: st, Driver: "qemu", Accel: "tcg", Distro: "debian"})
		lockedDo(func() {
			if w.Win.FixedSize() {
				t.Error("the window can't be resized")
			}
			for _, ti := range w.Tabs.Items {
				w.Tabs.Select(ti)
				if m := w.Win.Content().MinSize(); m.Width > minSize.Width || m.Height > minSize.Height {
					t.Errorf("%s, %s tab: the window can't be smaller than %v, want it to fit %v", st, ti.Text, m, minSize)
				}
			}
		})
	}
}

// TestInitialWindowSize: the size the user left the window at is kept;
// none, or a nonsense one, gives the default.
func TestInitialWindowSize(t *testing.T) {
	for _, tc := range []struct {
		w, h float32
		want fyne.Size
	}{
		{0, 0, defaultSize},
		{1200, 900, fyne.NewSize(1200, 900)},
		{640, 400, fyne.NewSize(640, 400)},
		{10, 10, defaultSize},
		{1e9, 800, defaultSize},
	} {
		if got := initialSize(tc.w, tc.h); got != tc.want {
			t.Errorf("initialSize(%v, %v) = %v, want %v", tc.w, tc.h, got, tc.want)
		}
	}
}
