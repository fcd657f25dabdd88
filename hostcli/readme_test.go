package hostcli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
)

// readmeBlock is the first ```sh block after the README heading that
// starts with heading.
func readmeBlock(t *testing.T, heading string) []string {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n## "+heading)
	if !ok {
		t.Fatalf("README has no section %q", heading)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatalf("README's %q has no sh block", heading)
	}
	block, _, _ := strings.Cut(rest, "```")
	var lines []string
	for l := range strings.SplitSeq(block, "\n") {
		if cmd, _, _ := strings.Cut(l, "#"); strings.TrimSpace(cmd) != "" {
			lines = append(lines, strings.TrimSpace(cmd))
		}
	}
	return lines
}

// TestReadmeSetUpOnRealBinary follows the README as a newcomer does, in a
// fresh home: its set-up's `make install` puts the app on that home's
// PATH, and the quick start's commands run from there, typed as written,
// up to `agent connect`, whose client config names the installed binary.
// (The quick start's `start` boots a VM: TestCLIFirstDay runs that part.)
func TestReadmeSetUpOnRealBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the app with make")
	}
	setUp := readmeBlock(t, "Set-up")
	if len(setUp) == 0 || setUp[0] != "make install" {
		t.Fatalf("the README's set-up doesn't start with `make install`: %q", setUp)
	}
	home := t.TempDir()
	goEnv := func(k string) string {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	// A fresh home, but the machine's Go and its caches (a fresh build
	// cache would rebuild everything), and no keychain.
	env := []string{"HOME=" + home, "PATH=" + filepath.Dir(goEnv("GOROOT")+"/bin/go") + ":/usr/sbin:/usr/bin:/sbin:/bin",
		"GOCACHE=" + goEnv("GOCACHE"), "GOMODCACHE=" + goEnv("GOMODCACHE"), "GOPATH=" + goEnv("GOPATH"),
		"GOFLAGS=" + goEnv("GOFLAGS"), "GOPROXY=" + goEnv("GOPROXY"), "DBUS_SESSION_BUS_ADDRESS=" + testkeyring.DeadBus,
		"DISPLAY=", "WAYLAND_DISPLAY="}
	mk := exec.Command("sh", "-c", setUp[0])
	mk.Dir = ".."
	mk.Env = env
	out, err := mk.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", setUp[0], err, out)
	}
	installed := filepath.Join(home, ".local", "bin", "osaurus-sandbox")
	if st, err := os.Stat(installed); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("make install didn't install %s: %v\n%s", installed, err, out)
	}
	if !strings.Contains(string(out), filepath.Dir(installed)+" is not on your PATH: add it") {
		t.Errorf("make install doesn't say its folder is not on PATH:\n%s", out)
	}

	// The user adds ~/.local/bin to PATH, as make install said.
	env = append(env, "PATH="+filepath.Dir(installed)+":/usr/bin:/bin")
	quick := readmeBlock(t, "Quick start")
	for _, line := range quick {
		words := strings.Fields(line)
		if words[0] != "osaurus-sandbox" {
			t.Fatalf("quick start line %q isn't an osaurus-sandbox command", line)
		}
		if words[1] == "start" {
			// Needs a VM (TestCLIFirstDay boots it); here: the command is there.
			words = []string{"osaurus-sandbox", "help", "start"}
		}
		cmd := exec.Command("sh", "-c", strings.Join(words, " "))
		cmd.Dir = home
		cmd.Env = env
		cmd.Stdin = strings.NewReader("yes\n")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	data, err := os.ReadFile(filepath.Join(home, ".claude.json"))
	if err != nil {
		t.Fatalf("the quick start's connect wrote no Claude Code config: %v", err)
	}
	var cfg struct {
		MCPServers map[string]struct{ Command string } `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil || cfg.MCPServers["osaurus-sandbox-alice"].Command != installed {
		t.Fatalf("the client config doesn't run the installed binary %s: %v\n%s", installed, err, data)
	}
}
