package layers

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/osaurus/osaurus-sandbox"

// root is the module's folder.
var root = filepath.Join("..", "..")

// layer is one row of the table: its name and package patterns.
type layer struct {
	name     string
	patterns []string
}

var tick = regexp.MustCompile("`([^`]+)`")

// readTable reads the layer table of docs/architecture.md, top row first.
func readTable(t *testing.T) []layer {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	var layers []layer
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "#"): // the table ends at the next heading
			in = strings.HasPrefix(l, "## Packages")
		case in && strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| layer ") && !strings.HasPrefix(l, "|---"):
			cells := strings.Split(l, "|")
			if len(cells) < 4 {
				t.Fatalf("docs/architecture.md: a layer row without a packages cell: %s", l)
			}
			ly := layer{name: strings.TrimSpace(cells[1])}
			for _, m := range tick.FindAllStringSubmatch(cells[2], -1) {
				ly.patterns = append(ly.patterns, m[1])
			}
			layers = append(layers, ly)
		}
	}
	if len(layers) < 5 {
		t.Fatalf("docs/architecture.md: found %d layer rows under \"## Packages\"", len(layers))
	}
	return layers
}

// matches reports whether pattern names pkg (both below the module), and
// how specific the match is.
func matches(pattern, pkg string) (bool, int) {
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == dir || strings.HasPrefix(pkg, dir+"/"), len(dir)
	}
	return pkg == pattern, len(pattern) + 1 // an exact name beats a folder of the same name
}

// layerOf is the index of pkg's row, or -1; pattern is the one that won.
func layerOf(layers []layer, pkg string) (idx int, pattern string) {
	idx, best := -1, -1
	for i, ly := range layers {
		for _, p := range ly.patterns {
			if ok, n := matches(p, pkg); ok && n > best {
				idx, best, pattern = i, n, p
			}
		}
	}
	return idx, pattern
}

// imports lists every package of the module with non-test files for
// goos, with the module's packages its non-test files import (paths below
// the module).
func imports(t *testing.T, goos string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-f", `{{.ImportPath}}|{{len .GoFiles}}|{{len .CgoFiles}}|{{join .Imports " "}}`, "./...")
	cmd.Dir = root
	// cgo on, so the window's cgo files count; nothing is compiled.
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=arm64", "CGO_ENABLED=1", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list for %s: %v", goos, err)
	}
	pkgs := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(l, "|", 4)
		if len(f) != 4 {
			t.Fatalf("go list: %q", l)
		}
		if f[1] == "0" && f[2] == "0" {
			continue // tests only: its imports draw no arrow
		}
		pkg := rel(f[0])
		deps := []string{}
		for _, imp := range strings.Fields(f[3]) {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				deps = append(deps, rel(imp))
			}
		}
		pkgs[pkg] = deps
	}
	return pkgs
}

func rel(p string) string {
	if p == module {
		return "."
	}
	return strings.TrimPrefix(p, module+"/")
}

// No package imports one in a higher row of the table; every package is
// in a row, and every pattern of the table names a package.
func TestLayers(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("the go command is not on PATH: this test lists the module's packages with it")
	}
	layers := readTable(t)
	used := map[string]bool{}
	for _, goos := range []string{"linux", "darwin"} {
		pkgs := imports(t, goos)
		var problems []string
		for pkg, deps := range pkgs {
			li, pat := layerOf(layers, pkg)
			if li < 0 {
				problems = append(problems, fmt.Sprintf("%s is in no row of the table: add it to its layer", pkg))
				continue
			}
			used[pat] = true
			for _, d := range deps {
				di, _ := layerOf(layers, d)
				if di >= 0 && di < li {
					problems = append(problems, fmt.Sprintf("%s (%s) imports %s (%s), a higher layer", pkg, layers[li].name, d, layers[di].name))
				}
			}
		}
		sort.Strings(problems)
		for _, p := range problems {
			t.Errorf("%s: %s", goos, p)
		}
	}
	for _, ly := range layers {
		for _, p := range ly.patterns {
			if !used[p] {
				t.Errorf("the table's row %q names %s, which is no package (or is always matched by a longer pattern)", ly.name, p)
			}
		}
	}
}

// The layer lookup: the longest pattern wins, an exact name beats a
// folder pattern, a pattern names its folder and what is under it only.
func TestLayerOf(t *testing.T) {
	layers := []layer{
		{"top", []string{"cmd/...", "internal/darwincheck/..."}},
		{"mid", []string{"tools", "tools/..."}},
		{"low", []string{"internal/...", "agentproto"}},
	}
	for _, tc := range []struct {
		pkg  string
		want int
	}{
		{"cmd/x", 0}, {"internal/darwincheck", 0}, {"internal/darwincheck/cmd/d", 0},
		{"internal/explain", 2}, {"tools", 1}, {"tools/limit", 1}, {"toolsx", -1},
		{"agentproto", 2}, {"agentproto/control", -1}, {"cmd", 0},
	} {
		if got, _ := layerOf(layers, tc.pkg); got != tc.want {
			t.Errorf("layerOf(%s) = %d, want %d", tc.pkg, got, tc.want)
		}
	}
}
