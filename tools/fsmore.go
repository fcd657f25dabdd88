package tools

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// Limits of the tools the reference MCP filesystem server has too.
const (
	MaxReadFiles      = 20      // sandbox_read_multiple_files paths
	MaxReadTotalChars = 200_000 // sandbox_read_multiple_files, all files together
	TreeDefaultDepth  = 3       // sandbox_directory_tree
	TreeMaxDepth      = 8
	TreeDefaultNodes  = 200
	TreeMaxNodes      = 2000
)

func init() {
	catalog = append(catalog,
		&tool{
			Spec: Spec{
				Name: "sandbox_file_info",
				Description: "Describe a file, directory or symlink without reading it: {kind: info, path, name, type (file, dir, symlink, other), " +
					"size, mode (octal, e.g. \"0644\"), modified (RFC 3339), uid, gid, target (symlinks)}. Symlinks are not followed. " + pathHelp,
				InputSchema: object(
					str("path", "What to describe.").must(),
				),
				ReadOnly: true, Idempotent: true,
			},
			gate: gateAlways, service: serviceRead, bind: bind(fileInfo),
		},
		&tool{
			Spec: Spec{
				Name: "sandbox_read_multiple_files",
				Description: fmt.Sprintf("Read several text files at once: {kind: files, files: [{path, ok, content, size, truncated} or "+
					"{path, ok: false, error_kind, error}], count}. One file failing doesn't fail the others. At most %d paths; each file "+
					"gets at most max_chars characters (default %d), and all together at most %d. ", MaxReadFiles, DefaultMaxChars, MaxReadTotalChars) + pathHelp,
				InputSchema: object(
					stringList("paths", "The files to read.", 1, MaxReadFiles).must(),
					integer("max_chars", "Most characters to return per file.", 1, MaxMaxChars, DefaultMaxChars),
				),
				ReadOnly: true, Idempotent: true,
			},
			gate: gateAlways, service: serviceRead, bind: bind(readMultiple),
		},
		&tool{
			Spec: Spec{
				Name: "sandbox_directory_tree",
				Description: fmt.Sprintf("A directory's tree as JSON: {kind: tree, path, tree: {name, type, size?, target?, children?}, "+
					"node_count, truncated}. max_depth levels (default %d, max %d), at most max_entries nodes (default %d, max %d); "+
					"symlinks are shown, not followed. ", TreeDefaultDepth, TreeMaxDepth, TreeDefaultNodes, TreeMaxNodes) + pathHelp,
				InputSchema: object(
					str("path", "The directory; default your home."),
					integer("max_depth", "Levels to descend.", 1, TreeMaxDepth, TreeDefaultDepth),
					integer("max_entries", "Most entries to include.", 1, TreeMaxNodes, TreeDefaultNodes),
				),
				ReadOnly: true, Idempotent: true,
			},
			gate: gateAlways, service: serviceRead, bind: bind(directoryTree),
		},
	)
}

type infoArgs struct {
	Path string `json:"path"`
}

type infoResult struct {
	Kind     string `json:"kind"`
	Path     string `json:"path"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Size     int64  `json:"size"`
	Mode     string `json:"mode"`
	Modified string `json:"modified"`
	UID      int    `json:"uid"`
	GID      int    `json:"gid"`
	Target   string `json:"target,omitempty"`
}

func fileInfo(ctx context.Context, c *call, a infoArgs) (any, error) {
	p, err := c.resolve("path", a.Path, "")
	if err != nil {
		return nil, err
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	fi, err := c.g.Stat(ctx, agentproto.PathRequest{Identity: c.as(p.Root), Path: p.Path})
	if err != nil {
		return nil, err
	}
	return infoResult{
		Kind: "info", Path: p.Path, Name: fi.Name, Type: fi.Type, Size: fi.Size,
		Mode: fmt.Sprintf("%04o", fi.Mode), Modified: fi.ModTime.UTC().Format(time.RFC3339),
		UID: fi.UID, GID: fi.GID, Target: fi.SymlinkTarget,
	}, nil
}

type multiArgs struct {
	Paths    []string `json:"paths"`
	MaxChars int      `json:"max_chars"`
}

type multiFile struct {
	Path      string `json:"path"`
	OK        bool   `json:"ok"`
	Content   string `json:"content,omitempty"`
	Size      int64  `json:"size,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	ErrorKind string `json:"error_kind,omitempty"`
	Error     string `json:"error,omitempty"`
}

