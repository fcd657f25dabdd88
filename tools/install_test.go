package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// script answers exec requests by their first arguments, recording the
// command lines that ran.
func script(h *harness, answers map[string][]agentproto.ExitStatus, out map[string]string) *[]string {
	var ran []string
	h.guest.exec = func(req *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
		cmd := strings.Join(req.Argv, " ")
		ran = append(ran, cmd)
		for prefix, sts := range answers {
			if strings.HasPrefix(cmd, prefix) {
				st := sts[0]
				if len(sts) > 1 {
					answers[prefix] = sts[1:]
				}
				eio.Stdout.Write([]byte(out[prefix]))
				st.Exited = true
				return st, nil
			}
		}
		return agentproto.ExitStatus{Exited: true}, nil
	}
	return &ran
}

func TestInstallSystem(t *testing.T) {
	const aptInstall = "apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=60"
	const aptUpdate = "apt-get update -q -o DPkg::Lock::Timeout=60"
	tests := []struct {
		name     string
		pm       string
		lists    bool // apt has package lists
		answers  map[string][]agentproto.ExitStatus
		out      map[string]string
		ran      []string
		kind     envelope.Kind // "" for success
		warnings int
	}{
		{
			name: "apt with lists", pm: "apt", lists: true,
			ran: []string{aptInstall + " jq cowsay"},
		},
		{
			name: "apt without lists updates first", pm: "apt",
			ran: []string{aptUpdate, aptInstall + " jq cowsay"}, warnings: 1,
		},
		{
			name: "stale index: update and retry once", pm: "apt", lists: true,
			answers: map[string][]agentproto.ExitStatus{"apt-get install": {{Code: 100}, {Code: 0}}},
			out:     map[string]string{"apt-get install": "E: Unable to locate package jq\n"},
			ran:     []string{aptInstall + " jq cowsay", aptUpdate, aptInstall + " jq cowsay"}, warnings: 1,
		},
		{
			name: "still failing after the retry", pm: "apt", lists: true,
			answers: map[string][]agentproto.ExitStatus{"apt-get install": {{Code: 100}}},
			out:     map[string]string{"apt-get install": "E: Unable to locate package jq\n"},
			ran:     []string{aptInstall + " jq cowsay", aptUpdate, aptInstall + " jq cowsay"},
			kind:    envelope.ExecutionError,
		},
		{
			name: "other failures are not retried", pm: "apt", lists: true,
			answers: map[string][]agentproto.ExitStatus{"apt-get install": {{Code: 100}}},
			out:     map[string]string{"apt-get install": "E: You don't have enough free space\n"},
			ran:     []string{aptInstall + " jq cowsay"},
			kind:    envelope.ExecutionError,
		},
		{
			name: "update fails", pm: "apt",
			answers: map[string][]agentproto.ExitStatus{"apt-get update": {{Code: 100}}},
			out:     map[string]string{"apt-get update": "Temporary failure resolving\n"},
			ran:     []string{aptUpdate},
			kind:    envelope.ExecutionError,
		},
		{
			name: "timeout", pm: "apt", lists: true,
			answers: map[string][]agentproto.ExitStatus{"apt-get install": {{Code: 137, TimedOut: true}}},
			ran:     []string{aptInstall + " jq cowsay"},
			kind:    envelope.Timeout,
		},
		{
			name: "apk", pm: "apk",
			ran: []string{"apk add --no-cache jq cowsay"},
		},
		{
			name: "no package manager", pm: "",
			kind: envelope.ExecutionError,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeGuest()
			f.info.PackageMgr = tt.pm
			if tt.lists {
				f.put("/var/lib/apt/lists/deb_dists_bookworm_main_binary-amd64_Packages", "")
			}
			h := newHarnessOn(t, f)
			h.call("sandbox_list_directory", nil) // the user exists
			ran := script(h, tt.answers, tt.out)
			e := h.call("sandbox_install", map[string]any{"packages": []string{"jq", "cowsay"}})
			if !slices.Equal(*ran, tt.ran) {
				t.Fatalf("ran %q\nwant %q", *ran, tt.ran)
			}
			if tt.kind != "" {
				failed(t, e, tt.kind, "")
				return
			}
			r := ok(t, e)
			if fmt.Sprint(r["installed"]) != "[jq cowsay]" || r["exit_code"] != jsonNum(0) || len(e.Warnings) != tt.warnings {
				t.Fatalf("result %v warnings %q", r, e.Warnings)
			}
		})
	}
}

