//go:build linux

package boot

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/osaurus/osaurus-sandbox/guestagent"
)

// Package scripts never start services.
//
// A package installed with a service (cron, ssh, a database) must not
// leave a daemon running as root beside the agents: it would outlive the
// install, run outside every agent's limits, and serve whatever the
// package configures. On Debian every maintainer script starts services
// through invoke-rc.d or deb-systemd-invoke, and both ask
// /usr/sbin/policy-rc.d first; exit status 101 means "action forbidden".
// The agent writes that file at every boot, so an image or an earlier
// install can't leave another in its place.
//
// Alpine's packages start nothing on install, and OpenRC's rc-service and
// openrc refuse to start services on a system OpenRC did not boot (no
// /run/openrc/softlevel): the guest's PID 1 is this agent, and /run is a
// fresh tmpfs at every boot, so OpenRC never looks booted.

// policyRCD is Debian's policy layer hook, relative to the system root.
const policyRCD = "usr/sbin/policy-rc.d"

var policyRCDScript = []byte("#!/bin/sh\n# Written by the osaurus-sandbox guest agent at every boot: no package\n# starts a service in the sandbox (101: action forbidden).\nexit 101\n")

// noServiceStarts installs policy-rc.d under root ("" is /) on a Debian
// system, and checks that OpenRC does not look booted on others.
func noServiceStarts(root string) error {
	if root == "" {
		root = "/"
	}
	if _, err := os.Stat(filepath.Join(root, "etc/debian_version")); err == nil {
		p := filepath.Join(root, policyRCD)
		if cur, err := os.ReadFile(p); err == nil && bytes.Equal(cur, policyRCDScript) {
			if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() == 0o755 {
				return nil
			}
		}
		os.Remove(p) // a symlink or another file: replaced, never written through
		if err := guestagent.RewriteBootFile(p, policyRCDScript, 0o755); err != nil {
			return fmt.Errorf("install %s: %w", p, err)
		}
		return nil
	}
	// OpenRC takes this file as proof that it booted the system.
	soft := filepath.Join(root, "run/openrc/softlevel")
	if err := os.Remove(soft); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", soft, err)
	}
	return nil
}
