// Package pkgname holds the rules for system package names, shared by
// sandbox_install (names from agents) and an image manifest's packages
// (names from the user), so both accept exactly the same names.
package pkgname

import (
	"fmt"
	"regexp"
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
