package remotes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/projects"
)

// Applying an uploaded project's changes (docs/projects.md, "A project on
// another machine"): this machine's folder is written first, each change
// checked here (projects.WriteApplied), and then the far owner applies
// to its copy exactly the changes written. The command line's `apply`
// through a context and the window of a remote context apply the same
// way (ApplyUploaded).

// ErrNoFolder: the far project was not uploaded from this machine (no
// record of its folder here), so there is nothing here to apply to.
var ErrNoFolder = errdefs.Class(errdefs.ErrNotFound, "not uploaded from this machine")

// Folder is the folder of this machine rc's project was uploaded from,
// where applying its changes writes. It comes from this machine's record
// only; a project uploaded from another machine, or recorded for
// another address of the context, has none (ErrNoFolder, or the error
// says why).
func (l Links) Folder(rc Context, project string) (string, error) {
	k, ok, err := l.Get(rc, project)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%w: %w: project %s of context %s was not uploaded from this machine (`osaurus-sandbox --context %s project add DIR`), so there is no folder here to apply to; apply it on that machine", projects.ErrNotFound, ErrNoFolder, project, rc.Name, rc.Name)
	}
	if k.URL != rc.URL {
		return "", fmt.Errorf("project %s was uploaded to %s, but context %s is now %s: nothing is written; upload it again with `osaurus-sandbox --context %s project add DIR --name %s`", project, k.URL, rc.Name, rc.URL, rc.Name, project)
	}
	return k.Dir, nil
}

// PickChanges are the changes of cs that paths name (every change when
// none is named); a path that is not one of them is an error.
func PickChanges(cs *projects.ChangeSet, paths []string) ([]projects.Change, error) {
	if len(paths) == 0 {
		return cs.Changes, nil
	}
	var chosen []projects.Change
	for _, want := range paths {
		clean := path.Clean(strings.TrimPrefix(want, "./"))
		i := slices.IndexFunc(cs.Changes, func(ch projects.Change) bool { return ch.Path == clean })
		if i < 0 {
			return nil, fmt.Errorf("%w: paths: %q is not one of the changes", projects.ErrInvalid, projects.Shown(want))
		}
		chosen = append(chosen, cs.Changes[i])
	}
	return chosen, nil
}

// FarApplier is what applying needs of the far owner (api.AgentOps has
// it): the changed files of the agent's view, and the apply to its copy.
type FarApplier interface {
	OpenProjectFile(ctx context.Context, req control.ProjectFileRequest) (io.ReadCloser, error)
	ApplyChanges(ctx context.Context, req api.ViewRequest) (*projects.Result, error)
}

// ApplyOutcome is what ApplyUploaded did on each side.
type ApplyOutcome struct {
	// Dir is this machine's folder, written first.
	Dir string
	// Here is what WriteApplied did in Dir: Done were written there,
	// Refused and Conflict were not (and were not asked of the far side).
	Here *projects.Result
	// Far is the far owner's answer; nil when it was not asked (nothing
	// was written here) or answered nothing.
	Far *projects.Result
	// Applied were written here and applied there: done on both sides.
	Applied []string
	// Pending were written here but not applied there: still changes
	// there, which the next apply finishes (this folder then holds them).
	Pending []string
	// Unasked are paths the far side says it applied though it was not
	// asked to (not written here): a far side that is wrong or lies.
	Unasked []string
	// Checkpoint is the checkpoint the far owner saved first ("": none).
	Checkpoint string
}

// Problems counts the changes not applied on both sides and the far
// side's answers that don't match what it was asked.
func (o ApplyOutcome) Problems() int {
	n := len(o.Pending) + len(o.Unasked)
	if o.Here != nil {
		n += len(o.Here.Refused) + len(o.Here.Conflict)
	}
	if o.Far != nil {
		n += len(o.Far.Refused) + len(o.Far.Conflict) + len(o.Far.Changed)
	}
	return n
}

// ApplyUploaded applies the review cs of a's changes to the far project
// p, uploaded from this machine: the changes o.Paths names (all when
// none) are written into this machine's folder recorded in links, then
// the far owner applies exactly those written, under the same review id
// (o.Review must be cs.Review: the review the user saw). A change this
// folder can't take (refused, changed here since the upload without
// o.Force, a failed write) is not asked of the far side, so it stays a
// change there and is never lost between the two. Nothing the far side
// says is trusted beyond cs: the content of each change is checked here
// against cs's size and hash, and where this machine writes is its own
// record. The error joins a failed write here and a failed apply there;
// the outcome says what was done either way.
func ApplyUploaded(ctx context.Context, far FarApplier, rc Context, links Links, a agents.Agent, p projects.Project, cs *projects.ChangeSet, o projects.ApplyOptions) (ApplyOutcome, error) {
	var out ApplyOutcome
	if cs == nil || o.Review == "" || o.Review != cs.Review {
		// A review is its content: another id means other changes than
		// those shown.
		return out, fmt.Errorf("%w: apply exactly the review shown", projects.ErrInvalid)
	}
	dir, err := links.Folder(rc, p.Name)
	if err != nil {
		return out, err
	}
	out.Dir = dir
	chosen, err := PickChanges(cs, o.Paths)
	if err != nil {
		return out, err
	}
	fetch := func(ctx context.Context, ch projects.Change) (io.ReadCloser, error) {
		return far.OpenProjectFile(ctx, control.ProjectFileRequest{Agent: a.ID, Project: p.Name, Path: ch.Path, Hash: ch.Hash, Size: ch.Size})
	}
	// This folder first: WriteApplied judges each change as it writes it.
	here, werr := projects.WriteApplied(ctx, dir, chosen, o, fetch)
	out.Here = here
	written := here.Done
	var ferr error
	if len(written) > 0 {
		send := written
		if len(o.Paths) == 0 && len(written) == len(cs.Changes) {
			send = nil // the whole review: the far side also names what appeared since
		}
		req := api.ViewRequest{Agent: a.ID, Project: p.Name, Paths: send, Apply: projects.ApplyOptions{Review: o.Review, Paths: send,
			Force: o.Force, AllowHostExec: o.AllowHostExec, AllowLarge: o.AllowLarge}}
		out.Far, ferr = far.ApplyChanges(ctx, req)
		if out.Far != nil {
			out.Checkpoint = out.Far.Checkpoint
		}
	}
	// A path is applied when both sides have it.
	for _, d := range written {
		if out.Far != nil && slices.Contains(out.Far.Done, d) {
			out.Applied = append(out.Applied, d)
		} else {
			out.Pending = append(out.Pending, d)
		}
	}
	if out.Far != nil {
		for _, d := range out.Far.Done {
			if !slices.Contains(written, d) {
				out.Unasked = append(out.Unasked, d)
			}
		}
	}
	return out, errors.Join(werr, ferr)
}