func TestInstallPip(t *testing.T) {
	h := newHarness(t)
	h.call("sandbox_list_directory", nil)
	ran := script(h, nil, nil)
	e := h.call("sandbox_pip_install", map[string]any{"packages": []string{"requests", "numpy==2.1.0", "uvicorn[standard]>=0.30"}})
	r := ok(t, e)
	venv := "/workspace/agents/bob/.venv"
	want := []string{
		"python3 -m venv --system-site-packages " + venv,
		venv + "/bin/pip install --disable-pip-version-check --no-input --progress-bar off requests numpy==2.1.0 uvicorn[standard]>=0.30",
	}
	if !slices.Equal(*ran, want) || r["venv"] != venv || len(e.Warnings) != 1 {
		t.Fatalf("ran %q result %v warnings %q", *ran, r, e.Warnings)
	}
	// With the venv in place it is not created again.
	h.guest.put(venv+"/bin/pip", "")
	*ran = nil
	ok(t, h.call("sandbox_pip_install", map[string]any{"packages": []string{"rich"}}))
	if len(*ran) != 1 || !strings.HasPrefix((*ran)[0], venv+"/bin/pip install") {
		t.Fatalf("ran %q", *ran)
	}

	h2 := newHarness(t)
	h2.call("sandbox_list_directory", nil)
	script(h2, map[string][]agentproto.ExitStatus{"python3": {{Code: 1}}},
		map[string]string{"python3": "The virtual environment was not created successfully because ensurepip is not available."})
	e = h2.call("sandbox_pip_install", map[string]any{"packages": []string{"rich"}})
	failed(t, e, envelope.ExecutionError, "")
	if !strings.Contains(e.Message, `sandbox_install {"packages": ["python3-venv"]}`) {
		t.Fatal(e.Message)
	}
	h2.guest.fail[agentproto.OpExec] = fmt.Errorf("%w: exec python3: executable file not found in $PATH", agentproto.ErrNotFound)
	e = h2.call("sandbox_pip_install", map[string]any{"packages": []string{"rich"}})
	failed(t, e, envelope.ExecutionError, "")
	if !strings.Contains(e.Message, "python3 is not installed") {
		t.Fatal(e.Message)
	}
}

func TestInstallNpm(t *testing.T) {
	h := newHarness(t)
	h.call("sandbox_list_directory", nil)
	ran := script(h, nil, nil)
	r := ok(t, h.call("sandbox_npm_install", map[string]any{"packages": []string{"typescript", "@types/node@^20"}}))
	prefix := "/workspace/agents/bob/.npm-global"
	if want := "npm install --global --prefix " + prefix + " --no-fund --no-audit --no-update-notifier typescript @types/node@^20"; len(*ran) != 1 || (*ran)[0] != want {
		t.Fatalf("ran %q", *ran)
	}
	if r["prefix"] != prefix {
		t.Fatalf("result %v", r)
	}
	h.guest.fail[agentproto.OpExec] = fmt.Errorf("%w: exec npm: executable file not found in $PATH", agentproto.ErrNotFound)
	e := h.call("sandbox_npm_install", map[string]any{"packages": []string{"typescript"}})
	failed(t, e, envelope.ExecutionError, "")
	if !strings.Contains(e.Message, `sandbox_install {"packages": ["nodejs", "npm"]}`) {
		t.Fatal(e.Message)
	}
}

func TestPackageNames(t *testing.T) {
	tests := []struct {
		name string
		ok   []string
		bad  []string
	}{
		{"apt", []string{"jq", "g++", "python3.11", "libssl3", "libstdc++6", "curl=7.88.1-10+deb12u8", "node-semver"},
			[]string{"-y", "Jq", "a b", "x;y", "", "../x", "pkg=", "$(id)", "jq-", "bash-", "curl=7.88-", "x", "jq/bookworm", "jq:amd64", "under_score"}},
		{"apk", []string{"jq", "g++", "py3-requests", "curl=8.5.0-r0", "musl-dev", "so_name"},
			[]string{"-U", "jq-", "!jq", "jq@edge", "a b", "curl=", "../x", "$(id)"}},
		{"pip", []string{"requests", "Django>=4,<5", "uvicorn[standard]", "numpy==2.1.0", "zope.interface"}, []string{"-e", "git+https://x", "a b", "--index-url=x", "./local", "x;y"}},
		{"npm", []string{"typescript", "@types/node", "@types/node@^20", "left-pad@1.3.0", "lodash.merge"}, []string{"-g", "../x", "git+ssh://x", "a b", "x;y", "@/x"}},
	}
	res := map[string]func(string) bool{
		"apt": aptPkgRE.MatchString, "apk": apkPkgRE.MatchString, "pip": pipPkgRE.MatchString, "npm": npmPkgRE.MatchString,
	}
	for _, tt := range tests {
		for _, p := range tt.ok {
			if !res[tt.name](p) {
				t.Errorf("%s: %q refused", tt.name, p)
			}
		}
		for _, p := range tt.bad {
			if res[tt.name](p) {
				t.Errorf("%s: %q accepted", tt.name, p)
			}
		}
	}
}

