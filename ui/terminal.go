package ui

import (
	"os"
	"runtime"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/internal/termlaunch"
	"github.com/osaurus/osaurus-sandbox/remotes"
)

// openTerminal opens the user's terminal application running
// `osaurus-sandbox shell [agent]` on this data folder, or through the
// remote context rc (non-nil): as the agent (its user, namespaces and
// limits), or without one the VM's root shell.
func openTerminal(dataDir string, rc *remotes.Context, agent string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := []string{"env", config.HomeEnv + "=" + dataDir, exe, "shell"}
	if rc != nil {
		// The shell's terminal is carried over the context's ssh.
		cmd = []string{exe, "--context", rc.Name, "shell"}
	}
	if agent != "" {
		cmd = append(cmd, agent)
	}
	return termlaunch.Launch(runtime.GOOS, cmd)
}
