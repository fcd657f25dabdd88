package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// AgentMeta describes an agent checkpoint (its meta.json).
type AgentMeta struct {
	Label   string    `json:"label"`
	Agent   string    `json:"agent"` // the slug it was taken of
	Created time.Time `json:"created"`
	// Reason is "user", "agent" (its sandbox_checkpoint tool), or what it
	// was taken before.
	Reason    string   `json:"reason"`
	Bytes     int64    `json:"bytes"`
	DiskBytes int64    `json:"diskBytes"`
	Seconds   float64  `json:"seconds"`
	Items     []string `json:"items"`
	// Settings are the agent's settings then (no token: an Agent has
	// none; secrets are named by the plugins' records, never held).
	Settings agents.Agent `json:"settings"`
}

// ErrLimit: an agent asked for more checkpoints of itself, or more disk,
// than it may have.
var ErrLimit = agentproto.Class(agentproto.ErrQuota, "agent checkpoint limit reached")

// ReasonAgent is the reason of a checkpoint an agent asked for.
const ReasonAgent = "agent"

// AgentStore is the agent checkpoints of one data folder, each agent's
// under its id (a slug can be reused by a later agent; an id never is).
type AgentStore struct {
	Paths config.Paths
}

// Dir is where agent a's checkpoints live.
func (s AgentStore) Dir(a agents.Agent) string {
	return filepath.Join(s.Paths.Root, "agent-checkpoints", a.ID)
}

var agentIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// agentItems are what an agent checkpoint holds: the home and the project
// views (agent-written, walked without following a link), the views'
// baselines and the agent's host state (installed plugins).
func (s AgentStore) agentItems(a agents.Agent) ([]item, error) {
	if !agentIDRE.MatchString(a.ID) || a.Slug == "" || filepath.Base(a.Slug) != a.Slug || a.Slug[0] == '.' {
		return nil, fmt.Errorf("%w: agent %q (id %q)", ErrName, a.Slug, a.ID)
	}
	p := s.Paths
	return []item{
		{"home", agents.HostHome(p.Workspace(), a.Slug), tree},
		{"views", filepath.Join(p.ProjectViews(), a.Slug), tree},
		{"baselines", filepath.Join(p.ProjectBaselines(), a.ID), tree},
		{"state", filepath.Join(p.AgentStateDir(), a.ID), tree},
	}, nil
}

// agentTrees are the items the agent writes: put back by swapping their
// contents, so the folder the guest mounted stays the same.
var agentTrees = []string{"home", "views"}

// CreateAgent takes a checkpoint of agent a under label. The caller keeps
// the agent still (the VM paused).
func (s AgentStore) CreateAgent(ctx context.Context, a agents.Agent, label, reason string) (AgentMeta, error) {
	if err := CheckName(label); err != nil {
		return AgentMeta{}, err
	}
	its, err := s.agentItems(a)
	if err != nil {
		return AgentMeta{}, err
	}
	dir := s.Dir(a)
	final := filepath.Join(dir, label)
	if _, err := os.Lstat(final); err == nil {
		return AgentMeta{}, fmt.Errorf("%w: %s of agent %s", ErrExists, label, a.Slug)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return AgentMeta{}, err
	}
	start := time.Now()
	tmp, err := os.MkdirTemp(dir, ".new-"+label+"-")
	if err != nil {
		return AgentMeta{}, err
	}
	defer os.RemoveAll(tmp)
	m := AgentMeta{Label: label, Agent: a.Slug, Created: start.UTC(), Reason: reason, Settings: a}
	data := filepath.Join(tmp, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		return AgentMeta{}, err
	}
	var st stats
	for _, it := range its {
		ok, err := save(ctx, it, filepath.Join(data, it.name), &st)
		if err != nil {
			return AgentMeta{}, fmt.Errorf("checkpoint %s of %s: %s: %w", label, a.Slug, it.name, err)
		}
		if ok {
			m.Items = append(m.Items, it.name)
		}
	}
	m.Bytes, m.DiskBytes = st.bytes, st.disk
	m.Seconds = time.Since(start).Seconds()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return AgentMeta{}, err
	}
	if err := atomicfile.WriteFile(filepath.Join(tmp, "meta.json"), b, 0o600); err != nil {
		return AgentMeta{}, err
	}
	syncDir(tmp)
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Lstat(final); serr == nil {
			return AgentMeta{}, fmt.Errorf("%w: %s of agent %s", ErrExists, label, a.Slug)
		}
		return AgentMeta{}, err
	}
	syncDir(dir)
	return m, nil
}

// ListAgent returns a's checkpoints, oldest first.
func (s AgentStore) ListAgent(a agents.Agent) ([]AgentMeta, error) {
	if !agentIDRE.MatchString(a.ID) {
		return nil, fmt.Errorf("%w: agent id %q", ErrName, a.ID)
	}
	ents, err := os.ReadDir(s.Dir(a))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []AgentMeta
	for _, e := range ents {
		if !e.IsDir() || CheckName(e.Name()) != nil {
			continue
		}
		if m, err := s.GetAgent(a, e.Name()); err == nil {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(x, y AgentMeta) int { return x.Created.Compare(y.Created) })
	return out, nil
}

// GetAgent reads one of a's checkpoints' description.
func (s AgentStore) GetAgent(a agents.Agent, label string) (AgentMeta, error) {
	if err := CheckName(label); err != nil {
		return AgentMeta{}, err
	}
	if !agentIDRE.MatchString(a.ID) {
		return AgentMeta{}, fmt.Errorf("%w: agent id %q", ErrName, a.ID)
	}
	b, err := os.ReadFile(filepath.Join(s.Dir(a), label, "meta.json"))
	if errors.Is(err, os.ErrNotExist) {
		return AgentMeta{}, fmt.Errorf("%w: %s of agent %s; see `osaurus-sandbox agent checkpoints %s`", ErrNotFound, label, a.Slug, a.Slug)
	}
	if err != nil {
		return AgentMeta{}, err
	}
	var m AgentMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return AgentMeta{}, fmt.Errorf("checkpoint %s of %s: meta.json: %w", label, a.Slug, err)
	}
	return m, nil
}

