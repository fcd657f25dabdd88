package host

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diskquota"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/sandboxpath"
	"github.com/osaurus/osaurus-sandbox/tools"
)

var _ api.AgentCheckpointer = (*Host)(nil)

// MaxAgentOwnCheckpoints bounds the checkpoints an agent takes of itself
// (sandbox_checkpoint); the user's and the automatic ones don't count.
const MaxAgentOwnCheckpoints = 5

func (h *Host) agentCheckpoints() checkpoint.AgentStore {
	return checkpoint.AgentStore{Paths: h.paths}
}

// agentRef is the agent ref names, as the registry on disk has it now
// (the CLI may have changed it).
func (h *Host) agentRef(ref string) (agents.Agent, error) {
	_ = h.reg.ReloadIfChanged() // on error, the last known list
	a, err := h.reg.Get(ref)
	if err != nil {
		return a, fmt.Errorf("agent %q: %w (`osaurus-sandbox agent list` shows the agents)", ref, err)
	}
	return a, nil
}

// CreateAgentCheckpoint takes a checkpoint of an agent's home, views and
// settings, the VM held still for the copy.
func (h *Host) CreateAgentCheckpoint(ctx context.Context, req api.AgentCheckpointRequest) (checkpoint.AgentMeta, error) {
	a, err := h.agentRef(req.Agent)
	if err != nil {
		return checkpoint.AgentMeta{}, err
	}
	return h.agentCheckpoint(ctx, a, req.Label, checkpoint.ReasonUser)
}

func (h *Host) agentCheckpoint(ctx context.Context, a agents.Agent, label, reason string) (checkpoint.AgentMeta, error) {
	if label == "" {
		label = checkpoint.AutoName("", time.Now())
	}
	if err := checkpoint.CheckName(label); err != nil {
		return checkpoint.AgentMeta{}, err
	}
	var m checkpoint.AgentMeta
	err := h.m.Hold(ctx, "agent checkpoint", func(bool) error {
		unlock, err := h.lockLiveAgent(a)
		if err != nil {
			return err
		}
		defer unlock()
		m, err = h.agentCheckpoints().CreateAgent(ctx, a, label, reason)
		return err
	})
	if err == nil {
		h.logf("agent %s: checkpoint %s (%s): %d KB on disk in %.2fs", a.Slug, m.Label, reason, m.DiskBytes>>10, m.Seconds)
	}
	return m, err
}

// lockLiveAgent holds off a's removal from deleting its checkpoints
// while one is written, and refuses an agent already removed: its
// checkpoint would outlive it.
func (h *Host) lockLiveAgent(a agents.Agent) (unlock func(), err error) {
	h.checkpointsMu.Lock()
	if _, err := h.reg.Get(a.ID); err != nil {
		h.checkpointsMu.Unlock()
		return nil, fmt.Errorf("agent %s: %w (removed meanwhile; its checkpoints went with it)", a.Slug, err)
	}
	return h.checkpointsMu.Unlock, nil
}

// ListAgentCheckpoints lists an agent's checkpoints, oldest first.
func (h *Host) ListAgentCheckpoints(_ context.Context, req api.AgentCheckpointRequest) (api.AgentCheckpointList, error) {
	a, err := h.agentRef(req.Agent)
	if err != nil {
		return api.AgentCheckpointList{}, err
	}
	l, err := h.agentCheckpoints().ListAgent(a)
	return api.AgentCheckpointList{Agent: a, Checkpoints: l}, err
}

// RemoveAgentCheckpoint deletes one of an agent's checkpoints.
func (h *Host) RemoveAgentCheckpoint(_ context.Context, req api.AgentCheckpointRequest) error {
	a, err := h.agentRef(req.Agent)
	if err != nil {
		return err
	}
	return h.agentCheckpoints().RemoveAgent(a, req.Label)
}

