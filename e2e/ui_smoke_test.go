//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
)

// buttonCentres reads where each button's label sits in the window from
// the UI tests' golden layout (the same layout at the same window size),
// so the clicks follow the layout when it changes.
func buttonCentres(t *testing.T) map[string][2]int {
	t.Helper()
	raw, err := os.ReadFile("../ui/testdata/container_stopped.xml")
	if err != nil {
		t.Fatal(err)
	}
	// Fyne's markup has valueless attributes ("bold"); give them values.
	raw = regexp.MustCompile(` (bold|italic|monospace|symbol)([ >/])`).ReplaceAll(raw, []byte(` $1="1"$2`))
	type node struct {
		XMLName xml.Name
		Attrs   []xml.Attr `xml:",any,attr"`
		Text    string     `xml:",chardata"`
		Kids    []node     `xml:",any"`
	}
	var root node
	if err := xml.Unmarshal(raw, &root); err != nil {
		t.Fatal(err)
	}
	attr := func(n node, name string) (float64, float64) {
		for _, a := range n.Attrs {
			if a.Name.Local == name {
				var x, y float64
				fmt.Sscanf(strings.NewReplacer(",", " ", "x", " ").Replace(a.Value), "%g %g", &x, &y)
				return x, y
			}
		}
		return 0, 0
	}
	out := map[string][2]int{}
	var walk func(n node, x, y float64)
	walk = func(n node, x, y float64) {
		px, py := attr(n, "pos")
		x, y = x+px, y+py
		if n.XMLName.Local == "text" {
			w, h := attr(n, "size")
			out[strings.TrimSpace(n.Text)] = [2]int{int(x + w/2), int(y + h/2)}
		}
		for _, k := range n.Kids {
			walk(k, x, y)
		}
	}
	walk(root, 0, 0)
	for _, b := range []string{"Provision", "Start", "Run Diagnostics"} {
		if _, ok := out[b]; !ok {
			t.Fatalf("no %q in the golden layout", b)
		}
	}
	return out
}

// uiApp is the real app in a real window under Xvfb, on a copy of the
// provisioned container, served its image from loopback.
type uiApp struct {
	c     cliRun
	pid   int
	win   string
	xenv  []string
	shots string // screenshots and the app's log
	log   string
}

// startApp starts the app, waits for its window (moved to 0,0 and sized
// as the golden layout is) and for it to own the sandbox.
func startApp(t testing.TB) *uiApp {
	t.Helper()
	return startAppOn(t, nil)
}

// startAppOn is startApp with prep run on the data folder before the app
// starts (nil: none).
func startAppOn(t testing.TB, prep func(config.Paths)) *uiApp {
	t.Helper()
	requireGuest(t)
	for _, tool := range []string{"Xvfb", "xdotool", "import"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: apt-get install -y xvfb xdotool imagemagick", tool)
		}
	}
	a := &uiApp{shots: os.Getenv("OSAURUS_SCREENSHOTS")}
	if a.shots == "" {
		a.shots = t.TempDir()
	}
	srv := newSwitchableServer(t)
	p := copyContainer(t)
	if prep != nil {
		prep(p)
	}
	cfg := testConfig(t)
	cfg.ImageManifest = srv.URL + "/manifest.json"
	// The NAT check fetches this: on loopback, like every test's traffic.
	cfg.DiagnosticsURL = srv.URL + "/manifest.json"
	cfg.AutoStart = false
	if err := config.SaveSandbox(p.SandboxJSON(), cfg); err != nil {
		t.Fatal(err)
	}
	bin := buildCLI(t)
	a.c = cliRun{t: t, bin: bin, home: p.Root}

	display := startXvfb(t)
	a.xenv = append(os.Environ(), "DISPLAY="+display, "FYNE_SCALE=1", config.HomeEnv+"="+p.Root)

	app := exec.Command(bin)
	app.Env = a.xenv
	a.log = filepath.Join(a.shots, "app.log")
	appLog, err := os.Create(a.log)
	if err != nil {
		t.Fatal(err)
	}
	app.Stdout, app.Stderr = appLog, appLog
	app.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	a.pid = app.Process.Pid
	t.Cleanup(func() {
		if t.Failed() {
			// Every goroutine's stack into the app's log: what the app
			// was doing when the test gave up.
			app.Process.Signal(syscall.SIGQUIT)
			app.Wait()
		}
		a.c.run("stop") // the app owns the VM: stop it before the app goes
		app.Process.Kill()
		app.Wait()
		appLog.Close()
		if t.Failed() {
			b, _ := os.ReadFile(a.log)
			t.Logf("app log:\n%s", b)
		}
	})
	// Generous: on a loaded 2-core machine the first start of a cgo UI
	// binary (fonts, GL under Xvfb) has taken over a minute.
	waitFor(t, "the window", 3*time.Minute, func() bool {
		// search exits 1 while no window matches yet.
		out, _ := a.xdotool("search", "--name", "Osaurus Sandbox")
		if ids := strings.Fields(out); len(ids) > 0 {
			a.win = ids[0]
		}
		return a.win != ""
	})
	a.x(t, "windowmove", a.win, "0", "0")
	a.x(t, "windowsize", a.win, "900", "760")
	waitFor(t, "the app to own the sandbox", 30*time.Second, func() bool { return a.status().Owner == "app" })
	return a
}

