package projects

import (
	"fmt"
	"path"
	"strings"

	"github.com/osaurus/osaurus-sandbox/internal/termsafe"
)

// Bounds on what the host reads from an agent's view. An agent's files
// are hostile: a sparse file costs the agent no disk yet has any size, and
// a tree can be made as wide and deep as inodes allow.
const (
	// MaxFileSize: a file bigger than this (by its size, not the blocks it
	// uses: a sparse file counts whole) is refused without being hashed.
	MaxFileSize = 1 << 30
	// LargeFile: a file bigger than this is flagged in the review and
	// applied only when the user confirms it (--allow-large).
	LargeFile = 64 << 20
	// MaxEntries bounds the entries of a view Changes walks.
	MaxEntries = 200_000
	// MaxDepth bounds how deep Changes descends.
	MaxDepth = 64
)

// gitReason is why .git internals are never applied.
const gitReason = "inside .git: git's own files (hooks, config) run commands in your repository, so they are never applied; copy the agent's commits as a patch instead (`git -C /workspace/projects/NAME format-patch` in the agent's view)"

// unsafeNameReason is why a name a terminal can't show safely is refused.
const unsafeNameReason = "the name holds control, bidirectional or non-UTF-8 characters no terminal shows safely; rename it in the agent's view"

// hostExecFiles are base names that run code on the user's machine when a
// shell, direnv, git or an editor opens the folder (compared ignoring case).
var hostExecFiles = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
	".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout",
	".envrc", ".gitconfig", ".gitmodules", ".gitattributes",
	".ripgreprc", ".mcp.json", ".npmrc", ".yarnrc", ".yarnrc.yml",
	".pre-commit-config.yaml", ".gitlab-ci.yml",
}

// hostExecDirs are folders (a path of one or two components, compared
// ignoring case, at any depth) whose files run code on the user's machine:
// editor tasks and settings, git hook managers, CI workflows, agent
// commands.
var hostExecDirs = []string{
	".vscode", ".idea", ".husky", ".devcontainer", ".github/workflows",
	".circleci", ".claude", ".cursor",
}

// HostExecPaths is the documented list (docs/projects.md): files, then
// folders.
func HostExecPaths() (files, dirs []string) { return hostExecFiles, hostExecDirs }

// gitInternal reports whether rel lies in a .git folder (or is a .git
// file, a worktree's pointer).
func gitInternal(rel string) bool {
	for c := range strings.SplitSeq(rel, "/") {
		if strings.EqualFold(c, ".git") {
			return true
		}
	}
	return false
}

// hostExec says why rel runs code on the user's machine ("" if it
// doesn't).
func hostExec(rel string) string {
	base := path.Base(rel)
	for _, f := range hostExecFiles {
		if strings.EqualFold(base, f) {
			return fmt.Sprintf("%s runs commands on your computer (shells, git, direnv, editors or CI read it)", f)
		}
	}
	parts := strings.Split(rel, "/")
	for _, d := range hostExecDirs {
		dp := strings.Split(d, "/")
		for i := 0; i+len(dp) < len(parts); i++ {
			match := true
			for j := range dp {
				if !strings.EqualFold(parts[i+j], dp[j]) {
					match = false
					break
				}
			}
			if match {
				return fmt.Sprintf("in %s/: its files run commands on your computer (editor tasks and settings, hooks, CI)", d)
			}
		}
	}
	return ""
}

// safeName reports whether a terminal shows rel as it is: no control,
// bidirectional or non-UTF-8 characters, no tab or newline.
func safeName(rel string) bool {
	return termsafe.Line(rel) == rel
}

// Shown is rel as a terminal or the window may print it: control and
// bidirectional characters escaped.
func Shown(s string) string { return termsafe.Line(s) }

// foldKey is the name a case-insensitive folder treats rel as.
func foldKey(rel string) string { return strings.ToLower(strings.ToUpper(rel)) }
