//go:build linux

package e2e

import (
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

// TestUISmoke starts the real app in a real window under Xvfb, clicks
// Provision, Start and Run Diagnostics, and saves a screenshot after each
// step (into $OSAURUS_SCREENSHOTS, else a temp dir).
func TestUISmoke(t *testing.T) {
	requireGuest(t)
	for _, tool := range []string{"Xvfb", "xdotool", "import"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: apt-get install -y xvfb xdotool imagemagick", tool)
		}
	}
	shots := os.Getenv("OSAURUS_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	srv := newSwitchableServer(t)
	p := copyContainer(t)
	cfg := testConfig(t)
	cfg.ImageManifest = srv.URL + "/manifest.json"
	cfg.AutoStart = false
	if err := config.SaveSandbox(p.SandboxJSON(), cfg); err != nil {
		t.Fatal(err)
	}
	bin := buildCLI(t)
	c := cliRun{t: t, bin: bin, home: p.Root}

	display := startXvfb(t)
	xenv := append(os.Environ(), "DISPLAY="+display, "FYNE_SCALE=1", config.HomeEnv+"="+p.Root)

	app := exec.Command(bin)
	app.Env = xenv
	appLog, _ := os.Create(filepath.Join(shots, "app.log"))
	app.Stdout, app.Stderr = appLog, appLog
	app.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.run("stop") // the app owns the VM: stop it before the app goes
		app.Process.Kill()
		app.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(appLog.Name())
			t.Logf("app log:\n%s", b)
		}
	})

	xdotool := func(args ...string) (string, error) {
		cmd := exec.Command("xdotool", args...)
		cmd.Env = xenv
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("xdotool %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	// x runs an xdotool step that must work: a click that didn't happen
	// fails here, not as a wait for its effect.
	x := func(args ...string) string {
		t.Helper()
		out, err := xdotool(args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var win string
	// Generous: on a loaded 2-core machine the first start of a cgo UI
	// binary (fonts, GL under Xvfb) has taken over a minute.
	waitFor(t, "the window", 3*time.Minute, func() bool {
		// search exits 1 while no window matches yet.
		out, _ := xdotool("search", "--name", "Osaurus Sandbox")
		if ids := strings.Fields(out); len(ids) > 0 {
			win = ids[0]
		}
		return win != ""
	})
	x("windowmove", win, "0", "0")
	x("windowsize", win, "900", "760")
	status := func() (st struct{ State, Owner string }) {
		out, _, _ := c.run("status", "--json")
		json.Unmarshal([]byte(out), &st)
		return st
	}
	waitFor(t, "the app to own the sandbox", 30*time.Second, func() bool { return status().Owner == "app" })
	shot := func(name string) {
		t.Helper()
		time.Sleep(1500 * time.Millisecond) // let the window repaint
		cmd := exec.Command("import", "-window", "root", "-crop", "900x760+0+0", filepath.Join(shots, name))
		cmd.Env = xenv
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("screenshot: %v %s", err, out)
		}
	}
	buttons := buttonCentres(t)
	click := func(button string) {
		t.Helper()
		at := buttons[button]
		x("mousemove", "--window", win, fmt.Sprint(at[0]), fmt.Sprint(at[1]), "click", "1")
	}
	shot("1-opened.png")

	click("Provision")
	waitFor(t, "provisioning to start", 30*time.Second, func() bool { return status().State == "provisioning" })
	waitFor(t, "provisioning to finish", 10*time.Minute, func() bool { return status().State == "stopped" })
	shot("2-provisioned.png")

	click("Start")
	waitFor(t, "the VM to run", 5*time.Minute, func() bool { return status().State == "running" })
	shot("3-running.png")
	checkIdleCost(t, app.Process.Pid)

	click("Run Diagnostics")
	// The agent-user check creates agent-diag and the package-manager one
	// installs jq; with both done, the slowest checks are over.
	waitFor(t, "diagnostics", 5*time.Minute, func() bool {
		_, _, code := c.run("exec", "--", "sh", "-c", "id agent-diag && dpkg -s jq")
		return code == 0
	})
	time.Sleep(10 * time.Second)
	// Scroll the tab down so the whole list shows.
	x("mousemove", "--window", win, "450", "500")
	for range 12 {
		x("click", "5")
	}
	shot("4-diagnostics.png")
	for _, f := range []string{"1-opened.png", "2-provisioned.png", "3-running.png", "4-diagnostics.png"} {
		if st, err := os.Stat(filepath.Join(shots, f)); err != nil || st.Size() < 10_000 {
			t.Errorf("screenshot %s: %v", f, err)
		}
	}
	t.Logf("screenshots in %s", shots)
}

// startXvfb starts a virtual X server on a display it picks itself and
// returns that display once the server accepts clients: Xvfb writes the
// number to -displayfd only when it is ready, so there is no race with the
// app's first connection and no clash with another server's display.
func startXvfb(t *testing.T) string {
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

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, what, limit, 250*time.Millisecond, cond)
}
