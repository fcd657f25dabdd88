package agents

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// The registry's uid range. It starts above the ids the guest hands out
// itself (2000 up, for the diagnostics user and agents from before uids
// were fixed), so no agent ever gets an id that a home left by one of
// those still carries. The guest accepts 2000–59999.
const (
	FirstUID = 10000
	LastUID  = 59999
)

// ErrHomeExists: the new agent's home is left over from a removed agent
// and the caller did not say what to do with it.
var ErrHomeExists = agentproto.Class(agentproto.ErrExists, "the agent's home already exists")

// HomeChoice is what AddWith does with a home that already exists.
type HomeChoice int

const (
	// HomeRefuse fails with ErrHomeExists.
	HomeRefuse HomeChoice = iota
	// HomeAdopt gives the home and its files to the new agent.
	HomeAdopt
	// HomePurge deletes the home first.
	HomePurge
)

// AddOptions tell AddWith where homes live on the host.
type AddOptions struct {
	// Workspace is the host folder shared as /workspace; empty skips the
	// home checks (tests of the registry alone).
	Workspace string
	// Home is what to do when <Workspace>/agents/<slug> exists.
	Home HomeChoice
}

// HostHome is the agent's home as a host path under workspace.
func HostHome(workspace, slug string) string {
	return filepath.Join(workspace, "agents", slug)
}

func (o AddOptions) prepareHome(slug string) error {
	if o.Workspace == "" {
		return nil
	}
	home := HostHome(o.Workspace, slug)
	_, err := os.Lstat(home)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("agents: checking the home %s: %w", home, err)
	}
	switch o.Home {
	case HomeAdopt:
		return nil
	case HomePurge:
		if err := os.RemoveAll(home); err != nil {
			return fmt.Errorf("agents: deleting the old home %s: %w", home, err)
		}
		return nil
	}
	return fmt.Errorf("%w: /workspace/agents/%s (%s) was left by a removed agent; "+
		"choose --adopt-home to give it and its files to the new agent, or --purge-home to delete it first",
		ErrHomeExists, slug, home)
}

// ownersUnder returns the uids owning the entries of <workspace>/agents, as
// the host sees them. On Linux the share keeps the guest's uids; where it
// doesn't, the host user's own uid is below FirstUID and changes nothing.
func ownersUnder(workspace string) map[int]bool {
	out := map[int]bool{}
	if workspace == "" {
		return out
	}
	dir := filepath.Join(workspace, "agents")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range ents {
		fi, err := os.Lstat(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			out[int(st.Uid)] = true
		}
	}
	return out
}

// allocUID picks the uid of a new agent with slug. Adopting a home gets the
// uid its removed agent had back, when no live agent has it; otherwise the
// next uid that no agent, removed agent or home under the workspace has.
func (f *fileData) allocUID(slug string, o AddOptions) (int, error) {
	used := map[int]bool{}
	for _, rec := range f.Agents {
		used[rec.UID] = true
	}
	if o.Home == HomeAdopt {
		for _, x := range slices.Backward(f.Retired) {
			if x.Slug == slug && !used[x.UID] {
				return x.UID, nil
			}
		}
	}
	for _, x := range f.Retired {
		used[x.UID] = true
	}
	for u := range ownersUnder(o.Workspace) {
		used[u] = true
	}
	uid := max(f.NextUID, FirstUID)
	for ; uid <= LastUID && used[uid]; uid++ {
	}
	if uid > LastUID {
		return 0, fmt.Errorf("%w: no Linux uid left in %d–%d", ErrInvalid, FirstUID, LastUID)
	}
	f.NextUID = uid + 1
	return uid, nil
}

// checkUIDs rejects a file where two agents, or an agent and a removed
// one, share a uid.
func (f *fileData) checkUIDs() error {
	seen := map[int]string{}
	for _, rec := range f.Agents {
		if rec.UID == 0 {
			continue
		}
		if other, dup := seen[rec.UID]; dup {
			return fmt.Errorf("%w: agents %s and %s have the same uid %d", ErrInvalid, other, rec.Slug, rec.UID)
		}
		seen[rec.UID] = rec.Slug
	}
	for _, x := range f.Retired {
		if x.UID < FirstUID || x.UID > LastUID {
			return fmt.Errorf("%w: retired uid %d outside %d–%d", ErrInvalid, x.UID, FirstUID, LastUID)
		}
	}
	return nil
}

func sameUIDs(a, b uidState) bool {
	return a.NextUID == b.NextUID && slices.Equal(a.Retired, b.Retired)
}