func (a *uiApp) xdotool(args ...string) (string, error) {
	cmd := exec.Command("xdotool", args...)
	cmd.Env = a.xenv
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("xdotool %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// x runs an xdotool step that must work: a click that didn't happen
// fails here, not as a wait for its effect.
func (a *uiApp) x(t testing.TB, args ...string) string {
	t.Helper()
	out, err := a.xdotool(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (a *uiApp) status() (st struct{ State, Owner string }) {
	out, _, _ := a.c.run("status", "--json")
	json.Unmarshal([]byte(out), &st)
	return st
}

// capture is the window's pixels as raw RGB.
func (a *uiApp) capture(t testing.TB) []byte {
	t.Helper()
	cmd := exec.Command("import", "-window", "root", "-crop", "900x760+0+0", "-depth", "8", "rgb:-")
	cmd.Env = a.xenv
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("screenshot: %v %s", err, stderr.String())
	}
	return out
}

// waitShows waits for the window's title to end with the state the
// window shows (the title is set after the rest of the window).
func (a *uiApp) waitShows(t testing.TB, state string) {
	t.Helper()
	var title string
	waitFor(t, "the window to show "+state, 5*time.Minute, func() bool {
		title, _ = a.xdotool("getwindowname", a.win)
		return strings.HasSuffix(title, " — "+state)
	})
}

// shot saves a screenshot once the window has drawn and settled: two
// captures in a row show the same pixels, and more than a handful of
// colours (a window not drawn yet is one flat colour, and settled too).
// The window redraws nothing on a timer more often than once a minute.
func (a *uiApp) shot(t testing.TB, name string) {
	t.Helper()
	var last []byte
	waitFor(t, "the window to draw and settle before "+name, 2*time.Minute, func() bool {
		cur := a.capture(t)
		same := last != nil && bytes.Equal(cur, last)
		last = cur
		return same && colours(cur, 16) >= 16
	})
	a.save(t, name)
}

// save saves a screenshot of the window as it is.
func (a *uiApp) save(t testing.TB, name string) {
	t.Helper()
	cmd := exec.Command("import", "-window", "root", "-crop", "900x760+0+0", filepath.Join(a.shots, name))
	cmd.Env = a.xenv
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("screenshot: %v %s", err, out)
	}
}

// colours counts the distinct colours in raw RGB pixels, up to limit.
func colours(rgb []byte, limit int) int {
	seen := map[[3]byte]bool{}
	for i := 0; i+2 < len(rgb) && len(seen) < limit; i += 3 {
		seen[[3]byte{rgb[i], rgb[i+1], rgb[i+2]}] = true
	}
	return len(seen)
}

// diagLine is the owner's log line for one diagnostic result.
var diagLine = regexp.MustCompile(`(?m)^diagnostics: ([a-z-]+): ([a-z-]+) (".*")$`)

// TestUISmoke starts the real app in a real window under Xvfb, clicks
// Provision, Start and Run Diagnostics, checks each click's effect and
// every diagnostic's result, and saves a screenshot after each step (into
// $OSAURUS_SCREENSHOTS, else a temp dir).
func TestUISmoke(t *testing.T) {
	a := startApp(t)
	buttons := buttonCentres(t)
	// A click waits for the window to show the state the button needs:
	// the owner's state (status) can be ahead of the window's on a loaded
	// machine, and a click on a button still disabled does nothing.
	click := func(button, shows string) {
		t.Helper()
		a.waitShows(t, shows)
		at := buttons[button]
		a.x(t, "mousemove", "--window", a.win, fmt.Sprint(at[0]), fmt.Sprint(at[1]), "click", "1")
	}
	t.Cleanup(func() {
		if t.Failed() {
			a.save(t, "failed.png") // what the window showed
		}
	})
	a.waitShows(t, "Stopped")
	a.shot(t, "1-opened.png")

	click("Provision", "Stopped")
	waitFor(t, "provisioning to start", 30*time.Second, func() bool { return a.status().State == "provisioning" })
	waitFor(t, "provisioning to finish", 10*time.Minute, func() bool { return a.status().State == "stopped" })
	a.waitShows(t, "Stopped")
	a.shot(t, "2-provisioned.png")

	click("Start", "Stopped")
	waitFor(t, "the VM to run", 5*time.Minute, func() bool { return a.status().State == "running" })
	a.waitShows(t, "Running")
	a.shot(t, "3-running.png")

	// The owner logs each result, then a last line, as the window shows
	// them; every check has a time limit of 4 minutes at most and they
	// run together, so a run that logs nothing for 90 s never started:
	// click again (a click while one runs does nothing, its button is
	// disabled).
	var appLog []byte
	started := func() bool {
		appLog, _ = os.ReadFile(a.log)
		return bytes.Contains(appLog, []byte("diagnostics: "))
	}
	for try := 1; ; try++ {
		click("Run Diagnostics", "Running")
		if testwait.Within(90*time.Second, 200*time.Millisecond, started) {
			break
		}
		if try == 3 {
			t.Fatalf("three clicks on Run Diagnostics started no diagnostics")
		}
		t.Logf("click %d on Run Diagnostics started nothing in 90 s: clicking again", try)
	}
	waitFor(t, "the diagnostics the window started to finish", 6*time.Minute, func() bool {
		appLog, _ = os.ReadFile(a.log)
		return bytes.Contains(appLog, []byte("diagnostics: done"))
	})
	got := map[string]string{}
	for _, m := range diagLine.FindAllStringSubmatch(string(appLog), -1) {
		got[m[1]] = m[2] + " " + m[3]
	}
	for _, c := range diagnostics.Checks() {
		if r, ok := got[c.Name]; !ok {
			t.Errorf("diagnostic %s: no result in the app's log", c.Name)
		} else if !strings.HasPrefix(r, string(diagnostics.Pass)+" ") {
			t.Errorf("diagnostic %s: %s, want pass", c.Name, r)
		}
	}
	// Scroll the tab down so the whole list shows.
	a.x(t, "mousemove", "--window", a.win, "450", "500")
	for range 12 {
		a.x(t, "click", "5")
	}
	a.shot(t, "4-diagnostics.png")
	for _, f := range []string{"1-opened.png", "2-provisioned.png", "3-running.png", "4-diagnostics.png"} {
		if st, err := os.Stat(filepath.Join(a.shots, f)); err != nil || st.Size() < 10_000 {
			t.Errorf("screenshot %s: %v", f, err)
		}
	}
	t.Logf("screenshots in %s", a.shots)
}

// startXvfb starts a virtual X server on a display it picks itself and
// returns that display once the server accepts clients: Xvfb writes the
// number to -displayfd only when it is ready, so there is no race with the
// app's first connection and no clash with another server's display.
func startXvfb(t testing.TB) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	xvfb := exec.Command("Xvfb", "-displayfd", "3", "-screen", "0", "1280x900x24", "-nolisten", "tcp")
	xvfb.ExtraFiles = []*os.File{w}
	var stderr strings.Builder
	xvfb.Stderr = &stderr
	xvfb.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := xvfb.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	exited := make(chan struct{})
	go func() { xvfb.Wait(); close(exited) }()
	t.Cleanup(func() { xvfb.Process.Kill(); <-exited })
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(r, 16)) // "N\n", then EOF when Xvfb exits or closes it
		got <- strings.TrimSpace(string(b))
	}()
	select {
	case n := <-got:
		if n == "" {
			<-exited
			t.Fatalf("Xvfb exited before it was ready: %s", stderr.String())
		}
		return ":" + n
	case <-exited:
		t.Fatalf("Xvfb exited before it was ready: %s", stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("Xvfb did not report a display within 2 minutes: %s", stderr.String())
	}
	return ""
}

func waitFor(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, what, limit, 250*time.Millisecond, cond)
}
