package tools

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/pkgname"
	"github.com/osaurus/osaurus-sandbox/sandboxpath"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// System package names follow internal/pkgname (shared with the image
// manifest's packages); pip's and npm's are checked here.
var (
	aptPkgRE = pkgname.Apt
	apkPkgRE = pkgname.Apk
	pipPkgRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?((==|>=|<=|~=|!=|>|<)[A-Za-z0-9.*+!_-]+(,(==|>=|<=|~=|!=|>|<)[A-Za-z0-9.*+!_-]+)*)?$`)
	npmPkgRE = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9._~][a-z0-9._~-]*(@[A-Za-z0-9.^~<>=*+_ |-]+)?$`)
)

// staleIndex matches package-manager output that a refreshed index may
// fix: apt's lists are empty or older than the mirror, apk's index fetch
// failed.
var staleIndex = regexp.MustCompile(`Unable to locate package|has no installation candidate|Failed to fetch|404 +Not Found|` +
	`unable to select packages|temporary error|UNTRUSTED signature|No such file or directory.*APKINDEX`)

type packagesArgs struct {
	Packages []string `json:"packages"`
}

func checkPackages(pkgs []string, re *regexp.Regexp, example string) error {
	if len(pkgs) == 0 {
		return envelope.ArgErrorf("packages", "a non-empty array of package names", "packages is empty")
	}
	if len(pkgs) > MaxPackages {
		return envelope.ArgErrorf("packages", fmt.Sprintf("at most %d packages", MaxPackages), "%d packages at once is too many; install at most %d per call", len(pkgs), MaxPackages)
	}
	for _, p := range pkgs {
		if !re.MatchString(p) {
			return envelope.ArgErrorf("packages", "package names like "+example, "%q is not a valid package name", p)
		}
	}
	return nil
}

type installResult struct {
	Installed []string `json:"installed"`
	ExitCode  int      `json:"exit_code"`
	Output    string   `json:"output"`
}

// InstallLock serialises package installs across agents: one package
// manager runs in the VM at a time. It is a channel so a waiting call can
// give up when its ctx ends.
type InstallLock struct{ ch chan struct{} }

// NewInstallLock returns an unlocked InstallLock.
func NewInstallLock() *InstallLock { return &InstallLock{ch: make(chan struct{}, 1)} }

// lockInstall waits for the install lock shared by every agent.
func (c *call) lockInstall(ctx context.Context) (func(), error) {
	select {
	case c.env.install.ch <- struct{}{}:
		return func() { <-c.env.install.ch }, nil
	case <-ctx.Done():
		return nil, envelope.Errorf(envelope.Timeout, "waited too long for another agent's package install to finish: %w", ctx.Err())
	}
}

// pmRun runs one package-manager command and returns its combined output.
// A root install reaches the guest's package mirror and nothing else.
func (c *call) pmRun(ctx context.Context, id agentproto.Identity, argv []string, env []string, timeout time.Duration) (string, agentproto.ExitStatus, error) {
	out := newCapture(StdoutCap)
	req := agentproto.ExecRequest{Identity: id, Argv: argv, Env: env}
	if id.User == "" {
		req.Network = agentproto.NetworkPackageMirror
	}
	st, err := c.exec(ctx, req, timeout, out, out)
	text, _ := out.Text()
	// Scrubbed before the callers cut it into their messages.
	return c.scrub(text), st, err
}

