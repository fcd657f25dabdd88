// Package darwincheck type-checks the project's darwin code on a host that
// can't compile it.
//
// The vz driver needs cgo and Apple's SDK, so on Linux it can't be built.
// The check writes stand-ins for such modules (see WriteStub), points the
// build at them through a temporary copy of go.mod, and runs `go vet`
// for darwin/arm64 with cgo off and Fyne's software driver (tag ci): every
// darwin file, tests included, is type-checked against the real
// signatures. Packages that need no cgo are also built for real.
package darwincheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Target platform of the check.
const (
	GOOS   = "darwin"
	GOARCH = "arm64"
)

// Sentinel errors.
var (
	// ErrTypeCheck: darwin code does not compile against the stubs; the
	// message carries the compiler's output.
	ErrTypeCheck = errors.New("darwin type-check failed")
	// ErrUncovered: a darwin file can't be type-checked this way (it
	// uses cgo itself, or only builds without the ci tag).
	ErrUncovered = errors.New("darwin files not type-checked")
	// ErrBuild: a package that needs no cgo does not build for darwin.
	ErrBuild = errors.New("darwin build failed")
)

// DefaultStubs are the modules that can't be compiled off macOS.
func DefaultStubs() []string { return []string{"github.com/Code-Hex/vz/v3"} }

// Shim replaces one cgo file of a dependency module with a cgo-free
// stand-in of the same declarations, for modules that are compilable off
// macOS except for a file or two.
type Shim struct {
	Module  string // module path, resolved to its version in go.mod
	File    string // path inside the module
	Content string // the stand-in
}

// DefaultShims: two files of Fyne ask AppKit through cgo (the scroller's
// paging behaviour and the system's dark mode); the rest of Fyne
// type-checks with its software driver (tag ci). Each stand-in keeps the
// original's declarations.
func DefaultShims() []Shim {
	const note = "// Stand-in for the cgo original, for type-checking only.\n"
	return []Shim{
		{
			Module: "fyne.io/fyne/v2",
			File:   "internal/widget/scroller_behavior_darwin.go",
			Content: "//go:build darwin\n\npackage widget\n\n" + note +
				"func isScrollerPageOnTap() bool { return false }\n",
		},
		{
			Module: "fyne.io/fyne/v2",
			File:   "internal/app/theme_darwin.go",
			Content: "//go:build !ios && !wasm && !test_web_driver && !mobile\n\npackage app\n\n" +
				"import (\n\t\"fyne.io/fyne/v2\"\n\t\"fyne.io/fyne/v2/internal/theme\"\n)\n\n" + note +
				"func DefaultVariant() fyne.ThemeVariant { return theme.VariantDark }\n",
		},
	}
}

// Config says what to check.
type Config struct {
	Dir      string   // module root, holding go.mod
	Patterns []string // packages; default ./...
	Tags     []string // build tags for the type-check; default ci (Fyne's software driver)
	Stubs    []string // modules replaced by stand-ins; default DefaultStubs()
	Shims    []Shim   // single files replaced; default DefaultShims()
	// Overlay adds or replaces files (path relative to Dir → content)
	// without touching the tree, as `go build -overlay` does.
	Overlay map[string][]byte
}

// Report is what a passing check covered.
type Report struct {
	Stubbed []string // module@version replaced by stand-ins
	Checked []string // packages type-checked (with their tests)
	Files   int      // .go files in them, darwin-specific or not
	Built   []string // packages built for real with CGO_ENABLED=0
	NeedCgo []string // packages not built: they depend on cgo
}

