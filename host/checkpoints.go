package host

import (
	"context"
	"fmt"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/provision"
)

var _ api.Checkpointer = (*Host)(nil)

func (h *Host) checkpoints() checkpoint.Store {
	return checkpoint.Store{Paths: h.paths, RootDisk: provision.Layout{Dir: h.paths.ContainerDir()}.RootDisk()}
}

func vmWord(running bool) string {
	if running {
		return "running"
	}
	return "stopped"
}

// CreateCheckpoint takes a sandbox checkpoint, the VM held still for the
// copy (paused after a sync when it runs).
func (h *Host) CreateCheckpoint(ctx context.Context, req api.CheckpointRequest) (checkpoint.Meta, error) {
	name := req.Name
	if name == "" {
		name = checkpoint.AutoName("", time.Now())
	}
	if err := checkpoint.CheckName(name); err != nil {
		return checkpoint.Meta{}, err
	}
	if st := h.m.Status().State; st == control.NotProvisioned || st == control.Provisioning {
		return checkpoint.Meta{}, fmt.Errorf("%w: nothing to checkpoint: the sandbox is not provisioned", control.ErrNotRunning)
	}
	var m checkpoint.Meta
	err := h.m.Hold(ctx, "checkpoint", func(running bool) error {
		var err error
		m, err = h.checkpoints().Create(ctx, name, "user", vmWord(running))
		return err
	})
	if err == nil {
		h.logf("checkpoint %s: %d MB on disk in %.2fs (%s, VM %s)", m.Name, m.DiskBytes>>20, m.Seconds, m.Method, m.VM)
	}
	return m, err
}

// ListCheckpoints lists the sandbox checkpoints, oldest first.
func (h *Host) ListCheckpoints(context.Context) (api.CheckpointList, error) {
	l, err := h.checkpoints().List()
	return api.CheckpointList{Checkpoints: l}, err
}

// RestoreCheckpoint puts a checkpoint's state back: the VM is stopped,
// the current state saved as an automatic checkpoint, the checkpoint's
// copied in, and the VM started again when it was running.
func (h *Host) RestoreCheckpoint(ctx context.Context, req api.CheckpointRequest) (api.RestoreResult, error) {
	s := h.checkpoints()
	var r api.RestoreResult
	var err error
	if r.Restored, err = s.Get(req.Name); err != nil {
		return r, err
	}
	err = h.m.WithStopped(ctx, "restore", func(wasRunning bool) error {
		r.Restarted = wasRunning
		var err error
		r.Saved, err = s.RestoreSaving(ctx, req.Name, checkpoint.AutoName("auto-", time.Now()), "before restoring "+req.Name, vmWord(wasRunning))
		switch {
		case err != nil && r.Saved.Name == "":
			return fmt.Errorf("saving the current state first failed, so nothing was restored: %w", err)
		case err != nil:
			return fmt.Errorf("%w; the state before is in checkpoint %s", err, r.Saved.Name)
		}
		// The restore replaced agents.json: the owner's registry reads
		// the restored one.
		if err := h.reg.Reload(); err != nil {
			h.logf("restore: reloading agents: %v", err)
		}
		return nil
	})
	if err == nil {
		h.logf("restored checkpoint %s (the state before is checkpoint %s)", req.Name, r.Saved.Name)
		h.prune(1)
	}
	return r, err
}

// safetyCheckpoint saves the sandbox before op changes it (a reset or an
// apply), when safetyCheckpoints is not 0, and prunes the automatic ones
// to it. It returns what it took (an empty Meta when it took none).
func (h *Host) safetyCheckpoint(ctx context.Context, op string) (checkpoint.Meta, error) {
	var m checkpoint.Meta
	cfg, _ := config.LoadSandbox(h.paths.SandboxJSON()) // defaults on error
	if cfg.SafetyCheckpoints == 0 {
		return m, nil
	}
	if st := h.m.Status().State; st == control.NotProvisioned || st == control.Provisioning {
		return m, nil // nothing to save
	}
	err := h.m.Hold(ctx, "checkpoint", func(running bool) error {
		var err error
		m, err = h.checkpoints().Create(ctx, checkpoint.AutoName("auto-", time.Now()), "before "+op, vmWord(running))
		if err == nil {
			h.logf("checkpoint %s before %s", m.Name, op)
		}
		return err
	})
	if err != nil {
		return m, fmt.Errorf("the checkpoint before the %s failed, so nothing was changed (set safetyCheckpoints to 0 to go on without one): %w", op, err)
	}
	h.prune(0)
	return m, nil
}

// prune keeps safetyCheckpoints automatic checkpoints, at least least.
func (h *Host) prune(least int) {
	cfg, _ := config.LoadSandbox(h.paths.SandboxJSON()) // defaults on error
	if err := h.checkpoints().Prune(max(cfg.SafetyCheckpoints, least)); err != nil {
		h.logf("pruning automatic checkpoints: %v", err)
	}
}

// RemoveCheckpoint deletes a checkpoint.
func (h *Host) RemoveCheckpoint(_ context.Context, req api.CheckpointRequest) error {
	return h.checkpoints().Remove(req.Name)
}