func installSystem(ctx context.Context, c *call, a packagesArgs) (any, error) {
	// Admission first: which package manager, so which naming rules, is
	// the running guest's.
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	// Root's environment must not include anything of the agent's (its
	// PATH entries are writable by the agent).
	env := []string{"DEBIAN_FRONTEND=noninteractive"}
	var install, update []string
	switch pm := c.g.Info.PackageMgr; pm {
	case "apk":
		if err := checkPackages(a.Packages, apkPkgRE, "jq or curl=8.5.0-r0"); err != nil {
			return nil, err
		}
		install = append([]string{"apk", "add", "--no-cache"}, a.Packages...)
		update = []string{"apk", "update"}
	case "apt":
		if err := checkPackages(a.Packages, aptPkgRE, "jq or curl=7.88.1-10"); err != nil {
			return nil, err
		}
		// Wait for dpkg's lock rather than failing: another process (an
		// MCP server of another client) may be installing right now.
		install = append([]string{"apt-get", "install", "-y", "-q", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=60"}, a.Packages...)
		update = []string{"apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=60"}
	default:
		return nil, envelope.Errorf(envelope.ExecutionError, "the sandbox has no supported package manager (apk or apt) (distro %q)", c.g.Info.Distro)
	}
	unlock, err := c.lockInstall(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	root := agentproto.Identity{} // installs are the one thing that runs as root
	run := func(argv []string) (string, agentproto.ExitStatus, error) {
		out, st, err := c.pmRun(ctx, root, argv, env, InstallTimeout)
		if err == nil && st.TimedOut {
			err = envelope.Errorf(envelope.Timeout, "%s did not finish within %s: %s", argv[0], InstallTimeout, truncTail(out, 2000))
		}
		return out, st, err
	}
	refresh := func(why string) error {
		out, st, err := run(update)
		if err != nil {
			return err
		}
		if st.Code != 0 {
			return envelope.Errorf(envelope.ExecutionError, "refreshing the package index (%s) failed with exit code %d: %s",
				strings.Join(update, " "), st.Code, truncTail(out, 4000))
		}
		c.warn("refreshed the package index first: %s", why)
		return nil
	}
	if c.g.Info.PackageMgr == "apt" && c.aptListsEmpty(ctx) {
		if err := refresh("it was empty"); err != nil {
			return nil, err
		}
	}
	out, st, err := run(install)
	if err == nil && st.Code != 0 && staleIndex.MatchString(out) {
		if err := refresh("the install failed in a way a stale index explains, so it was retried once"); err != nil {
			return nil, err
		}
		out, st, err = run(install)
	}
	if err != nil {
		return nil, err
	}
	if st.Code != 0 {
		return nil, envelope.Errorf(envelope.ExecutionError, "%s failed with exit code %d; check the package names for this distro (%s): %s",
			strings.Join(install[:2], " "), st.Code, c.g.Info.Distro, truncTail(out, 4000))
	}
	return installResult{Installed: a.Packages, ExitCode: st.Code, Output: truncTail(out, StderrCap)}, nil
}

// aptListsEmpty reports whether apt has no package lists yet (images ship
// without them to stay small).
func (c *call) aptListsEmpty(ctx context.Context) bool {
	r, err := c.g.List(ctx, agentproto.ListRequest{Path: "/var/lib/apt/lists", MaxEntries: 1000})
	if err != nil {
		return true
	}
	for _, e := range r.Entries {
		if strings.Contains(e.Name, "_Packages") {
			return false
		}
	}
	return true
}

// languageArgs are sandbox_pip_install's and sandbox_npm_install's.
type languageArgs struct {
	Packages []string `json:"packages"`
	// Cwd, when set, is a project folder to install into instead of the
	// agent's own venv or global prefix.
	Cwd string `json:"cwd"`
}

// projectDir checks a language install's cwd, resolved on the host
// beforehand: an existing directory beneath the agent's home or the shared
// directory, checked as the agent (the guest confines the stat beneath
// its root).
func (c *call) projectDir(ctx context.Context, p sandboxpath.Resolved) (sandboxpath.Resolved, error) {
	st, err := c.g.Stat(ctx, agentproto.PathRequest{Identity: c.as(p.Root), Path: p.Path})
	if errors.Is(err, agentproto.ErrNotFound) {
		return p, &envelope.Error{Kind: envelope.NotFound, Field: "cwd", Expected: "an existing directory", Err: fmt.Errorf("%s does not exist", p.Path)}
	}
	if err != nil {
		return p, err
	}
	if st.Type != "dir" {
		return p, envelope.ArgErrorf("cwd", "a directory", "%s is not a directory", p.Path)
	}
	return p, nil
}

type pipResult struct {
	installResult
	Venv string `json:"venv"`
}

func installPip(ctx context.Context, c *call, a languageArgs) (any, error) {
	if err := checkPackages(a.Packages, pipPkgRE, "requests or numpy==2.1.0"); err != nil {
		return nil, err
	}
	var project sandboxpath.Resolved
	if a.Cwd != "" {
		var err error
		if project, err = c.resolve("cwd", a.Cwd, ""); err != nil {
			return nil, err
		}
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, LanguageTimeout+hostGrace)
	defer cancel()
	deadline := time.Now().Add(LanguageTimeout)
	left := func() (time.Duration, error) {
		d := time.Until(deadline)
		if d < time.Second {
			return 0, envelope.Errorf(envelope.Timeout, "pip install did not finish within %s", LanguageTimeout)
		}
		return d, nil
	}
	home := c.agent.Home()
	venv := home + "/.venv"
	me := c.as(home)
	if a.Cwd != "" {
		dir, err := c.projectDir(ctx, project)
		if err != nil {
			return nil, err
		}
		me, venv = c.as(dir.Root), dir.Path+"/.venv"
		// The project's own venv, by the two usual names.
		for _, name := range []string{".venv", "venv"} {
			if _, err := c.g.Stat(ctx, agentproto.PathRequest{Identity: me, Path: dir.Path + "/" + name + "/bin/pip"}); err == nil {
				venv = dir.Path + "/" + name
				break
			}
		}
	}
	if _, err := c.g.Stat(ctx, agentproto.PathRequest{Identity: me, Path: venv + "/bin/pip"}); err != nil {
		d, err := left()
		if err != nil {
			return nil, err
		}
		// With the system's site packages the venv also sees the agent's
		// user site (~/.local), so `pip install --user` works in it, as
		// the documentation's recipes run it.
		out, st, err := c.pmRun(ctx, me, []string{"python3", "-m", "venv", "--system-site-packages", venv}, nil, d)
		if err != nil {
			return nil, c.startError(err, "python3", "")
		}
		if st.TimedOut {
			return nil, envelope.Errorf(envelope.Timeout, "creating the virtual environment %s did not finish within %s", venv, LanguageTimeout)
		}
		if st.Code != 0 {
			hint := ""
			if strings.Contains(out, "ensurepip") || strings.Contains(out, "No module named venv") {
				hint = " " + c.missingHint("venv")
			}
			return nil, envelope.Errorf(envelope.ExecutionError, "creating the virtual environment %s failed (exit %d):%s %s", venv, st.Code, hint, truncTail(out, 4000))
		}
		c.warn("created your Python virtual environment %s", venv)
	}
	argv := append([]string{venv + "/bin/pip", "install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off"}, a.Packages...)
	d, err := left()
	if err != nil {
		return nil, err
	}
	out, st, err := c.pmRun(ctx, me, argv, nil, d)
	if err != nil {
		return nil, err
	}
	if st.TimedOut {
		return nil, envelope.Errorf(envelope.Timeout, "pip install did not finish within %s: %s", LanguageTimeout, truncTail(out, 2000))
	}
	if st.Code != 0 {
		return nil, envelope.Errorf(envelope.ExecutionError, "pip install failed with exit code %d: %s", st.Code, truncTail(out, 4000))
	}
	return pipResult{installResult{a.Packages, st.Code, truncTail(out, StderrCap)}, venv}, nil
}

type npmResult struct {
	installResult
	Prefix string `json:"prefix"`
}

func installNpm(ctx context.Context, c *call, a languageArgs) (any, error) {
	if err := checkPackages(a.Packages, npmPkgRE, "typescript or @scope/pkg@1.2.3"); err != nil {
		return nil, err
	}
	home := c.agent.Home()
	dir := home + "/.npm-global"
	id := c.as(home)
	argv := []string{"npm", "install", "--global", "--prefix", dir}
	if a.Cwd != "" {
		p, err := c.resolve("cwd", a.Cwd, "")
		if err != nil {
			return nil, err
		}
		if err := c.admit(ctx); err != nil {
			return nil, err
		}
		if p, err = c.projectDir(ctx, p); err != nil {
			return nil, err
		}
		// --prefix pins the project to this folder: without it npm climbs
		// to the nearest folder above with a package.json.
		dir, id = p.Path, c.as(p.Root)
		argv = []string{"npm", "install", "--prefix", dir}
	}
	argv = append(append(argv, "--no-fund", "--no-audit", "--no-update-notifier"), a.Packages...)
	out, st, err := c.pmRun(ctx, id, argv, nil, LanguageTimeout)
	if err != nil {
		return nil, c.startError(err, "npm", "")
	}
	if st.TimedOut {
		return nil, envelope.Errorf(envelope.Timeout, "npm install did not finish within %s: %s", LanguageTimeout, truncTail(out, 2000))
	}
	if st.Code != 0 {
		return nil, envelope.Errorf(envelope.ExecutionError, "npm install failed with exit code %d: %s", st.Code, truncTail(out, 4000))
	}
	return npmResult{installResult{a.Packages, st.Code, truncTail(out, StderrCap)}, dir}, nil
}
