package ui

import (
	"os"
	"runtime"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/internal/termlaunch"
)

// openTerminal opens the user's terminal application running
// `osaurus-sandbox shell [agent]` on this data folder: as the agent (its
// user, namespaces and limits), or without one the VM's root shell.
func openTerminal(dataDir, agent string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := []string{"env", config.HomeEnv + "=" + dataDir, exe, "shell"}
	if agent != "" {
		cmd = append(cmd, agent)
	}
	return termlaunch.Launch(runtime.GOOS, cmd)
}