// Run type-checks the darwin build of cfg.Patterns against stand-ins for
// cfg.Stubs, then builds for real the packages that need no cgo.
func Run(ctx context.Context, cfg Config) (Report, error) {
	var rep Report
	if len(cfg.Patterns) == 0 {
		cfg.Patterns = []string{"./..."}
	}
	if cfg.Tags == nil {
		cfg.Tags = []string{"ci"}
	}
	if cfg.Stubs == nil {
		cfg.Stubs = DefaultStubs()
	}
	absDir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return rep, err
	}
	tmp, err := os.MkdirTemp("", "darwincheck-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(tmp)

	if cfg.Shims == nil {
		cfg.Shims = DefaultShims()
	}
	overlay, overlaid, err := writeOverlay(tmp, cfg.Dir, cfg.Overlay)
	if err != nil {
		return rep, err
	}
	modfile := filepath.Join(tmp, "go.mod")
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(cfg.Dir, name))
		if err != nil && !(name == "go.sum" && errors.Is(err, os.ErrNotExist)) {
			return rep, err
		}
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			return rep, err
		}
	}
	for _, mod := range cfg.Stubs {
		src, version, err := moduleSource(ctx, cfg.Dir, mod)
		if err != nil {
			return rep, err
		}
		dst := filepath.Join(tmp, "stubs", strings.ReplaceAll(mod, "/", "_"))
		if err := WriteStub(src, dst); err != nil {
			return rep, err
		}
		if _, err := goCmd(ctx, cfg.Dir, nil, "mod", "edit", "-modfile="+modfile, "-replace="+mod+"="+dst); err != nil {
			return rep, err
		}
		rep.Stubbed = append(rep.Stubbed, mod+"@"+version)
	}

	byModule := map[string]map[string][]byte{}
	for _, sh := range cfg.Shims {
		if byModule[sh.Module] == nil {
			byModule[sh.Module] = map[string][]byte{}
		}
		byModule[sh.Module][sh.File] = []byte(sh.Content)
	}
	i := 0
	for mod, files := range byModule {
		src, _, err := moduleSource(ctx, cfg.Dir, mod)
		if err != nil {
			return rep, err
		}
		// The go command won't overlay files in the module cache, so the
		// module is replaced by a mirror with those files swapped.
		i++
		dst := filepath.Join(tmp, "shims", fmt.Sprint(i))
		if err := mirrorWith(src, dst, files); err != nil {
			return rep, err
		}
		if _, err := goCmd(ctx, cfg.Dir, nil, "mod", "edit", "-modfile="+modfile, "-replace="+mod+"="+dst); err != nil {
			return rep, err
		}
	}

	env := []string{"GOOS=" + GOOS, "GOARCH=" + GOARCH, "CGO_ENABLED=0"}
	flags := []string{"-modfile=" + modfile, "-tags=" + strings.Join(cfg.Tags, ","), "-trimpath"}
	if overlay != "" {
		flags = append(flags, "-overlay="+overlay)
	}

	pkgs, err := listPackages(ctx, cfg.Dir, env, flags, cfg.Patterns)
	if err != nil {
		return rep, fmt.Errorf("%w: %w", ErrTypeCheck, err)
	}
	open := func(path string) (io.ReadCloser, error) {
		if rel, err := filepath.Rel(absDir, path); err == nil {
			if b, ok := cfg.Overlay[filepath.ToSlash(rel)]; ok {
				return io.NopCloser(bytes.NewReader(b)), nil
			}
		}
		return os.Open(path)
	}
	var uncovered []string
	for _, p := range pkgs {
		if p.excluded() {
			continue
		}
		rep.Checked = append(rep.Checked, p.ImportPath)
		rep.Files += len(p.GoFiles) + len(p.TestGoFiles) + len(p.XTestGoFiles)
		files, err := p.uncovered(cfg.Tags, open)
		if err != nil {
			return rep, err
		}
		uncovered = append(uncovered, files...)
	}
	if len(uncovered) > 0 {
		return rep, fmt.Errorf("%w: they are part of the %s/%s build, but the check runs with cgo off and tags %s; "+
			"keep cgo inside stubbed modules (%s) and don't exclude darwin code by those tags:\n\t%s",
			ErrUncovered, GOOS, GOARCH, strings.Join(cfg.Tags, ","), strings.Join(cfg.Stubs, ", "), strings.Join(uncovered, "\n\t"))
	}
	if out, err := goCmd(ctx, cfg.Dir, env, append(append([]string{"vet"}, flags...), cfg.Patterns...)...); err != nil {
		return rep, fmt.Errorf("%w (%s/%s, stubs for %s):\n%s", ErrTypeCheck, GOOS, GOARCH,
			strings.Join(rep.Stubbed, ", "), strings.TrimSpace(overlaid.Replace(out)))
	}

	rep.Built, rep.NeedCgo, err = buildWithoutCgo(ctx, cfg, overlay)
	return rep, err
}

// buildWithoutCgo builds, against the real modules, every package whose
// dependencies (outside the standard library) have no cgo files.
func buildWithoutCgo(ctx context.Context, cfg Config, overlay string) (built, needCgo []string, err error) {
	flags := []string{"-trimpath"}
	if overlay != "" {
		flags = append(flags, "-overlay="+overlay)
	}
	// List as a real Mac build sees it (cgo on) to find what needs cgo.
	cgoEnv := []string{"GOOS=" + GOOS, "GOARCH=" + GOARCH, "CGO_ENABLED=1"}
	all, err := listPackages(ctx, cfg.Dir, cgoEnv, append([]string{"-deps"}, flags...), cfg.Patterns)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: loading the real %s/%s build (cgo on, as on a Mac): %w", ErrBuild, GOOS, GOARCH, err)
	}
	hasCgo := map[string]bool{}
	for _, p := range all {
		hasCgo[p.ImportPath] = !p.Standard && len(p.CgoFiles) > 0
	}
	for _, p := range all {
		if p.DepOnly || p.excluded() {
			continue
		}
		if hasCgo[p.ImportPath] || slices.ContainsFunc(p.Deps, func(d string) bool { return hasCgo[d] }) {
			needCgo = append(needCgo, p.ImportPath)
		} else {
			built = append(built, p.ImportPath)
		}
	}
	if len(built) == 0 {
		return built, needCgo, nil
	}
	env := []string{"GOOS=" + GOOS, "GOARCH=" + GOARCH, "CGO_ENABLED=0"}
	args := append(append([]string{"build"}, flags...), built...)
	if out, err := goCmd(ctx, cfg.Dir, env, args...); err != nil {
		return built, needCgo, fmt.Errorf("%w (%s/%s, CGO_ENABLED=0):\n%s", ErrBuild, GOOS, GOARCH, strings.TrimSpace(out))
	}
	return built, needCgo, nil
}

