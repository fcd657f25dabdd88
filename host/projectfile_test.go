package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/projects"
)

// OpenProjectFile with an agent serves the changed file of that agent's
// view of an uploaded project, exactly as reviewed: not to an agent
// without the project, not through a link of the view, not a path out of
// it. Without an agent it is the owner's copy, as before.
func TestOpenProjectFileFromTheAgentsView(t *testing.T) {
	h := testHost(t)
	ctx := context.Background()
	alice := aliceAndBob(t, h)
	src, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(src, "a.txt"), []byte("v1\n"), 0o644)
	os.WriteFile(filepath.Join(src, "b.txt"), []byte("b\n"), 0o644)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("SECRET\n"), 0o644)
	pr, pw := io.Pipe()
	go func() { _, err := projects.SendUpload(ctx, src, pw); pw.CloseWithError(err) }()
	p, err := h.UploadProject(ctx, control.ProjectUploadRequest{Name: "app", From: "laptop:" + src}, pr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.SetAgentProjects(ctx, control.AgentProjectsRequest{Agent: "alice", Projects: []string{"app"}}); err != nil {
		t.Fatal(err)
	}
	view := projects.Views{Paths: h.Paths()}.Dir(alice, "app")
	os.WriteFile(filepath.Join(view, "a.txt"), []byte("by alice\n"), 0o644)
	os.Remove(filepath.Join(view, "b.txt"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(view, "b.txt"))

	sum := func(s string) string { x := sha256.Sum256([]byte(s)); return hex.EncodeToString(x[:]) }
	read := func(req control.ProjectFileRequest) (string, error) {
		f, err := h.OpenProjectFile(ctx, req)
		if err != nil {
			return "", err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		return string(b), err
	}
	changed := control.ProjectFileRequest{Agent: alice.ID, Project: p.Name, Path: "a.txt", Hash: sum("by alice\n"), Size: 9}
	if got, err := read(changed); err != nil || got != "by alice\n" {
		t.Errorf("the view's file: %q, %v", got, err)
	}
	copyReq := changed
	copyReq.Agent, copyReq.Hash, copyReq.Size = "", sum("v1\n"), 3
	if got, err := read(copyReq); err != nil || got != "v1\n" {
		t.Errorf("the copy's file: %q, %v", got, err)
	}
	bob := changed
	bob.Agent = "bob"
	if _, err := read(bob); !errors.Is(err, projects.ErrNotGranted) {
		t.Errorf("an agent without the project: %v", err)
	}
	for _, req := range []control.ProjectFileRequest{
		{Agent: alice.ID, Project: p.Name, Path: "b.txt", Hash: sum("SECRET\n"), Size: 7},
		{Agent: alice.ID, Project: p.Name, Path: "../../../" + filepath.Base(outside) + "/secret", Hash: sum("SECRET\n"), Size: 7},
		{Agent: alice.ID, Project: p.Name, Path: "x/../a.txt", Hash: sum("by alice\n"), Size: 9},
	} {
		if got, err := read(req); !errors.Is(err, projects.ErrInvalid) {
			t.Errorf("%s: %q, %v; want refused", req.Path, got, err)
		}
	}
}
