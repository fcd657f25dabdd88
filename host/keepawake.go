package host

import "github.com/osaurus/osaurus-sandbox/agents"

// processesKeepAwake reports whether the guest user's running processes
// keep the VM from idle suspend (sandbox.Options.ProcessesKeepAwake): an
// agent's do unless it set backgroundKeepsAwake false. A user no agent
// has (one removed while its processes run on) keeps it awake: sleeping
// under a process nobody can vouch for is the surprise to avoid.
func processesKeepAwake(list []agents.Agent, user string) bool {
	for _, a := range list {
		if a.User() == user {
			return a.BackgroundKeepsAwake()
		}
	}
	return true
}

// processesKeepAwake is the owner's answer, from its registry as it is
// now (the one writer's memory): a changed setting holds at the next
// idle check, with no restart.
func (h *Host) processesKeepAwake(user string) bool {
	return processesKeepAwake(h.reg.List(), user)
}
