package ui

import (
	"fmt"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agents"
)

// Secrets is the agents' secret store in the OS keychain, as the window
// uses it (secrets.Store). Values go in; only names come out.
type Secrets interface {
	List(agent string) ([]string, error)
	Set(agent, key, value string) error
	Remove(agent, key string) error
	RemoveAll(agent string) ([]string, error)
}

// removeSecrets deletes a removed agent's secrets, so a later agent of
// the same name starts without them. Called off the UI goroutine.
func (t *agentsTab) removeSecrets(a agents.Agent) {
	if t.secrets == nil {
		return
	}
	gone, err := t.secrets.RemoveAll(a.Slug)
	t.do(func() {
		switch {
		case err != nil:
			showError(t.win, "Deleting "+a.Name+"'s secrets from the keychain failed", err)
		case len(gone) > 0:
			t.Status.SetText(fmt.Sprintf("Removed %s and its secrets %s.", a.Name, strings.Join(gone, ", ")))
		}
	})
}