type listedPackage struct {
	ImportPath     string
	Dir            string
	Standard       bool
	DepOnly        bool
	Deps           []string
	GoFiles        []string
	CgoFiles       []string
	TestGoFiles    []string
	XTestGoFiles   []string
	IgnoredGoFiles []string
	Error          *struct{ Err string }
}

// excluded: no file of the package builds for the target; nothing to do.
func (p listedPackage) excluded() bool {
	return p.Error != nil && strings.Contains(p.Error.Err, "build constraints exclude all Go files")
}

// uncovered lists the files a real darwin/arm64 build (cgo on, with or
// without tags) would compile that the cgo-free check left out. open reads
// a file as the go command sees it (overlay included).
func (p listedPackage) uncovered(tags []string, open func(string) (io.ReadCloser, error)) ([]string, error) {
	var out []string
	for _, name := range p.IgnoredGoFiles {
		for i, t := range [][]string{tags, nil} {
			ctxt := build.Default
			ctxt.GOOS, ctxt.GOARCH, ctxt.CgoEnabled, ctxt.BuildTags = GOOS, GOARCH, true, t
			ctxt.OpenFile = open
			ok, err := ctxt.MatchFile(p.Dir, name)
			if err != nil {
				return nil, err
			}
			if ok {
				why := "uses cgo"
				if i == 1 {
					why = "excluded by tags " + strings.Join(tags, ",")
				}
				out = append(out, filepath.Join(p.Dir, name)+" ("+why+")")
				break
			}
		}
	}
	return out, nil
}

func listPackages(ctx context.Context, dir string, env, flags, patterns []string) ([]listedPackage, error) {
	args := append([]string{"list", "-e", "-json=ImportPath,Dir,Standard,DepOnly,Deps,GoFiles,CgoFiles,TestGoFiles,XTestGoFiles,IgnoredGoFiles,Error"}, flags...)
	out, err := goCmd(ctx, dir, env, append(args, patterns...)...)
	if err != nil {
		return nil, err
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		if p.Error != nil && !p.excluded() {
			return nil, fmt.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].ImportPath < pkgs[j].ImportPath })
	return pkgs, nil
}

// moduleSource finds mod's source (at the version the build list picks)
// in the module cache, downloading it if needed.
func moduleSource(ctx context.Context, dir, mod string) (src, version string, err error) {
	out, err := goCmd(ctx, dir, nil, "mod", "download", "-json", mod)
	if err != nil {
		return "", "", err
	}
	var m struct{ Path, Version, Dir, Error string }
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return "", "", fmt.Errorf("go mod download %s: %w", mod, err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", "", fmt.Errorf("go mod download %s: no source: %s", mod, m.Error)
	}
	return m.Dir, m.Version, nil
}

// writeOverlay writes the overlay files under tmp and returns the
// -overlay JSON file ("" for none) and a replacer that puts the files'
// names back into compiler messages.
func writeOverlay(tmp, dir string, files map[string][]byte) (string, *strings.Replacer, error) {
	if len(files) == 0 {
		return "", strings.NewReplacer(), nil
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	replace := map[string]string{}
	var names []string
	i := 0
	for rel, content := range files {
		i++
		p := filepath.Join(tmp, "overlay", fmt.Sprint(i), filepath.Base(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", nil, err
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			return "", nil, err
		}
		replace[filepath.Join(absDir, rel)] = p
		names = append(names, p, filepath.ToSlash(rel))
		// The go command prints paths relative to the module when shorter.
		if r, err := filepath.Rel(absDir, p); err == nil {
			names = append(names, r, filepath.ToSlash(rel))
		}
	}
	b, err := json.Marshal(struct{ Replace map[string]string }{replace})
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(tmp, "overlay.json")
	return path, strings.NewReplacer(names...), os.WriteFile(path, b, 0o644)
}

// goCmd runs the go command in dir with env added to the environment and
// returns its combined output. GOFLAGS and workspaces are cleared so the
// caller's settings can't change what is checked.
func goCmd(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("go command not found in PATH: %w", err)
		}
		return stdout.String() + stderr.String(), fmt.Errorf("go %s: %w\n%s", args[0], err, stderr.String())
	}
	return stdout.String(), nil
}

// mirrorWith recreates src's tree under dst, linking its Go files and
// copying the rest, except the files in swap (relative paths), which get
// the given content.
func mirrorWith(src, dst string, swap map[string][]byte) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		case swap[filepath.ToSlash(rel)] != nil:
			return os.WriteFile(out, swap[filepath.ToSlash(rel)], 0o644)
		case strings.HasSuffix(p, ".go"):
			return os.Symlink(p, out)
		default:
			// go:embed refuses links: copy data files.
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o644)
		}
	})
}
