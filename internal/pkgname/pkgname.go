// Package pkgname holds the rules for system package names, shared by
// sandbox_install (names from agents) and an image manifest's packages
// (names from the user), so both accept exactly the same names.
package pkgname

import (
	"fmt"
	"regexp"
	"strings"
)

// Package names are passed as separate arguments (never through a shell);
// these patterns also keep them from being read as options. Each follows
// its package manager's naming rules, and none allows a name that the
// manager would read as anything but "install this": apt-get install reads
// a trailing "-" as "remove", so a name ends in a letter, digit or "+", as
// Debian's names do.
var (
	Apt = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]*[a-z0-9+](=[A-Za-z0-9.+~:_-]*[A-Za-z0-9+~])?$`)
	Apk = regexp.MustCompile(`^[a-z0-9][a-z0-9+._-]*[a-z0-9+_]((=|~|>=|<=|>|<)[A-Za-z0-9.+_~-]*[A-Za-z0-9+_])?$`)
)

// Manager is the package manager of a distro ("alpine": apk, "debian":
// apt), or "" for one this project doesn't know.
func Manager(distro string) string {
	switch distro {
	case "alpine":
		return "apk"
	case "debian":
		return "apt"
	}
	return ""
}

// For returns the name pattern of a package manager ("apk" or "apt") and an
// example of valid names.
func For(pm string) (*regexp.Regexp, string, error) {
	switch pm {
	case "apk":
		return Apk, "jq or curl=8.5.0-r0", nil
	case "apt":
		return Apt, "jq or curl=7.88.1-10", nil
	}
	return nil, "", fmt.Errorf("no supported package manager %q (want apk or apt)", pm)
}

// Tool is a program the sandbox_* tools run and the packages that bring it.
type Tool struct {
	Program string // what the toolset check looks for ("venv": python3 -m venv with pip)
	What    string // how messages name it
	Apk     []string
	Apt     []string
	UsedBy  string // the tools that need it
}

// Tools is the toolset the sandbox_* tools run. The built-in Alpine image
// installs all of it (and more: git, curl, ...); the diagnostics' toolset
// check lists what a guest lacks.
var Tools = []Tool{
	{"rg", "ripgrep (rg)", []string{"ripgrep"}, []string{"ripgrep"}, "sandbox_search_files (falls back to a built-in search)"},
	{"bash", "bash", []string{"bash"}, []string{"bash"}, "sandbox_run_script (.sh, .bash)"},
	{"python3", "python3", []string{"python3", "py3-pip"}, []string{"python3", "python3-venv"}, "sandbox_run_script (.py), sandbox_pip_install"},
	{"venv", "python3's venv with pip", []string{"py3-pip"}, []string{"python3-venv"}, "sandbox_pip_install"},
	{"node", "Node.js (node)", []string{"nodejs"}, []string{"nodejs"}, "sandbox_run_script (.js), sandbox_npm_install"},
	{"npm", "npm", []string{"nodejs", "npm"}, []string{"nodejs", "npm"}, "sandbox_npm_install"},
}

// ToolFor returns the toolset entry of a program, or one naming a package
// after the program.
func ToolFor(program string) Tool {
	for _, t := range Tools {
		if t.Program == program {
			return t
		}
	}
	return Tool{Program: program, What: program, Apk: []string{program}, Apt: []string{program}}
}

// Packages returns the packages that bring t under package manager pm
// ("apk" or "apt"; nil otherwise).
func (t Tool) Packages(pm string) []string {
	switch pm {
	case "apk":
		return t.Apk
	case "apt":
		return t.Apt
	}
	return nil
}

// InstallCall is the sandbox_install call that installs pkgs.
func InstallCall(pkgs []string) string {
	q := make([]string, len(pkgs))
	for i, p := range pkgs {
		q[i] = fmt.Sprintf("%q", p)
	}
	return `sandbox_install {"packages": [` + strings.Join(q, ", ") + `]}`
}

// ForGuest translates a recipe's dependencies, written for Alpine as the
// Osaurus documentation's recipes are, to the names of package manager pm:
// on apt, Alpine's Python packages py3-NAME are Debian's python3-NAME.
// Names with a version are kept as written.
func ForGuest(pkgs []string, pm string) []string {
	out := make([]string, 0, len(pkgs))
	for _, p := range pkgs {
		if pm == "apt" {
			if rest, ok := strings.CutPrefix(p, "py3-"); ok && !strings.ContainsAny(rest, "=<>~") {
				p = "python3-" + rest
			}
		}
		if !contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
