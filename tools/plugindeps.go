package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/pkgname"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// PluginPackagesFile lists, on the VM's root disk, the packages installed
// for plugins. A Reset or a new image starts a root disk without it, so a
// plugin's packages are installed again before its next command instead
// of the plugin breaking (its folder and record live on the host and
// survive).
const PluginPackagesFile = "/var/lib/osaurus-sandbox/plugin-packages"

// pluginDeps remembers which plugin packages the current guest session
// has, so a plugin command costs no extra round trip once they are known.
type pluginDeps struct {
	mu   sync.Mutex
	of   *agentproto.Client
	have map[string]bool
}

func (d *pluginDeps) missing(g *agentproto.Client, pkgs []string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.of != g {
		return pkgs
	}
	var out []string
	for _, p := range pkgs {
		if !d.have[p] {
			out = append(out, p)
		}
	}
	return out
}

func (d *pluginDeps) add(g *agentproto.Client, pkgs []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.of != g {
		d.of, d.have = g, map[string]bool{}
	}
	for _, p := range pkgs {
		d.have[p] = true
	}
}

// ensurePluginPackages makes sure the running guest has p's packages,
// installing what a fresh root disk lacks. c must be admitted.
func ensurePluginPackages(ctx context.Context, c *call, p *plugins.Plugin) error {
	if len(p.Dependencies) == 0 {
		return nil
	}
	d := &c.env.deps
	need := d.missing(c.g, guestDependencies(c, p))
	if len(need) == 0 {
		return nil
	}
	listed, err := readPluginPackages(ctx, c)
	if err != nil {
		return err
	}
	d.add(c.g, listed)
	if need = d.missing(c.g, need); len(need) == 0 {
		return nil
	}
	if missing := notInstalled(ctx, c, need); len(missing) == 0 {
		return writePluginPackages(ctx, c, listed, need)
	}
	if _, err := installSystem(ctx, c, packagesArgs{Packages: need}); err != nil {
		return fmt.Errorf("installing the packages of plugin %s (%s), which this VM's root disk does not have (it was reset or re-provisioned since the install): %w",
			p.ID(), strings.Join(need, " "), err)
	}
	c.warn("installed the packages of plugin %s again (%s): the VM's root disk was reset since the plugin was installed", p.ID(), strings.Join(need, " "))
	return writePluginPackages(ctx, c, listed, need)
}

// recordPluginPackages adds pkgs (already installed) to the list on the
// root disk.
func recordPluginPackages(ctx context.Context, c *call, pkgs []string) error {
	if len(pkgs) == 0 {
		return nil
	}
	listed, err := readPluginPackages(ctx, c)
	if err != nil {
		return err
	}
	return writePluginPackages(ctx, c, listed, pkgs)
}

// writePluginPackages writes the list read as listed, with pkgs added.
func writePluginPackages(ctx context.Context, c *call, listed, pkgs []string) error {
	all := slices.Clone(listed)
	for _, p := range pkgs {
		if !slices.Contains(all, p) {
			all = append(all, p)
		}
	}
	slices.Sort(all)
	if _, err := c.g.WriteFile(ctx, agentproto.WriteFileRequest{Path: PluginPackagesFile, Data: []byte(strings.Join(all, "\n") + "\n"), Mode: 0o644, MakeParents: true}); err != nil {
		return fmt.Errorf("recording the plugin packages in %s: %w", PluginPackagesFile, err)
	}
	c.env.deps.add(c.g, all)
	return nil
}

// readPluginPackages reads the list; a root disk without one has none.
func readPluginPackages(ctx context.Context, c *call) ([]string, error) {
	r, err := c.g.ReadFile(ctx, agentproto.ReadFileRequest{Path: PluginPackagesFile})
	switch {
	case errors.Is(err, agentproto.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, envelope.Errorf(envelope.ExecutionError, "reading %s in the VM: %v", PluginPackagesFile, err)
	}
	return strings.Fields(string(r.Data)), nil
}

// guestDependencies are p's packages under the running guest's names: the
// documentation's recipes name Alpine's (pkgname.ForGuest).
func guestDependencies(c *call, p *plugins.Plugin) []string {
	return pkgname.ForGuest(p.Dependencies, c.g.Info.PackageMgr)
}

// notInstalled are the packages of pkgs the guest's package database
// doesn't list as installed, so a recipe whose packages the image already
// has installs without the package manager (and without its network). A
// name with a version, or an answer that can't be read, counts as missing.
func notInstalled(ctx context.Context, c *call, pkgs []string) []string {
	var argv []string
	switch c.g.Info.PackageMgr {
	case "apt":
		argv = append([]string{"dpkg-query", "-W", "-f=${Package} ${db:Status-Status}\\n", "--"}, pkgs...)
	case "apk":
		argv = append([]string{"apk", "info", "-e"}, pkgs...) // names are checked: none starts with "-"
	default:
		return pkgs
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, _, _, err := c.g.Output(ctx, agentproto.ExecRequest{Argv: argv, Env: []string{"LC_ALL=C"}})
	if err != nil {
		return pkgs
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		switch {
		case c.g.Info.PackageMgr == "apt" && len(f) == 2 && f[1] == "installed":
			have[f[0]] = true
		case c.g.Info.PackageMgr == "apk" && len(f) == 1:
			have[f[0]] = true
		}
	}
	var missing []string
	for _, p := range pkgs {
		if !have[p] {
			missing = append(missing, p)
		}
	}
	return missing
}
