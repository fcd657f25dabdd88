package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"path"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// MaxShareBytes bounds the file sandbox_share_artifact copies; shareChunk
// is what one guest read or write carries (under the frame limit).
const (
	MaxShareBytes = 100 << 20
	shareChunk    = 8 << 20
)

// OutputRoot is where the VM mounts the host's output folder.
const OutputRoot = "/output"

func init() {
	catalog = append(catalog, &tool{
		Spec: Spec{
			Name: "sandbox_share_artifact",
			Description: fmt.Sprintf("Share a file with the user: copy it to /output/<your agent>/<its name>, which the user sees in the app's output folder, "+
				"and tell the connected clients with a resource link. Returns {kind: artifact, path, name, host_path, mime_type, size, sha256, replaced}. "+
				"A file of the same name you shared before is replaced (replaced: true); /output/<your agent> holds only your artifacts. "+
				"host_path is the host's checked copy of what you shared: later changes to /output don't reach it. "+
				"Regular files only (no symlinks, directories or devices), at most %d bytes; the copy counts against your disk quota. ", MaxShareBytes) + pathHelp,
			InputSchema: object(
				str("path", "The file to share.").must(),
			),
			// It replaces the agent's own earlier artifact of the name.
			Destructive: true,
		},
		gate: gateAutonomous, service: serviceWrite, bind: bind(shareArtifact),
	})
}

type shareArgs struct {
	Path string `json:"path"`
}