// RestoreAgentCheckpoint puts an agent's checkpoint back: its shells end,
// the VM is held still, the current state is saved as an automatic
// checkpoint, the home's and views' contents and the host state are
// replaced, and the settings saved with it put back. No other agent's
// files are touched.
func (h *Host) RestoreAgentCheckpoint(ctx context.Context, req api.AgentCheckpointRequest) (api.AgentRestoreResult, error) {
	var r api.AgentRestoreResult
	a, err := h.agentRef(req.Agent)
	if err != nil {
		return r, err
	}
	s := h.agentCheckpoints()
	if r.Restored, err = s.GetAgent(a, req.Label); err != nil {
		return r, err
	}
	h.env.CloseSessions(a.ID)
	err = h.m.Hold(ctx, "agent restore", func(bool) error {
		unlock, err := h.lockLiveAgent(a)
		if err != nil {
			return err
		}
		defer unlock()
		r.Saved, err = s.CreateAgent(ctx, a, checkpoint.AutoName("auto-", time.Now()), "before restoring "+req.Label)
		if err != nil {
			return fmt.Errorf("saving %s's current state first failed, so nothing was restored: %w", a.Slug, err)
		}
		if _, err := s.RestoreAgent(ctx, a, req.Label); err != nil {
			return fmt.Errorf("%w; %s's state before is in its checkpoint %s", err, a.Slug, r.Saved.Label)
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	h.forgetGuestCache(ctx)
	saved := r.Restored.Settings
	if _, err := h.reg.Update(a.ID, func(x *agents.Agent) error {
		x.AutonomousExec, x.Resources, x.DiskGB, x.Projects = saved.AutonomousExec, saved.Resources, saved.DiskGB, saved.Projects
		return nil
	}); err != nil {
		return r, fmt.Errorf("the files of checkpoint %s are back, but not its settings: %w", req.Label, err)
	}
	h.logf("agent %s: restored checkpoint %s (the state before is checkpoint %s)", a.Slug, req.Label, r.Saved.Label)
	h.pruneAgent(a)
	return r, nil
}

// pruneAgent keeps safetyCheckpoints automatic checkpoints of a (at least
// the one just taken).
func (h *Host) pruneAgent(a agents.Agent) {
	cfg, _ := config.LoadSandbox(h.paths.SandboxJSON()) // defaults on error
	keep := max(cfg.SafetyCheckpoints, 1)
	s := h.agentCheckpoints()
	l, err := s.ListAgent(a)
	if err != nil {
		return
	}
	var auto []checkpoint.AgentMeta
	for _, m := range l {
		if m.Reason != checkpoint.ReasonUser && m.Reason != checkpoint.ReasonAgent {
			auto = append(auto, m)
		}
	}
	for ; len(auto) > keep; auto = auto[1:] {
		if err := s.RemoveAgent(a, auto[0].Label); err != nil {
			h.logf("agent %s: pruning checkpoint %s: %v", a.Slug, auto[0].Label, err)
		}
	}
}

// ForkAgent adds the agent New with Agent's settings and a copy of its
// home, views and installed plugins, given to New's own uid. Secrets are
// not copied: New's plugins name them, and the user sets them for New.
func (h *Host) ForkAgent(ctx context.Context, req api.ForkRequest) (api.ForkResult, error) {
	var r api.ForkResult
	from, err := h.agentRef(req.Agent)
	if err != nil {
		return r, err
	}
	to, err := h.reg.AddWith(req.New, agents.AddOptions{Workspace: h.paths.Workspace()})
	if err != nil {
		return r, err
	}
	undo := func(err error) (api.ForkResult, error) {
		h.agentCheckpoints().RemoveAgentFiles(to)
		if _, rerr := h.reg.Remove(to.ID); rerr != nil {
			err = errors.Join(err, fmt.Errorf("removing the half-made agent %s: %w", to.Slug, rerr))
		}
		return api.ForkResult{}, err
	}
	if to, err = h.reg.Update(to.ID, func(x *agents.Agent) error {
		x.AutonomousExec, x.Resources, x.DiskGB, x.Projects = from.AutonomousExec, from.Resources, from.DiskGB, from.Projects
		return nil
	}); err != nil {
		return undo(err)
	}
	start := time.Now()
	var fr checkpoint.ForkResult
	if err := h.m.Hold(ctx, "agent fork", func(bool) error {
		var err error
		fr, err = h.agentCheckpoints().Fork(ctx, from, to)
		return err
	}); err != nil {
		return undo(err)
	}
	if fr.GuestChown {
		// This process may not give files away: the guest's root does,
		// before the new agent's first command.
		if err := h.guestChown(ctx, to); err != nil {
			return undo(err)
		}
	}
	r = api.ForkResult{Agent: to, Bytes: fr.Bytes, Seconds: time.Since(start).Seconds()}
	h.logf("agent %s forked to %s (uid %d): %d KB in %.2fs", from.Slug, to.Slug, to.UID, fr.Bytes>>10, r.Seconds)
	return r, nil
}

// forgetGuestCache has a running guest drop the file names and inodes it
// cached of the shared folders, so what a restore replaced on the host
// is seen at once (not after the share's cache times out: the guest's
// clock stood still while it was paused for the copy).
func (h *Host) forgetGuestCache(ctx context.Context) {
	g, err := h.running(ctx)
	if err != nil {
		return // stopped: the next boot reads everything afresh
	}
	_, out, st, err := g.Output(ctx, agentproto.ExecRequest{Argv: []string{"sh", "-c", "sync; echo 2 > /proc/sys/vm/drop_caches"}})
	if err == nil && st.Code != 0 {
		err = fmt.Errorf("exit %d: %s", st.Code, out)
	}
	if err != nil {
		h.logf("after a restore, dropping the guest's cache: %v", err)
	}
}

// guestChown gives a's home and views to its uid in the guest.
func (h *Host) guestChown(ctx context.Context, a agents.Agent) error {
	g, err := h.running(ctx)
	if err != nil {
		return fmt.Errorf("this process can't give the copied files to the new agent's uid, and the VM that could is not running: start it (`osaurus-sandbox start`) and fork again: %w", err)
	}
	owner := strconv.Itoa(a.UID) + ":" + strconv.Itoa(a.UID)
	_, out, st, err := g.Output(ctx, agentproto.ExecRequest{Argv: []string{"chown", "-R", "-h", owner,
		sandboxpath.AgentHome(a.Slug), "/workspace/.projects/" + a.Slug}})
	if err == nil && st.Code != 0 {
		err = fmt.Errorf("chown exited %d: %s", st.Code, out)
	}
	return err
}

// agentOwnCheckpoint is an agent's checkpoint of itself
// (sandbox_checkpoint). It refuses an agent's own checkpoint beyond
// MaxAgentOwnCheckpoints, or when its checkpoints and its files would
// exceed its disk quota.
func (h *Host) agentOwnCheckpoint(ctx context.Context, a agents.Agent, label string) (checkpoint.AgentMeta, error) {
	s := h.agentCheckpoints()
	l, err := s.ListAgent(a)
	if err != nil {
		return checkpoint.AgentMeta{}, err
	}
	own := 0
	var disk int64
	for _, m := range l {
		if m.Reason == checkpoint.ReasonAgent {
			own++
			disk += m.DiskBytes
		}
	}
	if own >= MaxAgentOwnCheckpoints {
		return checkpoint.AgentMeta{}, fmt.Errorf("%w: %d checkpoints of your own already (at most %d); the user can remove some with `osaurus-sandbox agent checkpoint-remove %s LABEL`", checkpoint.ErrLimit, own, MaxAgentOwnCheckpoints, a.Slug)
	}
	m, err := h.agentCheckpoint(ctx, a, label, checkpoint.ReasonAgent)
	if err != nil {
		return m, err
	}
	var used int64
	if mon := h.disk.Load(); mon != nil && mon.Tracker != nil {
		used = mon.Tracker.Usage(a.Slug, a.UID)
	} else {
		used = diskquota.Measure(h.paths.Workspace(), h.paths.Output(), []agents.Agent{a})[a.Slug]
	}
	if q := a.DiskQuota(); used+disk+m.DiskBytes > q {
		s.RemoveAgent(a, m.Label)
		return checkpoint.AgentMeta{}, fmt.Errorf("%w: your files (%s) and checkpoints (%s with this one) would exceed your disk quota of %s; free space first",
			checkpoint.ErrLimit, diskquota.Human(used), diskquota.Human(disk+m.DiskBytes), diskquota.Human(q))
	}
	return m, nil
}

// selfCheckpointer serves sandbox_checkpoint: an agent's checkpoint of
// itself, bounded (agentOwnCheckpoint).
type selfCheckpointer struct{ h *Host }

func (s selfCheckpointer) AgentCheckpoint(ctx context.Context, a agents.Agent, label string) (tools.CheckpointInfo, error) {
	m, err := s.h.agentOwnCheckpoint(ctx, a, label)
	if err != nil {
		return tools.CheckpointInfo{}, err
	}
	return tools.CheckpointInfo{Label: m.Label, Bytes: m.Bytes, DiskBytes: m.DiskBytes, Seconds: m.Seconds}, nil
}
