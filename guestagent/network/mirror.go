package network

import (
	"bufio"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// errNoMirror: the package sources name no host a policy can allow.
var errNoMirror = errors.New("the guest's package sources name no mirror host")

// PackageMirrorHosts lists the hosts the guest's package sources name,
// below root ("/" in the guest): apt's sources.list, sources.list.d
// (one-line and deb822 formats) and apk's repositories. Only http and
// https sources count; a local (file:, cdrom:) source needs no network.
func PackageMirrorHosts(root string) ([]string, error) {
	var uris []string
	addLines := func(path string, pick func(fields []string) []string) {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line, _, _ := strings.Cut(sc.Text(), "#")
			if fields := strings.Fields(line); len(fields) > 0 {
				uris = append(uris, pick(fields)...)
			}
		}
	}
	oneLine := func(fields []string) []string {
		if fields[0] != "deb" && fields[0] != "deb-src" {
			return nil
		}
		rest := fields[1:]
		if len(rest) > 0 && strings.HasPrefix(rest[0], "[") { // [opts]
			for len(rest) > 0 && !strings.HasSuffix(rest[0], "]") {
				rest = rest[1:]
			}
			if len(rest) > 0 {
				rest = rest[1:]
			}
		}
		if len(rest) == 0 {
			return nil
		}
		return rest[:1]
	}
	deb822 := func(fields []string) []string {
		if strings.EqualFold(fields[0], "URIs:") {
			return fields[1:]
		}
		return nil
	}
	apt := filepath.Join(root, "etc/apt")
	addLines(filepath.Join(apt, "sources.list"), oneLine)
	lists, _ := filepath.Glob(filepath.Join(apt, "sources.list.d/*.list"))
	for _, p := range lists {
		addLines(p, oneLine)
	}
	sources, _ := filepath.Glob(filepath.Join(apt, "sources.list.d/*.sources"))
	for _, p := range sources {
		addLines(p, deb822)
	}
	addLines(filepath.Join(root, "etc/apk/repositories"), func(fields []string) []string {
		if strings.HasPrefix(fields[0], "@") && len(fields) > 1 { // @tag URL
			return fields[1:2]
		}
		return fields[:1]
	})
	var hosts []string
	for _, raw := range uris {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			continue
		}
		hosts = append(hosts, strings.ToLower(u.Hostname()))
	}
	slices.Sort(hosts)
	hosts = slices.Compact(hosts)
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%w (looked in %s and %s)", errNoMirror, apt, filepath.Join(root, "etc/apk/repositories"))
	}
	return hosts, nil
}