// ArtifactResult is sandbox_share_artifact's result; the MCP server adds
// a resource link to HostPath.
type ArtifactResult struct {
	Kind     string `json:"kind"` // "artifact"
	Path     string `json:"path"`
	Name     string `json:"name"`
	HostPath string `json:"host_path,omitempty"`
	MIMEType string `json:"mime_type,omitempty"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	Replaced bool   `json:"replaced"`
}

// shareArtifact copies the file in the guest, as the agent's own user, so
// the kernel's permissions and the agent's disk quota (files it owns under
// /output) apply as to its other writes. The source must be a regular file
// (checked without following symlinks); the destination is written beneath
// /output (os.Root in the guest: no symlink leads out of it) to a
// temporary name and renamed into place, and neither /output/<slug> nor
// the name may be a symlink or a non-file.
func shareArtifact(ctx context.Context, c *call, a shareArgs) (any, error) {
	p, err := c.resolve("path", a.Path, "")
	if err != nil {
		return nil, err
	}
	if isRoot(p) {
		return nil, envelope.ArgErrorf("path", "a file", "%s is %s, not a file", p.Path, rootName(p))
	}
	name := path.Base(p.Path)
	if name == "." || name == "/" || name == ".." || len(name) > 255 {
		return nil, envelope.ArgErrorf("path", "a file with a name", "%s has no file name to share it under", p.Path)
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	src := c.as(p.Root)
	fi, err := c.g.Stat(ctx, agentproto.PathRequest{Identity: src, Path: p.Path})
	if err != nil {
		return nil, err
	}
	switch {
	case fi.Type == "symlink":
		return nil, envelope.ArgErrorf("path", "a regular file, not a symlink", "%s is a symlink (to %q); share the file it points to by its own path", p.Path, fi.SymlinkTarget)
	case fi.Type == "dir":
		return nil, envelope.ArgErrorf("path", "a regular file", "%s is a directory; pack it first (e.g. tar with sandbox_exec) and share the archive", p.Path)
	case fi.Type != "file":
		return nil, envelope.ArgErrorf("path", "a regular file", "%s is not a regular file (a device, FIFO or socket)", p.Path)
	case fi.Size > MaxShareBytes:
		return nil, envelope.ArgErrorf("path", fmt.Sprintf("a file of at most %d bytes", MaxShareBytes),
			"%s is %d bytes, over the %d-byte limit; compress or split it", p.Path, fi.Size, MaxShareBytes)
	}
	dst := c.as(OutputRoot)
	dir := c.agent.Slug
	if err := c.outputDir(ctx, OutputRoot+"/"+dir); err != nil {
		return nil, err
	}
	final := OutputRoot + "/" + dir + "/" + name
	replaced := false
	if ti, err := c.g.Stat(ctx, agentproto.PathRequest{Identity: dst, Path: final}); err == nil {
		if ti.Type != "file" {
			return nil, envelope.Errorf(envelope.ExecutionError, "%s is a %s; delete it and share again", final, ti.Type)
		}
		replaced = true
	} else if !errors.Is(err, agentproto.ErrNotFound) {
		return nil, err
	}
	tmp := OutputRoot + "/" + dir + "/.share-" + name + ".part"
	h := sha256.New()
	var size int64
	done := false
	defer func() {
		if !done { // no half copy is left behind
			c.g.Remove(context.WithoutCancel(ctx), agentproto.PathRequest{Identity: dst, Path: tmp})
		}
	}()
	for first := true; first || size < fi.Size; first = false {
		r, err := c.g.ReadFile(ctx, agentproto.ReadFileRequest{Identity: src, Path: p.Path, Offset: size, Length: shareChunk, MaxBytes: shareChunk})
		if err != nil {
			return nil, err
		}
		if r.Size > MaxShareBytes || size+int64(len(r.Data)) > MaxShareBytes {
			return nil, envelope.ArgErrorf("path", fmt.Sprintf("a file of at most %d bytes", MaxShareBytes), "%s grew past the %d-byte limit while it was copied", p.Path, MaxShareBytes)
		}
		if _, err := c.g.WriteFile(ctx, agentproto.WriteFileRequest{Identity: dst, Path: tmp, Data: r.Data, Mode: 0o644, MakeParents: first, Append: !first}); err != nil {
			return nil, fmt.Errorf("copy to %s: %w", final, err)
		}
		h.Write(r.Data)
		size += int64(len(r.Data))
		if len(r.Data) == 0 {
			break // the file shrank meanwhile: share what there is
		}
	}
	if err := c.g.Move(ctx, agentproto.MoveRequest{Identity: dst, Src: tmp, Dst: final, Overwrite: true}); err != nil {
		return nil, fmt.Errorf("rename into %s: %w", final, err)
	}
	done = true
	res := ArtifactResult{Kind: "artifact", Path: final, Name: name, Size: size, SHA256: hex.EncodeToString(h.Sum(nil)),
		MIMEType: mime.TypeByExtension(path.Ext(name)), Replaced: replaced}
	if c.env.outputDir != "" && c.env.keepDir != "" {
		// What the host hands a client is the host's checked copy, never
		// the agent's file (see keepArtifact).
		kept, err := keepArtifact(ctx, c.env.outputDir, c.env.keepDir, dir, name, res.SHA256)
		if err != nil {
			return nil, envelope.Errorf(envelope.ExecutionError, "%s was shared, but the host could not keep a checked copy: %v; share it again without touching it meanwhile", final, err)
		}
		res.HostPath = kept
	}
	return res, nil
}

// outputDir makes sure /output/<slug> is a directory (not a symlink) the
// agent owns. /output is root's (agents can't write there), so root
// creates the directory and gives it to the agent's user; no agent can
// plant anything at that name first.
func (c *call) outputDir(ctx context.Context, dir string) error {
	fi, err := c.g.Stat(ctx, agentproto.PathRequest{Path: dir})
	if errors.Is(err, agentproto.ErrNotFound) {
		if err := c.g.Mkdir(ctx, agentproto.PathRequest{Path: dir, Mode: 0o755}); err != nil && !errors.Is(err, agentproto.ErrExists) {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		fi, err = c.g.Stat(ctx, agentproto.PathRequest{Path: dir})
	}
	if err != nil {
		return err
	}
	if fi.Type != "dir" {
		return envelope.Errorf(envelope.ExecutionError, "%s is a %s, not a directory; ask the user to remove it from the output folder", dir, fi.Type)
	}
	if c.agent.UID != 0 && fi.UID == c.agent.UID {
		return nil
	}
	// -h: never follow a link (there is none: it was checked above). The
	// mode drops any write permission a directory made by someone else
	// had, so only the agent writes in it.
	for _, argv := range [][]string{{"chown", "-h", c.agent.User() + ":", dir}, {"chmod", "0755", dir}} {
		_, stderr, st, err := c.g.Output(ctx, agentproto.ExecRequest{Argv: argv})
		if err == nil && st.Code != 0 {
			err = fmt.Errorf("%s: %s", argv[0], strings.TrimSpace(string(stderr)))
		}
		if err != nil {
			return fmt.Errorf("give %s to %s: %w", dir, c.agent.User(), err)
		}
	}
	return nil
}
