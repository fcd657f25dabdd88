//go:build linux

package account

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Project views.
//
// The host keeps each agent's views of the user's projects in the shared
// workspace, /workspace/.projects/<slug>/<project> (package projects): a
// root-owned folder per agent, a folder of the agent's own per view. In
// the agent's mount namespace its folder is bound on /workspace/projects,
// so every agent finds its views at /workspace/projects/<project> and no
// other agent's there; the binding is made before the agent runs anything
// and, like the temporary directories, can't be undone without
// CAP_SYS_ADMIN.
const (
	projectViewsDir  = "/workspace/.projects"
	projectsMountDir = "/workspace/projects"
)

// bindProjects binds user's views on /workspace/projects in the calling
// thread's (new) mount namespace. Without a workspace share there is
// nothing to bind. A failure leaves /workspace/projects as the root
// namespace has it: the host's empty, root-owned folder, so no agent
// sees another's views either way.
func bindProjects(user string) error {
	slug, ok := strings.CutPrefix(user, "agent-")
	if !ok || !isMountPoint("/workspace") {
		return nil
	}
	src := filepath.Join(projectViewsDir, slug)
	for _, d := range []string{src, projectsMountDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// Made by the host or here, the folder is never the agent's (it can't
	// write /workspace/.projects); a link in its place is refused.
	var st unix.Stat_t
	if err := unix.Lstat(src, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s is not a folder", src)
	}
	if err := unix.Mount(src, projectsMountDir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, projectsMountDir, err)
	}
	if err := unix.Mount("", projectsMountDir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("remount %s nosuid,nodev: %w", projectsMountDir, err)
	}
	return nil
}
