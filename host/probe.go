package host

import (
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/sandbox"
)

// Probe describes the sandbox when no process owns it: the state on disk,
// or, when the dead owner's VM still runs, "running" and adoptable, with
// its pid and since when.
func Probe(p config.Paths) api.Status {
	st := api.Status{Status: sandbox.New(sandbox.Options{Paths: p}).Status(), Owner: "none"}
	if pid, since := leftover(p); pid != 0 {
		st.State, st.Pid, st.Adoptable = control.Running, pid, true
		st.Since = since
		st.Reason = "left running by an osaurus-sandbox process that exited; `osaurus-sandbox stop` stops it, `start` adopts it"
	}
	return st
}
