package sandboxpath

import (
	"errors"
	"path"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	bob := ForAgent("bob")
	const home = "/workspace/agents/bob"
	tests := []struct {
		raw      string
		wantPath string
		wantRoot string
		reason   Reason
	}{
		// accepted
		{raw: "notes.txt", wantPath: home + "/notes.txt", wantRoot: home},
		{raw: "./x", wantPath: home + "/x", wantRoot: home},
		{raw: ".", wantPath: home, wantRoot: home},
		{raw: "a/./b", wantPath: home + "/a/b", wantRoot: home},
		{raw: "a//b/", wantPath: home + "/a/b", wantRoot: home},
		{raw: "~", wantPath: home, wantRoot: home},
		{raw: "~/", wantPath: home, wantRoot: home},
		{raw: "~/x/y", wantPath: home + "/x/y", wantRoot: home},
		{raw: home, wantPath: home, wantRoot: home},
		{raw: home + "/", wantPath: home, wantRoot: home},
		{raw: home + "/src/main.go", wantPath: home + "/src/main.go", wantRoot: home},
		{raw: "/workspace/shared", wantPath: "/workspace/shared", wantRoot: "/workspace/shared"},
		{raw: "/workspace/shared/", wantPath: "/workspace/shared", wantRoot: "/workspace/shared"},
		{raw: "/workspace/shared/data.csv", wantPath: "/workspace/shared/data.csv", wantRoot: "/workspace/shared"},
		{raw: "données/résumé ✓.txt", wantPath: home + "/données/résumé ✓.txt", wantRoot: home},
		{raw: "日本語/ファイル", wantPath: home + "/日本語/ファイル", wantRoot: home},
		{raw: "notes..txt", wantPath: home + "/notes..txt", wantRoot: home},
		{raw: "...", wantPath: home + "/...", wantRoot: home},
		{raw: "with space.md", wantPath: home + "/with space.md", wantRoot: home},
		{raw: "~bob", wantPath: "", reason: ReasonOutside},
		{raw: "a/~b", wantPath: home + "/a/~b", wantRoot: home},
		{raw: "*.py", wantPath: home + "/*.py", wantRoot: home},

		// rejected, one or more per reason
		{raw: "", reason: ReasonEmpty},
		{raw: "..", reason: ReasonTraversal},
		{raw: "../x", reason: ReasonTraversal},
		{raw: "a/../../alice", reason: ReasonTraversal},
		{raw: home + "/..", reason: ReasonTraversal},
		{raw: "~/../alice", reason: ReasonTraversal},
		{raw: "a\x00b", reason: ReasonNullByte},
		{raw: "a\nb", reason: ReasonControl},
		{raw: "a\tb", reason: ReasonControl},
		{raw: "a\x7fb", reason: ReasonControl},
		{raw: "a\u0085b", reason: ReasonControl},
		{raw: "evil\u202etxt.exe", reason: ReasonControl},
		{raw: "a\u2028b", reason: ReasonControl},
		{raw: "a;rm -rf /", reason: ReasonDangerous},
		{raw: "a|b", reason: ReasonDangerous},
		{raw: "a&b", reason: ReasonDangerous},
		{raw: "$HOME/x", reason: ReasonDangerous},
		{raw: "`id`", reason: ReasonDangerous},
		{raw: "$(id)", reason: ReasonDangerous},
		{raw: "{a,b}", reason: ReasonDangerous},
		{raw: "it's", reason: ReasonDangerous},
		{raw: `say "hi"`, reason: ReasonDangerous},
		{raw: `a\b`, reason: ReasonDangerous},
		{raw: "a>b", reason: ReasonDangerous},
		{raw: "a\xffb", reason: ReasonInvalidUTF8},
		{raw: "/etc/passwd", reason: ReasonOutside},
		{raw: "/", reason: ReasonOutside},
		{raw: "/workspace", reason: ReasonOutside},
		{raw: "/workspace/agents", reason: ReasonOutside},
		{raw: "/workspace/agents/alice/secret", reason: ReasonOutside},
		{raw: "/workspace/agents/bob-evil", reason: ReasonOutside},
		{raw: "/workspace/agents/bob-evil/x", reason: ReasonOutside},
		{raw: "/workspace/agents/bobby", reason: ReasonOutside},
		{raw: "/workspace/sharedX", reason: ReasonOutside},
		{raw: "/workspace/shared-evil/x", reason: ReasonOutside},
		{raw: "~alice/secret", reason: ReasonOutside},
		{raw: strings.Repeat("a", 256), reason: ReasonTooLong},
		{raw: strings.Repeat("a/", 2049), reason: ReasonTooLong},
	}
	for _, tt := range tests {
		t.Run(Display(tt.raw), func(t *testing.T) {
			got, err := bob.Resolve("path", tt.raw)
			if tt.reason != "" {
				var rej *Rejection
				if !errors.As(err, &rej) {
					t.Fatalf("Resolve(%q) = %+v, %v; want rejection %s", tt.raw, got, err, tt.reason)
				}
				if rej.Reason != tt.reason || rej.Field != "path" || rej.Got != tt.raw {
					t.Fatalf("rejection = %+v, want reason %s field path", rej, tt.reason)
				}
				if !strings.Contains(rej.Expected, home) || !strings.Contains(rej.Expected, SharedDir) {
					t.Errorf("Expected %q does not name both roots", rej.Expected)
				}
				if !errors.Is(err, ErrRejected) {
					t.Errorf("errors.Is(err, ErrRejected) = false")
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tt.raw, err)
			}
			if got.Path != tt.wantPath || got.Root != tt.wantRoot {
				t.Fatalf("Resolve(%q) = %+v, want {%s %s}", tt.raw, got, tt.wantPath, tt.wantRoot)
			}
		})
	}
}