// readMultiple reads each path as sandbox_read_file does (same checks,
// same confinement), charging the limiters once for the call; a file's
// failure is reported in its entry.
func readMultiple(ctx context.Context, c *call, a multiArgs) (any, error) {
	if len(a.Paths) == 0 || len(a.Paths) > MaxReadFiles {
		return nil, envelope.ArgErrorf("paths", fmt.Sprintf("1 to %d paths", MaxReadFiles), "argument `paths` has %d paths", len(a.Paths))
	}
	per, err := c.bounded("max_chars", a.MaxChars, DefaultMaxChars, MaxMaxChars)
	if err != nil {
		return nil, err
	}
	// Every path is checked before any quota is spent or the VM asked.
	for i, raw := range a.Paths {
		if _, err := c.resolve("paths", raw, ""); err != nil {
			return nil, envelope.ArgErrorf("paths", "paths in your home or /workspace/shared", "paths[%d] %q: %v", i, raw, errMessage(err))
		}
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	left := MaxReadTotalChars
	files := make([]multiFile, 0, len(a.Paths))
	for _, raw := range a.Paths {
		if left == 0 {
			files = append(files, multiFile{Path: raw, ErrorKind: string(envelope.Rejected),
				Error: fmt.Sprintf("not read: the %d characters all files together may return are used up; read it on its own", MaxReadTotalChars)})
			continue
		}
		r, err := readFile(ctx, c, readFileArgs{Path: raw, MaxChars: min(per, left), textOnly: true})
		if err != nil {
			if errors.Is(err, agentproto.ErrUnavailable) {
				return nil, err
			}
			e := envelope.FromError("", err)
			files = append(files, multiFile{Path: raw, ErrorKind: string(e.Kind), Error: e.Message})
			continue
		}
		fr := r.(fileResult)
		left -= len([]rune(fr.Content))
		files = append(files, multiFile{Path: fr.Path, OK: true, Content: fr.Content, Size: fr.Size, Truncated: fr.Truncated})
	}
	return map[string]any{"kind": "files", "files": files, "count": len(files)}, nil
}

func errMessage(err error) string {
	return envelope.FromError("", err).Message
}

type treeArgs struct {
	Path       string `json:"path"`
	MaxDepth   int    `json:"max_depth"`
	MaxEntries int    `json:"max_entries"`
}

type treeNode struct {
	Name     string      `json:"name"`
	Type     string      `json:"type"`
	Size     *int64      `json:"size,omitempty"`
	Target   string      `json:"target,omitempty"`
	Children []*treeNode `json:"children,omitempty"`
}

func directoryTree(ctx context.Context, c *call, a treeArgs) (any, error) {
	p, err := c.resolve("path", a.Path, ".")
	if err != nil {
		return nil, err
	}
	depth, err := c.bounded("max_depth", a.MaxDepth, TreeDefaultDepth, TreeMaxDepth)
	if err != nil {
		return nil, err
	}
	nodes, err := c.bounded("max_entries", a.MaxEntries, TreeDefaultNodes, TreeMaxNodes)
	if err != nil {
		return nil, err
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	r, err := c.g.List(ctx, agentproto.ListRequest{Identity: c.as(p.Root), Path: p.Path, MaxDepth: depth, MaxEntries: nodes})
	if errors.Is(err, agentproto.ErrNotDir) {
		return nil, envelope.ArgErrorf("path", "a directory", "%s is not a directory; describe it with sandbox_file_info", p.Path)
	}
	if err != nil {
		return nil, err
	}
	root := &treeNode{Name: path.Base(p.Path), Type: "dir", Children: []*treeNode{}}
	byPath := map[string]*treeNode{".": root}
	for _, e := range r.Entries {
		n := &treeNode{Name: e.Name, Type: e.Type, Target: e.SymlinkTarget}
		switch e.Type {
		case "file":
			n.Size = &e.Size
		case "dir":
			n.Children = []*treeNode{}
		}
		parent := byPath[path.Dir(e.Path)]
		if parent == nil { // the guest lists parents first; anything else is not placed
			continue
		}
		parent.Children = append(parent.Children, n)
		byPath[path.Clean(e.Path)] = n
	}
	if r.Truncated {
		c.warn("the tree stops at %d entries; ask for a subdirectory, a smaller max_depth or a larger max_entries (up to %d)", nodes, TreeMaxNodes)
	}
	return map[string]any{"kind": "tree", "path": p.Path, "tree": root, "node_count": len(byPath) - 1,
		"max_depth": depth, "truncated": r.Truncated}, nil
}
