package layers

import (
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// forbidden are what the front ends must not link: the VM, its images, the
// host API bridge, the lifecycle manager, the stores and the owner. They
// reach all of it through the owner (host/api).
var forbidden = []string{"vm/...", "provision/...", "bridge/...", "sandbox", "store/...", "host"}

// frontEnds are the packages that drive the owner through host/api only.
var frontEnds = []string{"hostcli", "ui"}

func isForbidden(pkg string) bool {
	for _, p := range forbidden {
		if ok, _ := matches(p, pkg); ok {
			return true
		}
	}
	return false
}

// graph is the import graph below front end fe (module packages, non-test
// files) for goos.
func graph(t *testing.T, fe, goos string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}|{{join .Imports " "}}`, "./"+fe)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=arm64", "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./%s for %s: %v", fe, goos, err)
	}
	g := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imps, _ := strings.Cut(l, "|")
		if pkg != module && !strings.HasPrefix(pkg, module+"/") {
			continue
		}
		for _, imp := range strings.Fields(imps) {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				g[rel(pkg)] = append(g[rel(pkg)], rel(imp))
			}
		}
		if g[rel(pkg)] == nil {
			g[rel(pkg)] = []string{}
		}
	}
	return g
}

// chain is the shortest import chain from to dst, for the message.
func chain(g map[string][]string, from, dst string) string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == dst {
			var path []string
			for ; p != ""; p = prev[p] {
				path = append([]string{p}, path...)
			}
			return strings.Join(path, " → ")
		}
		for _, d := range g[p] {
			if _, seen := prev[d]; !seen {
				prev[d] = p
				queue = append(queue, d)
			}
		}
	}
	return dst
}

// The command line and the window link none of the owner's machinery
// (`go list -deps ./hostcli ./ui`): they reach it through the owner.
func TestFrontEndsAreThin(t *testing.T) {
	for _, fe := range frontEnds {
		for _, goos := range []string{"linux", "darwin"} {
			g := graph(t, fe, goos)
			var thick []string
			for pkg := range g {
				if isForbidden(pkg) {
					thick = append(thick, chain(g, fe, pkg))
				}
			}
			sort.Strings(thick)
			for _, c := range thick {
				t.Errorf("%s (%s) links %s: reach it through host/api instead", fe, goos, c)
			}
		}
	}
}