func TestRejectionMessage(t *testing.T) {
	_, err := ForAgent("bob").Resolve("path", "../x")
	if got, want := err.Error(), "Argument `path` rejected: traversal. Got `../x`."; got != want {
		t.Fatalf("message = %q, want %q", got, want)
	}
	_, err = ForAgent("bob").Resolve("cwd", "a\x00b\nc")
	if got, want := err.Error(), "Argument `cwd` rejected: null_byte. Got `a\\x00b\\nc`."; got != want {
		t.Fatalf("message = %q, want %q", got, want)
	}
	var rej *Rejection
	_, err = ForAgent("bob").Resolve("path", "/workspace/agents/bob-evil")
	if !errors.As(err, &rej) {
		t.Fatal(err)
	}
	want := "relative to your home /workspace/agents/bob (`~` means the home), or an absolute path under /workspace/agents/bob or /workspace/shared or /workspace/projects"
	if rej.Expected != want {
		t.Fatalf("Expected = %q\nwant       %q", rej.Expected, want)
	}
}

func TestDisplayShortensLongValues(t *testing.T) {
	got := Display(strings.Repeat("x", 5000))
	if len(got) > 260 || !strings.HasSuffix(got, "(5000 bytes)") {
		t.Fatalf("Display = %q", got)
	}
}

func TestResolveNestedRootsPicksMostSpecific(t *testing.T) {
	p := Policy{Home: "/workspace/agents/bob", Roots: []string{"/workspace", "/workspace/agents/bob"}}
	got, err := p.Resolve("path", "x")
	if err != nil {
		t.Fatal(err)
	}
	if got.Root != "/workspace/agents/bob" {
		t.Fatalf("Root = %s, want the home", got.Root)
	}
}

func TestResolveWithoutHomeRefusesRelative(t *testing.T) {
	p := Policy{Roots: []string{SharedDir}}
	if _, err := p.Resolve("path", "x"); !isReason(err, ReasonOutside) {
		t.Fatalf("err = %v, want outside_allowed_roots", err)
	}
	if _, err := p.Resolve("path", "~"); !isReason(err, ReasonOutside) {
		t.Fatalf("err = %v, want outside_allowed_roots", err)
	}
	if got, err := p.Resolve("path", "/workspace/shared/a"); err != nil || got.Path != "/workspace/shared/a" {
		t.Fatalf("Resolve = %+v, %v", got, err)
	}
}

func TestResolveJoinedPathTooLong(t *testing.T) {
	// Within the limit as given, over it once joined to the home.
	raw := strings.Repeat(strings.Repeat("a", 200)+"/", 20) + strings.Repeat("b", 60)
	if len(raw) > MaxPathLen {
		t.Fatalf("test input too long: %d", len(raw))
	}
	if _, err := ForAgent("bob").Resolve("path", raw); !isReason(err, ReasonTooLong) {
		t.Fatalf("err = %v, want too_long", err)
	}
}