// RemoveAgent deletes one of a's checkpoints.
func (s AgentStore) RemoveAgent(a agents.Agent, label string) error {
	if _, err := s.GetAgent(a, label); err != nil {
		return err
	}
	trash, err := os.MkdirTemp(s.Dir(a), ".removed-")
	if err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(s.Dir(a), label), filepath.Join(trash, "c")); err != nil {
		os.Remove(trash)
		return err
	}
	return os.RemoveAll(trash)
}

// RemoveAllAgent deletes every checkpoint of a (a removed agent's: they
// hold copies of its home and views), saying how many there were and
// what they took on disk. Half-written ones go too.
func (s AgentStore) RemoveAllAgent(a agents.Agent) (n int, disk int64, err error) {
	if !agentIDRE.MatchString(a.ID) {
		return 0, 0, fmt.Errorf("%w: agent id %q", ErrName, a.ID)
	}
	// A count it can't read still leaves the folder to delete.
	n, disk, uerr := s.AgentUsage(a)
	if err := os.RemoveAll(s.Dir(a)); err != nil {
		return n, disk, fmt.Errorf("deleting the checkpoints of %s in %s: %w", a.Slug, s.Dir(a), err)
	}
	if uerr != nil {
		return n, disk, fmt.Errorf("the checkpoints of %s are deleted, but their count may be short: %w", a.Slug, uerr)
	}
	return n, disk, nil
}

// AgentUsage is what a's checkpoints take on disk.
func (s AgentStore) AgentUsage(a agents.Agent) (n int, disk int64, err error) {
	l, err := s.ListAgent(a)
	for _, m := range l {
		disk += m.DiskBytes
	}
	return len(l), disk, err
}

// RestoreAgent puts a's checkpoint label back: its home's and views'
// contents are swapped for the checkpoint's (the folders themselves stay,
// as the guest mounted them), its baselines and host state replaced. Only
// a's folders are touched. It returns the settings saved with it, for
// the caller to put back in the registry. The caller keeps the agent
// still.
func (s AgentStore) RestoreAgent(ctx context.Context, a agents.Agent, label string) (AgentMeta, error) {
	m, err := s.GetAgent(a, label)
	if err != nil {
		return m, err
	}
	its, err := s.agentItems(a)
	if err != nil {
		return m, err
	}
	data := filepath.Join(s.Dir(a), label, "data")
	for _, it := range its {
		if err := ctx.Err(); err != nil {
			return m, err
		}
		src := filepath.Join(data, it.name)
		held := slices.Contains(m.Items, it.name)
		if slices.Contains(agentTrees, it.name) {
			err = replaceContents(ctx, it.path, src, held)
		} else if held {
			err = restoreItem(ctx, it, src)
		} else {
			err = os.RemoveAll(it.path)
		}
		if err != nil {
			return m, fmt.Errorf("restore %s of %s: %s: %w", label, a.Slug, it.name, err)
		}
	}
	return m, nil
}

// ForkResult says what a fork copied.
type ForkResult struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	// GuestChown: this process could not give the copies to the new
	// agent's uid; the guest must (chown as root) before the agent runs.
	GuestChown bool `json:"guestChown,omitempty"`
}

// Fork copies from's home, views, baselines and host state to the
// agent to (already in the registry, with its own uid and no home yet),
// what from owned given to to.UID. The caller keeps from still.
func (s AgentStore) Fork(ctx context.Context, from, to agents.Agent) (ForkResult, error) {
	start := time.Now()
	src, err := s.agentItems(from)
	if err != nil {
		return ForkResult{}, err
	}
	dst, err := s.agentItems(to)
	if err != nil {
		return ForkResult{}, err
	}
	st := stats{remap: &remap{From: from.UID, To: to.UID}}
	for i, it := range src {
		d := dst[i]
		if _, err := os.Lstat(d.path); err == nil {
			return ForkResult{}, fmt.Errorf("%w: %s exists; the new agent must start without one", ErrExists, d.path)
		}
		if err := os.MkdirAll(filepath.Dir(d.path), 0o755); err != nil {
			return ForkResult{}, err
		}
		// Copied beside its place, out of every agent's reach (0700,
		// this process's), and renamed in when whole.
		tmp, err := os.MkdirTemp(filepath.Dir(d.path), "."+filepath.Base(d.path)+".fork-")
		if err != nil {
			return ForkResult{}, err
		}
		ok, err := save(ctx, it, filepath.Join(tmp, "new"), &st)
		if err == nil && ok {
			err = os.Rename(filepath.Join(tmp, "new"), d.path)
		}
		os.RemoveAll(tmp)
		if err != nil {
			return ForkResult{}, fmt.Errorf("fork %s to %s: %s: %w", from.Slug, to.Slug, it.name, err)
		}
	}
	return ForkResult{Bytes: st.bytes, Seconds: time.Since(start).Seconds(), GuestChown: st.chownDenied}, nil
}

// RemoveAgentFiles deletes what Fork made for to (a fork that failed).
func (s AgentStore) RemoveAgentFiles(to agents.Agent) error {
	its, err := s.agentItems(to)
	if err != nil {
		return err
	}
	var errs []error
	for _, it := range its {
		errs = append(errs, os.RemoveAll(it.path))
	}
	return errors.Join(errs...)
}