// Two agents' installs in the owner's one tools environment (its MCP
// servers, agent runner and plugin creation) never run two package
// managers at once: apk refuses to start while another apk holds its
// database.
func TestInstallLockIsShared(t *testing.T) {
	f := newFakeGuest()
	f.info.PackageMgr = "apk"
	mcp := newHarnessOn(t, f)
	runner := mcp.env.Toolset(testAgent("carol", true, true))
	mcp.call("sandbox_list_directory", nil) // the users exist
	runner.Call(context.Background(), "sandbox_list_directory", []byte(`{}`))
	holding, release := make(chan struct{}), make(chan struct{})
	f.exec = func(req *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
		if slices.Contains(req.Argv, "first") {
			close(holding)
			<-release
		}
		return agentproto.ExitStatus{Exited: true}, nil
	}
	first := make(chan envelope.Envelope, 1)
	go func() { first <- mcp.call("sandbox_install", map[string]any{"packages": []string{"first"}}) }()
	<-holding
	// The second install waits for the first; its caller gives up.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	e, err := envelope.Parse(runner.Call(ctx, "sandbox_install", []byte(`{"packages":["second"]}`)))
	cancel()
	close(release)
	ok(t, <-first)
	if err != nil {
		t.Fatal(err)
	}
	failed(t, e, envelope.Timeout, "")
	if !strings.Contains(e.Message, "another agent's package install") {
		t.Errorf("message: %q", e.Message)
	}
}

// With cwd, npm installs into that project folder and pip into its venv
// (.venv or venv, .venv made when it has none); the folder must exist
// beneath the agent's roots.
func TestLanguageInstallsIntoAProject(t *testing.T) {
	h := newHarness(t)
	h.call("sandbox_list_directory", nil)
	ran := script(h, nil, nil)
	proj := "/workspace/agents/bob/app"
	h.guest.put(proj+"/package.json", "{}")
	r := ok(t, h.call("sandbox_npm_install", map[string]any{"packages": []string{"left-pad"}, "cwd": "app"}))
	if want := "npm install --prefix " + proj + " --no-fund --no-audit --no-update-notifier left-pad"; len(*ran) != 1 || (*ran)[0] != want || r["prefix"] != proj {
		t.Fatalf("npm: ran %q result %v", *ran, r)
	}
	// pip: the project's venv by its usual names.
	h.guest.put(proj+"/venv/bin/pip", "")
	*ran = nil
	r = ok(t, h.call("sandbox_pip_install", map[string]any{"packages": []string{"rich"}, "cwd": "~/app"}))
	if len(*ran) != 1 || !strings.HasPrefix((*ran)[0], proj+"/venv/bin/pip install") || r["venv"] != proj+"/venv" {
		t.Fatalf("pip: ran %q result %v", *ran, r)
	}
	h.guest.put("/workspace/shared/tool/setup.py", "")
	*ran = nil
	r = ok(t, h.call("sandbox_pip_install", map[string]any{"packages": []string{"rich"}, "cwd": "/workspace/shared/tool"}))
	if len(*ran) != 2 || (*ran)[0] != "python3 -m venv --system-site-packages /workspace/shared/tool/.venv" || r["venv"] != "/workspace/shared/tool/.venv" {
		t.Fatalf("pip, no venv yet: ran %q result %v", *ran, r)
	}
	for _, tt := range []struct {
		tool, cwd string
		kind      envelope.Kind
	}{
		{"sandbox_npm_install", "../alice", envelope.InvalidArgs},
		{"sandbox_npm_install", "/etc", envelope.InvalidArgs},
		{"sandbox_pip_install", "nope", envelope.NotFound},
		{"sandbox_npm_install", "app/package.json", envelope.InvalidArgs},
	} {
		failed(t, h.call(tt.tool, map[string]any{"packages": []string{"x"}, "cwd": tt.cwd}), tt.kind, "cwd")
	}
}