func TestValidatePluginFiles(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		reason Reason // "" = accepted
		dup    bool
	}{
		{name: "ok", files: map[string]string{"helpers.py": "", "scripts/run.sh": "", "./a/b.txt": ""}},
		{name: "none", files: nil},
		{name: "empty", files: map[string]string{"": "x"}, reason: ReasonEmpty},
		{name: "dot", files: map[string]string{"./": "x"}, reason: ReasonEmpty},
		{name: "absolute", files: map[string]string{"/etc/passwd": "x"}, reason: ReasonOutside},
		{name: "tilde", files: map[string]string{"~/x": "x"}, reason: ReasonOutside},
		{name: "traversal", files: map[string]string{"a/../../x": "x"}, reason: ReasonTraversal},
		{name: "nul", files: map[string]string{"a\x00": "x"}, reason: ReasonNullByte},
		{name: "control", files: map[string]string{"a\r": "x"}, reason: ReasonControl},
		{name: "dangerous", files: map[string]string{"a;b": "x"}, reason: ReasonDangerous},
		{name: "long", files: map[string]string{strings.Repeat("n", 300): "x"}, reason: ReasonTooLong},
		{name: "duplicate", files: map[string]string{"a/b": "1", "a//b": "2"}, dup: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidatePluginFiles(tt.files)
			switch {
			case tt.dup:
				if err == nil || !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "same file") {
					t.Fatalf("err = %v, want duplicate rejection", err)
				}
			case tt.reason == "":
				if err != nil {
					t.Fatalf("err = %v", err)
				}
			default:
				var rej *Rejection
				if !errors.As(err, &rej) || rej.Reason != tt.reason || rej.Field != "files" {
					t.Fatalf("err = %v, want %s on files", err, tt.reason)
				}
			}
		})
	}
}

func TestValidatePluginFilesIsDeterministic(t *testing.T) {
	files := map[string]string{"z;": "", "a;": "", "m;": ""}
	for range 20 {
		var rej *Rejection
		if err := ValidatePluginFiles(files); !errors.As(err, &rej) || rej.Got != "a;" {
			t.Fatalf("err = %v, want the first key in order", err)
		}
	}
}

func TestWithin(t *testing.T) {
	tests := []struct {
		root, p string
		want    bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b", "/a/b/c", true},
		{"/a/b", "/a/bc", false},
		{"/a/b", "/a", false},
		{"/", "/x", true},
	}
	for _, tt := range tests {
		if got := Within(tt.root, tt.p); got != tt.want {
			t.Errorf("Within(%q, %q) = %v", tt.root, tt.p, got)
		}
	}
}

// underComponents is Within written independently, for the fuzz oracle.
func underComponents(root, p string) bool {
	rc, pc := strings.Split(root, "/"), strings.Split(p, "/")
	if len(pc) < len(rc) {
		return false
	}
	for i := range rc {
		if rc[i] != pc[i] {
			return false
		}
	}
	return true
}

func isReason(err error, r Reason) bool {
	var rej *Rejection
	return errors.As(err, &rej) && rej.Reason == r
}

// FuzzResolve checks the invariants every accepted path must keep, whatever
// the input.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"x", "../x", "~/a", "/workspace/agents/bob-evil", "a\x00"} {
		f.Add(s)
	}
	bob := ForAgent("bob")
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := bob.Resolve("path", raw)
		if err != nil {
			var rej *Rejection
			if !errors.As(err, &rej) {
				t.Fatalf("error is %T, want *Rejection: %v", err, err)
			}
			if rej.Field != "path" || rej.Got != raw || rej.Reason == "" || rej.Expected == "" {
				t.Fatalf("incomplete rejection %+v", rej)
			}
			if strings.ContainsAny(err.Error(), "\x00\n\r") {
				t.Fatalf("message carries raw control characters: %q", err.Error())
			}
			return
		}
		p := got.Path
		if !path.IsAbs(p) || path.Clean(p) != p {
			t.Fatalf("Resolve(%q) = %q: not clean and absolute", raw, p)
		}
		if got.Root != bob.Home && got.Root != SharedDir {
			t.Fatalf("Resolve(%q) root = %q, not a policy root", raw, got.Root)
		}
		if !underComponents(got.Root, p) {
			t.Fatalf("Resolve(%q) = %q, not under root %q", raw, p, got.Root)
		}
		// Exactly one root: the two roots are disjoint.
		if underComponents(bob.Home, p) == underComponents(SharedDir, p) {
			t.Fatalf("Resolve(%q) = %q lies under both or neither root", raw, p)
		}
		if len(p) > MaxPathLen {
			t.Fatalf("Resolve(%q) = %d bytes", raw, len(p))
		}
		for _, c := range strings.Split(p[1:], "/") {
			if c == ".." || c == "." || len(c) > MaxNameLen {
				t.Fatalf("Resolve(%q) = %q has component %q", raw, p, c)
			}
		}
		if strings.ContainsAny(p, DangerousChars) {
			t.Fatalf("Resolve(%q) = %q has a dangerous character", raw, p)
		}
		for _, r := range p {
			if isControl(r) {
				t.Fatalf("Resolve(%q) = %q has control character %U", raw, p, r)
			}
		}
		if path.IsAbs(raw) && p != path.Clean(raw) {
			t.Fatalf("absolute %q resolved to %q, want it unchanged but cleaned", raw, p)
		}
	})
}

func BenchmarkResolve(b *testing.B) {
	bob := ForAgent("bob")
	for b.Loop() {
		if _, err := bob.Resolve("path", "projects/site/src/components/Button.tsx"); err != nil {
			b.Fatal(err)
		}
	}
}
